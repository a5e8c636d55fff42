"""`evaluate` of an anomaly run trained to NaN printed the accuracy of the argmax of its NaN
rows (element 0 of every set), exit 0 and not a word, where tag, reverse and classify runs say
so and write null. Now it says it the same way (``attnlab.tasks.base.without_nan_metrics``)."""
from __future__ import annotations

import json

import pytest

from attnlab.cli import main

from ..reliability.conftest import tiny_args
from ..tasks.test_nan_answers_sequence_tag import _nan_copy

pytestmark = pytest.mark.slow  # trains a run


@pytest.fixture(scope="module")
def anomaly_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("nan_anomaly") / "run"
    assert main(["train", "anomaly", *tiny_args("anomaly", {}, "--max-steps", "3"),
                 "--out", str(run)]) == 0
    return run


def test_evaluate_of_nan_outputs_scores_null_with_one_warning(anomaly_run, tmp_path, capsys):
    run = _nan_copy(anomaly_run, tmp_path)
    capsys.readouterr()
    assert main(["evaluate", str(run)]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"test_accuracy": None}
    warning, = [line for line in err.splitlines() if "NaN" in line]
    assert warning == (f"warning: {run} gives NaN for 64 of 64 inputs (first: test set 1); its "
                       f"metrics are null")


def test_evaluate_of_finite_outputs_scores_and_warns_nothing(anomaly_run, capsys):
    capsys.readouterr()
    assert main(["evaluate", str(anomaly_run)]) == 0
    out, err = capsys.readouterr()
    assert isinstance(json.loads(out)["test_accuracy"], float) and "NaN" not in err
