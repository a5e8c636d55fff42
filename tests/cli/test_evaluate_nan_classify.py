"""`evaluate` of a classify run trained to NaN scored the answers read from its NaN outputs
(the first class everywhere) and printed them as any other scores, exit 0 and not a word;
tag and reverse runs said so and wrote null. Now classify says it the same way
(``attnlab.tasks.base.said_nan``, ``null_scores``): every score null, counts kept, one warning
naming how many inputs and the first, of the run's test split and of ``--data FILE`` read a
chunk at a time alike."""
from __future__ import annotations

import json

import pytest

import attnlab.tasks.classify.runtime as classify_runtime
from attnlab.cli import main

from ..tasks.test_nan_answers_sequence_tag import _nan_copy
from .test_predict_json_numbers import classify_run  # noqa: F401

pytestmark = pytest.mark.slow  # trains a run


@pytest.fixture
def nan_run(classify_run, tmp_path):  # noqa: F811
    return _nan_copy(classify_run, tmp_path)


def _scores(metrics: dict) -> list:
    """Every score of ``metrics`` (the per-class table's too), not its counts."""
    table = [v for row in metrics["test_per_class"].values() for k, v in row.items()
             if k != "support"]
    return [v for k, v in metrics.items() if k.startswith("test_") and
            k != "test_per_class" and not isinstance(v, list)] + table


def _warning(err: str) -> str:
    warning, = [line for line in err.splitlines() if line.startswith("warning:") and "NaN" in line]
    return warning


def test_evaluate_of_nan_outputs_scores_null_with_one_warning(nan_run, capsys):
    capsys.readouterr()
    assert main(["evaluate", str(nan_run)]) == 0
    out, err = capsys.readouterr()
    metrics = json.loads(out)
    assert _scores(metrics) and all(v is None for v in _scores(metrics))
    assert all(row["support"] >= 0 for row in metrics["test_per_class"].values())  # kept
    warning = _warning(err)
    assert warning.startswith(f"warning: {nan_run} gives NaN for ")
    assert "(first: row 1 of the test split)" in warning
    assert warning.endswith("; its metrics are null")


def test_a_data_file_read_in_chunks_says_it_once_of_all_its_rows(nan_run, monkeypatch, capsys,
                                                                  tmp_path):
    path = tmp_path / "held.csv"
    path.write_text("text,label\n" + "the film was great,pos\nthe film was dull,neg\n" * 10)
    monkeypatch.setattr(classify_runtime, "CHUNK_ROWS", 8)
    capsys.readouterr()
    assert main(["evaluate", str(nan_run), "--data", str(path)]) == 0
    out, err = capsys.readouterr()
    assert all(v is None for v in _scores(json.loads(out)))
    assert _warning(err) == (f"warning: {nan_run} gives NaN for 20 of 20 inputs (first: --data "
                             f"{path} line 2); its metrics are null")


def test_evaluate_of_finite_outputs_scores_and_warns_nothing(classify_run, capsys):  # noqa: F811
    capsys.readouterr()
    assert main(["evaluate", str(classify_run)]) == 0
    out, err = capsys.readouterr()
    assert all(isinstance(v, float) for v in _scores(json.loads(out)))
    assert "NaN" not in err
