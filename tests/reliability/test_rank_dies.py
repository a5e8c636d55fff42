"""A DDP rank that dies while the run trains (``kill -9``, killed for memory). Rank 0 printed
gloo's "Connection reset by peer" traceback, which names no rank, or Lightning's watch, polling,
killed it first without a word (exit 137). Now both ways rank 0 can learn of it, its broken
collective and the watch, end in the same one line naming the rank, the step and the command
that continues the run (exit 1); an error of rank 0's own is left as it is, never blamed on a
rank that ended with it. Stand-in processes: no run is trained (a real kill is in
docs/scale.md)."""
import signal
import threading

import pytest

from attnlab.errors import RankFailed
from attnlab.training import ranks
from attnlab.training.engine import NonFiniteLoss

GLOO = ("[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
        "[127.0.0.1]:8396: Connection reset by peer")
SAID = ("rank 1 of this run (process 4242) was killed by SIGKILL during training; the last "
        "checkpoint is of step 20: continue with: attnlab train reverse --out run --resume")


class _Rank:
    """A rank launched from rank 0, as ``subprocess.Popen`` shows it: ``returncode`` its status
    (None: still running)."""

    def __init__(self, pid, returncode):
        self.pid, self.returncode, self.killed = pid, returncode, False

    def poll(self):
        return self.returncode

    def kill(self):
        self.killed = True


@pytest.fixture
def launched(monkeypatch):
    """The ranks rank 0 launched (``ranks._PROCS``), as given, and what the line adds; the
    watch's end recorded instead of ending this process; the grace short."""
    stopped = []
    monkeypatch.setattr(ranks, "_ENDING", threading.Event())
    monkeypatch.setattr(ranks, "DEATH_GRACE", 0.2)
    monkeypatch.setattr(ranks, "_stop_all", lambda procs, failure: stopped.append(failure))
    monkeypatch.setattr(ranks, "_WHERE", [lambda: "; the last checkpoint is of step 20: "
                                                  "continue with: attnlab train reverse --out "
                                                  "run --resume"])

    def launch(*procs):
        monkeypatch.setattr(ranks, "_PROCS", list(procs))
        return stopped
    return launch


def test_the_broken_collective_and_the_watch_say_the_same_line(launched, monkeypatch):
    stopped = launched(_Rank(4242, -signal.SIGKILL))
    failure = ranks.failed(RuntimeError(GLOO), grace=0.0)
    assert isinstance(failure, RankFailed)
    assert (str(failure), failure.exit_code, failure.quiet) == (SAID, 1, False)
    assert ranks._look(ranks._PROCS, lambda: False)  # rank 0 said it: the watch stands aside
    assert stopped == []

    monkeypatch.setattr(ranks, "_ENDING", threading.Event())  # rank 0 hears nothing (NCCL)
    assert ranks._look(ranks._PROCS, lambda: False)
    assert [str(f) for f in stopped] == [SAID]
    assert ranks.failed(RuntimeError(GLOO), grace=0.0) is None  # said once, by the watch


def test_the_watch_leaves_rank_zero_the_time_to_say_it(launched, monkeypatch):
    """Rank 0 hears the broken collective a moment after the watch sees the rank gone: the
    watch waits for it (Lightning's killed rank 0 first: exit 137, no step, no way on). The
    grace is long: the watch returns as soon as rank 0 speaks, whenever that is."""
    stopped = launched(_Rank(4242, -signal.SIGKILL))
    monkeypatch.setattr(ranks, "DEATH_GRACE", 30)
    said = []
    hears = threading.Timer(0.05, lambda: said.append(ranks.failed(RuntimeError(GLOO))))
    hears.start()
    assert ranks._look(ranks._PROCS, lambda: False)
    hears.join()
    assert stopped == [] and str(said[0]) == SAID


def test_an_error_of_rank_zeros_own_is_not_blamed_on_a_rank(launched):
    """An error every rank raised (a non-finite loss, a bug): rank 1 ended with it too, but
    rank 0's own error is the one said; and a broken collective without a rank seen dead is
    left as it is."""
    launched(_Rank(4242, 1))
    assert ranks.failed(NonFiniteLoss("train_loss is nan at step 3"), grace=0.0) is None
    assert ranks.failed(RuntimeError("mat1 and mat2 shapes cannot be multiplied"),
                        grace=0.0) is None
    assert ranks.failed(KeyboardInterrupt(), grace=0.0) is None
    launched(_Rank(4242, None))  # still running
    assert ranks.failed(RuntimeError(GLOO), grace=0.05) is None


def test_the_rank_killed_is_named_not_one_that_failed_after_it(launched):
    """Rank 2 killed; rank 1 then exited with status 1 on the collective rank 2's death broke
    (and ranks are looked at in order): the line names rank 2, the one that died."""
    launched(_Rank(4241, 1), _Rank(4242, -signal.SIGKILL))
    failure = ranks.failed(RuntimeError(GLOO), grace=0.0)
    assert str(failure) == SAID.replace("rank 1 ", "rank 2 "), failure


def test_a_rank_that_exited_on_its_own_error_is_not_said_to_be_killed(launched):
    """A rank that raised an error of its own (its traceback printed above) is not told to be
    continued with --resume, which would meet the same error: the line points to that error."""
    launched(_Rank(4242, 1))
    failure = ranks.failed(RuntimeError(GLOO), grace=0.0)
    assert (str(failure), failure.exit_code) == (
        "rank 1 of this run (process 4242) exited with status 1 during training (its error is "
        "above); the others were stopped", 1)


def test_a_rank_that_said_its_usage_error_is_not_said_again(launched):
    launched(_Rank(4242, 2))
    failure = ranks.failed(RuntimeError(GLOO), grace=0.0)
    assert (failure.exit_code, failure.quiet) == (2, True)


def test_a_run_a_rank_died_in_before_its_first_checkpoint_is_removed_in_the_same_line(tmp_path):
    """Nothing to go on from: the run is removed (the same command starts it again), said in
    the rank's line, not in a second one."""
    from attnlab.commands.train import _after_failure

    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "config.yaml").write_text("task: reverse\n")
    died = RankFailed("rank 1 of this run (process 4242) was killed by SIGKILL during training "
                      "at step 7, before the first checkpoint; the others were stopped")
    said = _after_failure(died, None, run, "new")
    assert isinstance(said, RankFailed) and said.exit_code == 1
    assert str(said) == f"{died}; removed {run}, so the same command can run again"
    assert not run.exists()
