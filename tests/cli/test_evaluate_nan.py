"""`evaluate` of an anomaly or graph run trained to NaN printed the accuracy of the argmax of its
NaN rows (element 0 of every set; the first class for every node), exit 0 and not a word, where
tag, reverse and classify runs say so and write null. Now they say it the same way
(``attnlab.tasks.base.without_nan_metrics``)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from attnlab.cli import main

from ..tasks.test_nan_answers_sequence_tag import _nan_copy

pytestmark = pytest.mark.slow  # reads the session's runs (tests/cli/conftest.py)


def _anomaly_warning(warning, run):
    assert warning == (f"warning: {run} gives NaN for 64 of 64 inputs (first: test set 1); its "
                       f"metrics are null")


def _graph_warning(warning, run):
    assert warning.startswith(f"warning: {run} gives NaN for ")
    assert "(first: test node " in warning and warning.endswith("; its metrics are null")


WARNINGS = {"anomaly": _anomaly_warning, "graph": _graph_warning}


@pytest.fixture(params=sorted(WARNINGS))
def task_run(request, runs):
    """The session's run of the task, checked unchanged after the test (copied before NaN)."""
    return request.param, runs[request.param][0]


@pytest.fixture
def anomaly_run(runs):
    """The session's anomaly run, checked unchanged after the test."""
    return runs["anomaly"][0]


def test_evaluate_of_nan_outputs_scores_null_with_one_warning(task_run, tmp_path, capsys):
    task, given = task_run
    run = _nan_copy(given, tmp_path)
    capsys.readouterr()
    assert main(["evaluate", str(run)]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"test_accuracy": None}
    warning, = [line for line in err.splitlines() if "NaN" in line]
    WARNINGS[task](warning, run)


def test_evaluate_of_finite_outputs_scores_and_warns_nothing(task_run, capsys):
    capsys.readouterr()
    assert main(["evaluate", str(task_run[1])]) == 0
    out, err = capsys.readouterr()
    assert isinstance(json.loads(out)["test_accuracy"], float) and "NaN" not in err


def test_evaluate_builds_and_scores_the_test_sets_once(anomaly_run, monkeypatch, capsys):
    import attnlab
    from attnlab.runs import read_yaml
    from attnlab.tasks.anomaly import runtime

    cfg = read_yaml(anomaly_run / "config.yaml")
    expected = runtime.anomaly_accuracy(attnlab.load(anomaly_run), SimpleNamespace(
        test_sets=cfg["test_sets"], set_size=cfg["set_size"]))  # by predict, as training scores
    real, built = runtime.fixed_sets, []
    monkeypatch.setattr(runtime, "fixed_sets", lambda *a: built.append(a) or real(*a))
    capsys.readouterr()
    assert main(["evaluate", str(anomaly_run)]) == 0
    assert json.loads(capsys.readouterr().out) == {"test_accuracy": expected}
    assert len(built) == 1  # the NaN check and the accuracy: one building, one pass
