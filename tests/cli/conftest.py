"""A tiny trained run of every task, trained once per pytest-xdist worker and shared by the
modules that read runs of every task (test_view.py, test_plot_figures.py, test_many_inputs.py)
and those that need one of them (the anomaly and graph runs of test_evaluate_nan_*.py).

Each of those modules trained the same eight runs in a module fixture of its own, about 20 s of
CPU each time, in each worker that ran one of its tests. The runs are now trained once per
worker, so a test must leave them as it found them: ``runs`` checks after each test that no file
of the runs was added, removed or rewritten (tests/conftest.py's ``left_unchanged``), and
``run_copy`` gives a test a fresh copy of one run to write into.
"""
import shutil

import pytest

from attnlab.cli import main
from attnlab.tasks.jets.data import write_jets

from ..conftest import files_of, left_unchanged
from ..jets.test_task import synthetic_jets
from ..reliability.conftest import task_data, tiny_args
from ..tasks.test_classify_sets import SET_ARGS, write_sets

INPUTS = {"reverse": "3 1 4 1 5", "anomaly": "0 1 2 3 4", "classify": "the film was great",
          "translate": "342", "lm": "the quick fox", "sets": "0.5,1;-1,2;0,0",  # lm: <= 16
          "jets": None, "graph": "33"}


@pytest.fixture(scope="session")
def trained_runs(tmp_path_factory):
    """{name: (run directory, --input)} of a tiny trained run of every task; read only (the
    ``runs`` fixture is the one tests take)."""
    tmp = tmp_path_factory.mktemp("view_runs")
    data = task_data(tmp)
    jets = tmp / "jets.h5"
    write_jets(jets, *synthetic_jets(40))
    argv = {
        "reverse": ["train", "reverse", "--max-steps", "5", "--train-size", "64", "--val-size",
                    "16", "--test-size", "16", "--model-dim", "16", "--num-heads", "2",
                    "--num-layers", "2", "--threads", "1"],
        "sets": ["train", "classify", "--data", str(write_sets(tmp / "clouds.csv")), *SET_ARGS,
                 "--max-steps", "5", "--batch-size", "16", "--model-dim", "16", "--num-heads",
                 "2", "--num-layers", "1", "--dim-feedforward", "32"],
        "jets": ["train", "jets", "--data", str(jets), "--max-steps", "4", "--batch-size", "16",
                 "--model-dim", "16", "--num-heads", "2", "--dim-feedforward", "32",
                 "--max-constituents", "30", "--val-every", "2", "--pair-bias"],
        "graph": ["train", "graph", "--max-steps", "5"],
    }
    for task in ("anomaly", "classify", "translate", "lm"):
        argv[task] = ["train", task, *tiny_args(task, data, "--max-steps", "5")]
    out = {}
    for name, args in argv.items():
        run = tmp / name
        assert main([*args, "--out", str(run)]) == 0, args
        out[name] = (run, INPUTS[name] or f"{jets}:0")
    return out


@pytest.fixture
def runs(trained_runs):
    """The shared runs of ``trained_runs``, checked unchanged after the test: a test that writes
    into one would hand the tests after it a run that differs from what it was trained as."""
    dirs = [run for run, _ in trained_runs.values()]
    before = files_of(*dirs)
    yield trained_runs
    left_unchanged(before, *dirs)


@pytest.fixture
def run_copy(trained_runs, tmp_path):
    """``run_copy(name)``: (a fresh copy of that run, its --input), the copy the test's own."""
    def copy(name):
        run, text = trained_runs[name]
        return shutil.copytree(run, tmp_path / "runs" / name), text
    return copy
