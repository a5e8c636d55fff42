"""``benchmarks/finetune.py --early-stop --together``'s ``timed_together``: the timings of
the sides it runs side by side, each side seen to its end, and none left running after one
fails."""
import os
import sys

import pytest

from benchmarks.finetune import timed_together


def test_each_side_is_timed_even_one_that_ends_at_once(tmp_path):
    """A side that has exited by the time the next is started is not lost (a dropped ``Popen``
    reaps it unseen at the next ``Popen``, and the wait then finds no child)."""
    for run in range(20):
        logs = tmp_path / str(run)
        logs.mkdir()
        times = timed_together([["true"], ["sleep", "0.05"]], dict(os.environ), logs)
        assert len(times) == 2 and times[0][0] <= times[1][0]


def test_a_side_that_fails_stops_the_others(tmp_path):
    pid_file = tmp_path / "pid"
    other = (f"import os, pathlib, time; pathlib.Path({str(pid_file)!r})"
             f".write_text(str(os.getpid())); time.sleep(30)")
    fails = "import time, sys; time.sleep(1); sys.exit(3)"
    with pytest.raises(SystemExit, match="^failed: "):
        timed_together([[sys.executable, "-c", fails], [sys.executable, "-c", other]],
                       dict(os.environ), tmp_path)
    with pytest.raises(ProcessLookupError):  # stopped and reaped, not running on
        os.kill(int(pid_file.read_text()), 0)
