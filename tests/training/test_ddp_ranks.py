"""How rank 0 waits for the DDP ranks that Lightning's launcher starts from it, and ends them
(attnlab/training/ranks.py), with real processes that stand in for ranks."""
import os
import signal
import sys

import pytest

from attnlab.errors import UsageError
from attnlab.training import ranks


def test_a_rank_that_ends_before_it_joins_is_named_not_waited_for(tmp_path, spawn):
    """Rank 0 waited in torch's join, deaf to signals, for a rank that had already gone."""
    gone = _ended(spawn, "import sys; sys.exit(3)")
    (tmp_path / "1").touch()  # rank 1 said it is joining; rank 2 never will
    with pytest.raises(UsageError, match=rf"^rank 2 of this run \(process {gone.pid}\) exited "
                                         rf"with status 3 before it joined the others$"):
        ranks._until_joining([_ended(spawn), gone], str(tmp_path), poll=0.01)


def test_ranks_that_all_said_they_join_are_joined(tmp_path, spawn):
    for rank in ("1", "2"):
        (tmp_path / rank).touch()
    ranks._until_joining([_ended(spawn), _ended(spawn)], str(tmp_path), poll=0.01)


def test_ending_kills_a_rank_that_does_not_end_by_itself(monkeypatch, spawn):
    """A rank waiting for rank 0 in a collective is ended when rank 0 stops alone."""
    waiting = spawn([sys.executable, "-c", "import time; time.sleep(600)"])
    monkeypatch.setattr(ranks, "_PROCS", [waiting])
    ranks.end(grace=0.0)
    assert waiting.wait(timeout=60) == -signal.SIGKILL
    assert ranks._PROCS == []


def test_joining_is_said_only_by_a_rank_started_from_rank_zero(tmp_path, monkeypatch):
    monkeypatch.setenv(ranks.JOINING, str(tmp_path))
    monkeypatch.setenv("LOCAL_RANK", "0")
    ranks.joining()
    monkeypatch.setenv("LOCAL_RANK", "1")
    ranks.joining()
    assert os.listdir(tmp_path) == ["1"]


def _ended(spawn, code="pass"):
    """A process standing in for a rank, already ended (with the status ``code`` gives)."""
    proc = spawn([sys.executable, "-c", code])
    proc.wait()
    return proc
