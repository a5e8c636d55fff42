"""A data file given as a stream: ``--data <(cat my.tsv)``, a FIFO, ``/dev/stdin`` fed by a
pipe. Every task's data flags and ``evaluate --data`` answer alike: one line naming the flag
and the path, exit 2, before a run directory is written. (A run records each file's SHA-256
and reads the file again on ``--resume`` and in ``evaluate``, which a stream cannot give.)
``train tag`` read the pipe, then crashed with a ``FileNotFoundError`` traceback where the
run recorded its digest; classify waited forever on a FIFO named ``.csv``, for a second read.
"""
from __future__ import annotations

import os
import shutil

import pytest

from attnlab.cli import main
from attnlab.tasks.jets.data import write_jets

from ..jets.test_task import synthetic_jets
from ..reliability.conftest import task_data, tiny_args


def pipe_of(text: str) -> str:
    """The path of a pipe that holds ``text`` and whose writer has closed (as ``<(cat F)``
    gives), so that a reader that opened it, even twice, gets an end, never a wait."""
    read, write = os.pipe()
    os.write(write, text.encode())
    os.close(write)
    return f"/dev/fd/{read}"


def refused(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def said(flag: str, path: str) -> str:
    return (f"attnlab: error: {flag}: {path} is not a regular file (a pipe, as <(...) gives, "
            f"or a device); write its text to a file and give that")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stream_data")
    data = task_data(tmp)
    data["jets"] = tmp / "jets.h5"
    write_jets(data["jets"], *synthetic_jets(40))
    data["translate"] = tmp / "pairs.tsv"
    data["translate"].write_text("source\ttarget\n" + "".join(
        f"{n}\t{'x' * (n % 5 + 1)}\n" for n in range(60)))
    return data


# (task, flag, what the pipe holds: the task's own file, so only its being a pipe is wrong)
CASES = [("tag", "--data"), ("tag", "--val"), ("tag", "--test"),
         ("classify", "--data"), ("classify", "--val"), ("classify", "--test"),
         ("translate", "--data"), ("translate", "--test"),
         ("lm", "--data"), ("jets", "--data"), ("jets", "--val"), ("jets", "--test")]


@pytest.mark.slow  # the CLI, in process
@pytest.mark.parametrize("task, flag", CASES)
def test_a_pipe_for_any_data_flag_is_refused_in_one_line_before_the_run(task, flag, files,
                                                                        tmp_path, capsys):
    own = files[task]
    stream = pipe_of("" if task == "jets" else own.read_text())  # an HDF5 file is binary
    given = {"data": str(own)} if flag != "--data" else {}
    argv = ["train", task, "--data", given.get("data", stream),
            *([flag, stream] if flag != "--data" else []), "--out", str(tmp_path / "run"),
            "--max-steps", "2", "--threads", "1"]
    if task == "translate":
        argv += ["--src-column", "source", "--tgt-column", "target"]
    assert refused(argv, capsys) == said(flag, stream)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_fifo_named_like_a_table_is_refused_not_waited_on(files, tmp_path, capsys):
    """A FIFO no one writes to: opened, the command would wait forever."""
    fifo = tmp_path / "reviews.csv"
    os.mkfifo(fifo)
    out = tmp_path / "run"
    assert refused(["train", "classify", "--data", str(fifo), "--out", str(out)],
                   capsys) == said("--data", str(fifo))
    assert not out.exists()


@pytest.fixture(scope="module")
def runs(files, tmp_path_factory):
    """{task: run directory} of a tiny classify and tag run, trained on regular files."""
    tmp = tmp_path_factory.mktemp("stream_runs")
    out = {}
    for task in ("classify", "tag"):
        out[task] = tmp / task
        assert main(["train", task, *tiny_args(task, files, "--max-steps", "2"),
                     "--out", str(out[task])]) == 0
    return out


@pytest.mark.slow
@pytest.mark.parametrize("task", ["classify", "tag"])
def test_evaluate_on_a_pipe_is_refused_in_one_line(task, files, runs, tmp_path, capsys):
    run = shutil.copytree(runs[task], tmp_path / "run")
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    stream = pipe_of(files[task].read_text())
    assert refused(["evaluate", str(run), "--data", stream], capsys) == said("--data", stream)
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before
