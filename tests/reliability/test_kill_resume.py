"""A run killed with SIGKILL resumes from its last checkpoint and finishes at the same budget."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

from .conftest import _through_the_fork_server

pytestmark = pytest.mark.slow  # trains, kills and resumes real processes

BUDGET = 1200
ARGS = ["--max-steps", str(BUDGET), "--checkpoint-every", "50", "--no-early-stop",
        "--train-size", "512", "--val-size", "32", "--test-size", "64", "--model-dim", "8",
        "--num-heads", "1", "--dim-feedforward", "16", "--batch-size", "16", "--val-every", "1000"]
# Wall seconds a training process gets before it counts as stalled. Its start alone is about
# 16 s of CPU (torch and Lightning's imports), and on a shared two-core machine under the load
# of four other jobs a process gets a tenth of a core: what fails here must be a run that
# stopped, not a busy machine.
PATIENCE = 900


def _train(spawn, out, *extra, forks=None):
    """``attnlab train reverse`` started by ``spawn``; with ``forks`` (the ``forks`` fixture),
    by the worker's fork server, for the run that no test kills (its imports paid once)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "attnlab", "train", "reverse", "--out", str(out), *ARGS,
               *extra]
    if forks is not None:
        command, env = _through_the_fork_server(command, env, forks)
    return spawn(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_sigkill_then_resume_continues_from_the_checkpoint(tmp_path, spawn, forks):
    out = tmp_path / "run"
    proc = _train(spawn, out)
    ckpt = out / "checkpoints" / "last.ckpt"
    deadline = time.time() + PATIENCE
    killed_after = None
    while time.time() < deadline and proc.poll() is None:
        # last.ckpt is written to another name and renamed: it is always whole
        step = torch.load(ckpt, weights_only=True)["global_step"] if ckpt.is_file() else 0
        if step >= 300:
            proc.send_signal(signal.SIGKILL)
            killed_after = step
            break
        time.sleep(0.05)
    proc.communicate(timeout=60)
    assert killed_after is not None, "the run finished or stalled before it could be killed"
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "metrics.json").exists()

    saved_step = torch.load(ckpt, weights_only=True)["global_step"]
    assert saved_step >= killed_after > BUDGET // 10  # a later checkpoint may have come since

    resumed = _train(spawn, out, "--resume", forks=forks)  # the killed run stays a process
    stdout, stderr = resumed.communicate(timeout=PATIENCE)
    assert resumed.returncode == 0, stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == BUDGET
    # the resumed process's progress starts past the checkpoint: it did not start from scratch
    progress = [int(s) for s in re.findall(r"^step (\d+)/", stderr, flags=re.M)]
    assert progress and progress[0] > saved_step, progress[:3]
    assert progress[-1] == BUDGET


def test_train_seconds_survive_a_resume(reverse_run, tmp_path):
    """Resuming a finished run changes nothing, and its train_seconds still count the training
    done before (the clock is kept in every checkpoint), not only the resumed process's."""
    import shutil

    from attnlab.cli import main

    out = tmp_path / "run"
    shutil.copytree(reverse_run, out)
    before = json.loads((out / "metrics.json").read_text())
    assert main(["train", "reverse", "--out", str(out), "--resume"]) == 0
    after = json.loads((out / "metrics.json").read_text())
    assert after["steps"] == before["steps"]
    assert after["train_seconds"] >= before["train_seconds"] > 0
