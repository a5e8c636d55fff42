"""How rank 0 waits for the DDP ranks that Lightning's launcher starts from it, and ends them
(attnlab/training/ranks.py), with real processes that stand in for ranks."""
import argparse
import os
import signal
import sys

import pytest

from attnlab import cli
from attnlab.errors import RankFailed
from attnlab.training import ranks


def test_a_rank_that_ends_before_it_joins_is_named_not_waited_for(tmp_path, spawn):
    """Rank 0 waited in torch's join, deaf to signals, for a rank that had already gone."""
    gone = _ended(spawn, "import sys; sys.exit(3)")
    (tmp_path / "1").touch()  # rank 1 said it is joining; rank 2 never will
    with pytest.raises(RankFailed, match=rf"^rank 2 of this run \(process {gone.pid}\) exited "
                                         rf"with status 3 before it joined the others$") as e:
        ranks._until_joining([_ended(spawn), gone], str(tmp_path), poll=0.01)
    assert (e.value.exit_code, e.value.quiet) == (1, False)  # a crash: not the user's input


def test_a_rank_killed_before_it_joins_is_an_internal_fault_said_in_one_line(
        tmp_path, spawn, capsys, monkeypatch):
    """A rank killed for memory (SIGKILL) was reported as a usage error, exit 2."""
    killed = _ended(spawn, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    error = _refusal(tmp_path, killed)
    assert _exit(error, capsys, monkeypatch) == (1, [f"attnlab: rank 1 of this run (process {killed.pid}) "
                                        f"was killed by SIGKILL before it joined the others"])


def test_a_rank_that_refused_its_input_exits_2_without_a_second_line(
        tmp_path, spawn, capsys, monkeypatch):
    """The rank's own "attnlab: error:" line names the flag or file; rank 0 adds none."""
    error = _refusal(tmp_path, _ended(spawn, "import sys; sys.exit(2)"))
    assert _exit(error, capsys, monkeypatch) == (2, [])


def test_a_rank_that_hangs_before_it_joins_is_named_after_the_deadline(tmp_path, spawn):
    """Rank 0 waited forever for a rank that neither joined nor ended: an unattended job hung."""
    hanging = spawn([sys.executable, "-c", "import time; time.sleep(600)"])
    (tmp_path / "1").touch()
    with pytest.raises(RankFailed, match=rf"^rank 2 of this run \(process {hanging.pid}\) did "
                                         rf"not join the others within 0.2 s$") as e:
        ranks._until_joining([_ended(spawn), hanging], str(tmp_path), poll=0.01, timeout=0.2)
    assert e.value.exit_code == 1


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


def _refusal(folder, proc) -> RankFailed:
    """What rank 0 raises when ``proc``, its rank 1, ended before it joined."""
    with pytest.raises(RankFailed) as e:
        ranks._until_joining([proc], str(folder), poll=0.01)
    return e.value


def _exit(error, capsys, monkeypatch):
    """The exit status and the lines on stderr of a command that raised ``error``."""
    def command(args):
        raise error

    class Parser:
        def parse_args(self, argv):
            return argparse.Namespace(func=command)

    monkeypatch.setattr(cli, "build_parser", Parser)
    code = cli.main([])
    return code, capsys.readouterr().err.splitlines()
