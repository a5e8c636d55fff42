"""Trained runs shared by tests of several folders, trained once per pytest-xdist worker.

A run trained in a module fixture is trained again by every module that defines one, in every
worker that runs one of the module's tests; a session fixture here is trained once per worker.
The run is shared, so a test must leave it as it found it: the fixture a test takes checks
after the test that no file of the run was added, removed or rewritten (a test that writes into
the run fails in its teardown, naming the files). A test that writes copies the run first.
Also the worker's fork server (``forks``), which starts ``attnlab`` commands without their
imports.
"""
import os

import pytest

from attnlab.cli import main

from .reliability.conftest import TINY_REVERSE


def files_of(*runs) -> dict[str, tuple[int, int]]:
    """Every file under the run directories: {path: (size, modification time in ns)}."""
    return {str(path): (path.stat().st_size, path.stat().st_mtime_ns)
            for run in runs for path in sorted(run.rglob("*")) if path.is_file()}


def left_unchanged(before: dict, *runs) -> None:
    """Fails, naming the files, when the runs' files differ from ``before`` (``files_of``)."""
    after = files_of(*runs)
    changed = sorted(set(before) ^ set(after)
                     | {path for path in before.keys() & after.keys() if before[path] != after[path]})
    assert not changed, f"the test wrote into a shared run (copy it first): {changed}"


@pytest.fixture(scope="session")
def trained_reverse_run(tmp_path_factory):
    """A finished tiny reversal run (``TINY_REVERSE``), checkpoints every 10 of its 30 steps."""
    out = tmp_path_factory.mktemp("runs") / "reverse"
    assert main(["train", "reverse", "--out", str(out), *TINY_REVERSE]) == 0
    return out


@pytest.fixture(scope="session")
def trained_tag_run(tmp_path_factory):
    """A finished tiny tag run (3 steps), shared by the modules that read one."""
    from .reliability.conftest import task_data, tiny_args

    tmp = tmp_path_factory.mktemp("tag")
    out = tmp / "run"
    assert main(["train", "tag", *tiny_args("tag", task_data(tmp), "--max-steps", "3"),
                 "--out", str(out)]) == 0
    return out


@pytest.fixture
def tag_run(trained_tag_run):
    """``trained_tag_run``, checked unchanged after the test."""
    before = files_of(trained_tag_run)
    yield trained_tag_run
    left_unchanged(before, trained_tag_run)


@pytest.fixture
def reverse_run(trained_reverse_run):
    """``trained_reverse_run``, checked unchanged after the test."""
    before = files_of(trained_reverse_run)
    yield trained_reverse_run
    left_unchanged(before, trained_reverse_run)


@pytest.fixture(scope="session")
def forks(spawn_session, tmp_path_factory):
    """The directory of an ``attnlab`` that runs each command in a process forked from this
    worker's fork server (tests/forkserver.py), started at the first test that needs it: the
    docs pages' commands, and the first process of a DDP run (tests/reliability/conftest.py)."""
    from . import forkserver

    where = tmp_path_factory.mktemp("forks")
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATTNLAB_RUN_DIR", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE")}
    env["MPLBACKEND"] = "Agg"   # as the docs test's run_command sets it for every command
    with forkserver.running(spawn_session, str(where), env):
        yield where
