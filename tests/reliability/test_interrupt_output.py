"""A training run interrupted the ways real life does: the terminal closed (SIGHUP)."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow  # every test trains a run

TINY = ["--train-size", "256", "--val-size", "32", "--test-size", "32", "--model-dim", "8",
        "--num-heads", "1", "--dim-feedforward", "16", "--batch-size", "16", "--no-early-stop",
        "--threads", "1"]
# Wall seconds a training process gets to show its first steps: its start alone is about 16 s
# of CPU, and on a shared two-core machine a process may get a tenth of a core.
PATIENCE = 600


def _command(out, *extra):
    return ([sys.executable, "-m", "attnlab", "train", "reverse", "--out", str(out), *TINY,
             *extra], dict(os.environ, OMP_NUM_THREADS="1"))


def test_sighup_says_where_the_run_stopped_and_how_to_continue(tmp_path, spawn):
    """SIGHUP (the terminal closed, an ssh session dropped) killed a run with nothing saved
    since its last checkpoint; it saves the step it was at, as Ctrl-C and SIGTERM do, and
    exits 129 with the line that says how to continue."""
    out = tmp_path / "run"
    command, env = _command(out, "--max-steps", "100000", "--checkpoint-every", "100000",
                            "--val-every", "100000")
    proc = spawn(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen, deadline = "", time.time() + PATIENCE
    while "step 10000/" not in seen and proc.poll() is None and time.time() < deadline:
        seen += proc.stderr.readline()  # a line every tenth of the run
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 129, seen + err
    assert re.fullmatch(rf"attnlab: interrupted at step \d+ of 100000; continue with: attnlab "
                        rf"train reverse --out {re.escape(str(out))} --resume\n", err), err
    assert (out / "checkpoints" / "last.ckpt").is_file()
