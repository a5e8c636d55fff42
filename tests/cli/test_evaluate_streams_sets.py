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
from attnlab.data import tables
from attnlab.data.feature_sets import check_set_rows, feature_set_chunks, read_feature_sets
from attnlab.errors import UsageError

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


def test_a_checked_file_of_sets_is_read_once_more_for_the_same_sets(tmp_path, monkeypatch):
    path = write_sets(tmp_path / "clouds.csv", n=SETS, seed=4)
    whole = list(feature_set_chunks(path, **COLUMNS, sets=8))
    checked = check_set_rows(path, **COLUMNS)
    readings = _readings(monkeypatch)
    given = list(feature_set_chunks(path, **COLUMNS, sets=8, checked=checked))
    assert readings == [path]  # the first reading is the one given
    assert [c.ids for c in given] == [c.ids for c in whole]
    assert [c.sha256 for c in given] == [c.sha256 for c in whole]
    for a, b in zip((s for c in given for s in c), (s for c in whole for s in c)):
        torch.testing.assert_close(a[0], b[0], rtol=0, atol=0)
        assert a[1] == b[1]


def test_a_set_relabelled_between_the_readings_is_refused_before_it_is_given(tmp_path):
    path = write_sets(tmp_path / "clouds.csv", n=12, seed=7)
    checked = check_set_rows(path, **COLUMNS)
    text = path.read_text()
    path.write_text(text.replace(",left,", ",right,"))  # every row of the left sets
    given = []
    with pytest.raises(UsageError, match="changed while evaluate read it"):
        for chunk in feature_set_chunks(path, **COLUMNS, sets=1, checked=checked):
            given += [(i, y) for i, (_, y) in zip(chunk.ids, chunk)]
    assert all(checked.labels[i][0] == y for i, y in given)  # no label that was not checked


def _readings(monkeypatch) -> list:
    """The files ``table_chunks`` begins to read from now on, one entry a reading."""
    real, files = tables.table_chunks, []

    def counted(path, *args, **kwargs):
        files.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(tables, "table_chunks", counted)
    return files


@pytest.mark.slow
def test_a_file_of_sets_is_scored_a_chunk_of_sets_at_a_time(sets_run, scored,  # noqa: F811
                                                          monkeypatch, capsys, tmp_path):
    path = write_sets(tmp_path / "held.csv", n=SETS, seed=random.Random(3).randint(5, 99))
    readings = _readings(monkeypatch)
    whole, _ = _evaluate(capsys, sets_run, path)
    assert scored == [SETS]
    assert len(readings) == 2  # checked, then scored: each set built once
    readings.clear()
    monkeypatch.setattr(classify_runtime, "CHUNK_ROWS", 8)
    scored.clear()
    chunked, err = _evaluate(capsys, sets_run, path)
    assert scored == [8] * 7 + [5]  # never more than a chunk of sets at once
    assert f"evaluate: {SETS} of {SETS} sets" in err  # what it counts, not the rows
    assert chunked == whole
    assert len(readings) == 2


@pytest.mark.slow
def test_a_set_of_a_label_never_trained_is_refused_before_any_set_is_scored(
        sets_run, scored, capsys, tmp_path):  # noqa: F811
    path = write_sets(tmp_path / "held.csv", n=12, seed=6)
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("s7,"))
    lines = [line.replace(",left,", ",up,").replace(",right,", ",up,")
             if line.startswith("s7,") else line for line in lines]
    path.write_text("\n".join(lines) + "\n")
    out, err = _evaluate(capsys, sets_run, path, code=2)
    assert scored == [] and out == ""
    assert err.count("\n") == 1
    assert f"--data {path} line {at + 1}: label 'up' never seen in training" in err
