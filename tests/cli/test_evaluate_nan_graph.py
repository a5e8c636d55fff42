"""`evaluate` of a graph run trained to NaN printed the accuracy of the argmax of its NaN rows
(the first class for every node), exit 0 and not a word, where tag, reverse and classify runs
say so and write null. Now it says it the same way (``attnlab.tasks.base.without_nan_metrics``)."""
from __future__ import annotations

import json

import pytest

from attnlab.cli import main

from ..tasks.test_nan_answers_sequence_tag import _nan_copy

pytestmark = pytest.mark.slow  # reads the session's runs (tests/cli/conftest.py)


@pytest.fixture
def graph_run(runs):
    """The session's graph run, checked unchanged after the test (copied before NaN)."""
    return runs["graph"][0]


def test_evaluate_of_nan_outputs_scores_null_with_one_warning(graph_run, tmp_path, capsys):
    run = _nan_copy(graph_run, tmp_path)
    capsys.readouterr()
    assert main(["evaluate", str(run)]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"test_accuracy": None}
    warning, = [line for line in err.splitlines() if "NaN" in line]
    assert warning.startswith(f"warning: {run} gives NaN for ")
    assert "(first: test node " in warning and warning.endswith("; its metrics are null")


def test_evaluate_of_finite_outputs_scores_and_warns_nothing(graph_run, capsys):
    capsys.readouterr()
    assert main(["evaluate", str(graph_run)]) == 0
    out, err = capsys.readouterr()
    assert isinstance(json.loads(out)["test_accuracy"], float) and "NaN" not in err
