"""`evaluate DIR --data FILE` of a classify run on sets (``--set-column``) read the whole file
(every row a dict, then every set) before scoring it; the rows of texts were already read a
chunk at a time. Now a file of sets is read as its rows come, twice (checked, then scored a
chunk of sets at a time, each set once its last row is read, in order of first row), with the
sets, lines and checks of the whole-file reader (``read_feature_sets``) and the scores of all
the sets at once. The chunk is made small here (8 sets) so that a file of 61 has eight."""
from __future__ import annotations

import random

import pytest
import torch

import attnlab.tasks.classify.runtime as classify_runtime
from attnlab.data.feature_sets import feature_set_chunks, read_feature_sets

from ..tasks.test_classify_sets import sets_run, write_sets  # noqa: F401
from .test_evaluate_streams import _evaluate, scored  # noqa: F401

SETS = 61
COLUMNS = {"set_column": "cloud", "label_column": "side", "feature_columns": ["x", "y"]}


def test_chunks_of_sets_are_the_sets_of_the_whole_file(tmp_path):
    path = write_sets(tmp_path / "clouds.csv", n=SETS, seed=1)  # rows of sets shuffled
    whole = read_feature_sets(path, **COLUMNS)
    chunks = list(feature_set_chunks(path, **COLUMNS, sets=8))
    assert [len(c) for c in chunks] == [8] * 7 + [5]
    assert [i for c in chunks for i in c.ids] == whole.ids
    assert [i for c in chunks for i in c.lines] == whole.lines
    got = [s for c in chunks for s in c]
    assert [y for _, y in got] == [y for _, y in whole]
    for (x, _), (expected, _) in zip(got, whole):
        torch.testing.assert_close(x, expected, rtol=0, atol=0)  # the same rows, in order
    assert chunks[-1].sha256 == whole.sha256  # the file's digest, once read


def test_a_set_with_two_labels_is_refused_as_the_whole_file_reader_refuses_it(tmp_path):
    path = write_sets(tmp_path / "clouds.csv", n=20, seed=2)
    path.write_text(path.read_text() + "s3,nowhere,0.5,1.0,n/a\n")
    with pytest.raises(Exception) as whole:
        read_feature_sets(path, **COLUMNS)
    with pytest.raises(type(whole.value)) as chunked:
        list(feature_set_chunks(path, **COLUMNS, sets=4))
    assert str(chunked.value) == str(whole.value)


@pytest.mark.slow
def test_a_file_of_sets_is_scored_a_chunk_of_sets_at_a_time(sets_run, scored,  # noqa: F811
                                                          monkeypatch, capsys, tmp_path):
    path = write_sets(tmp_path / "held.csv", n=SETS, seed=random.Random(3).randint(5, 99))
    whole, _ = _evaluate(capsys, sets_run, path)
    assert scored == [SETS]
    monkeypatch.setattr(classify_runtime, "CHUNK_ROWS", 8)
    scored.clear()
    chunked, err = _evaluate(capsys, sets_run, path)
    assert scored == [8] * 7 + [5]  # never more than a chunk of sets at once
    assert f"evaluate: {SETS} of {SETS} rows" in err
    assert chunked == whole
