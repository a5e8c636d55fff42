"""A DDP rank that dies while the run trains (killed for memory, ``kill -9``): rank 0 names it in
one line and says where to go on from, where it printed torch's traceback of a broken
connection ("Connection reset by peer") that named no rank, or was killed by Lightning's watch
without a word (exit 137)."""
import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest

from attnlab.errors import RankFailed
from attnlab.training import ranks
from attnlab.training.engine import NonFiniteLoss

from ..reliability.conftest import start_ddp, train_ddp


class _Ended:
    """A rank launched from rank 0, as ``subprocess.Popen`` shows it: ``code`` its status."""

    def __init__(self, pid, code):
        self.pid, self.code = pid, code

    def poll(self):
        return self.code


@pytest.fixture
def launched(monkeypatch):
    """The ranks rank 0 launched (``ranks._PROCS``), as given; the watch not yet ending."""
    def launch(*procs):
        monkeypatch.setattr(ranks, "_PROCS", list(procs))
        monkeypatch.setattr(ranks, "_ENDING", threading.Event())
    return launch


def test_a_rank_killed_while_training_is_named_with_where_to_go_on(launched):
    launched(_Ended(4242, -signal.SIGKILL))
    failure = ranks.failed(RuntimeError("Connection reset by peer"), "; continue with: X")
    assert isinstance(failure, RankFailed)
    assert str(failure) == ("rank 1 of this run (process 4242) was killed by SIGKILL during "
                            "training; continue with: X")
    assert (failure.exit_code, failure.quiet) == (1, False)
    assert ranks._ENDING.is_set()  # the watch stands aside: it would kill rank 0 mid-report


def test_an_error_every_rank_raised_is_rank_zeros_to_say(launched):
    """A non-finite loss stops every rank with its usage error (the others exit 2): rank 0's
    own line says it, not a rank's ending."""
    launched(_Ended(4242, 2))
    assert ranks.failed(NonFiniteLoss("train_loss is nan at step 3")) is None
    assert ranks.failed(KeyboardInterrupt()) is None


def test_rank_zeros_own_fault_is_left_as_it_is(launched):
    launched(_Ended(4242, None))  # still running: the broken collective was not its doing
    assert ranks.failed(RuntimeError("a bug"), grace=0.05) is None


def _children(pid):
    """The processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@pytest.mark.slow  # trains two processes, kills one, resumes
def test_rank_zero_names_a_killed_rank_and_the_run_resumes(tmp_path, spawn):
    out = tmp_path / "ddp"
    tiny = ["--train-size", "256", "--val-size", "32", "--test-size", "32", "--model-dim", "16",
            "--num-heads", "1", "--batch-size", "16", "--val-every", "100000", "--threads", "1"]
    proc = start_ddp(spawn, "reverse", out, "--max-steps", "100000", "--checkpoint-every", "20",
                     "--no-early-stop", *tiny)
    ckpt = out / "checkpoints" / "last.ckpt"
    while not ckpt.is_file() and proc.poll() is None:
        time.sleep(0.1)
    rank1 = _children(proc.pid)
    assert len(rank1) == 1, rank1  # Lightning's launcher started rank 1 from rank 0
    os.kill(rank1[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    assert "Traceback" not in err, err
    said = [line for line in err.splitlines() if line.startswith("attnlab:")]
    assert len(said) == 1, err
    found = re.fullmatch(rf"attnlab: rank 1 of this run \(process {rank1[0]}\) was killed by "
                         rf"SIGKILL during training at step \d+; the others were stopped; the "
                         rf"last checkpoint is of step (\d+): continue with: attnlab train "
                         rf"reverse --out {re.escape(str(out))} --resume", said[0])
    assert found, said[0]
    assert ckpt.is_file() and not (out / "metrics.json").exists()

    saved = int(found.group(1))
    resumed = train_ddp("reverse", out, "--resume", "--max-steps", str(saved + 5))
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((out / "metrics.json").read_text())["steps"] == saved + 5
