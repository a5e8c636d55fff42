"""A two-process DDP run on CPU stopped the ways a user and a scheduler stop it: SIGTERM to the
first process while the second is still starting, Ctrl-C to them all. Each ends in one line,
with the status of the signal, and leaves a directory that the same command or --resume reads."""
import os
import re
import signal
import time

import pytest

from .conftest import start_ddp

pytestmark = pytest.mark.slow  # starts two DDP processes

ARGS = ["--max-steps", "20", "--train-size", "256", "--val-size", "32", "--test-size", "32",
        "--model-dim", "16", "--num-heads", "1", "--batch-size", "16", "--threads", "1"]
PATIENCE = 600  # seconds: a rank's start on a loaded two-core machine


def _held_rank_one(tmp_path, monkeypatch):
    """Rank 1 (which Lightning's launcher starts at the first process's ``launch``) held at
    its interpreter's start until the returned ``release`` file exists: a process that is still
    starting, however fast this machine is. Rank 0 meanwhile waits for it to join. Rank 1
    writes ``started`` once it is held, so a test signals after the launch, not after a guess."""
    hold = tmp_path / "hold"
    hold.mkdir()
    release, started = tmp_path / "release", tmp_path / "started"
    (hold / "sitecustomize.py").write_text(
        "import os, time\n"
        "if os.environ.get('LOCAL_RANK') == '1':\n"
        f"    open({str(started)!r}, 'w').close()\n"
        f"    while not os.path.exists({str(release)!r}):\n"
        "        time.sleep(0.1)\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [p for p in (os.environ.get("PYTHONPATH"), str(hold)) if p]))
    return release, started


def _until_started(started, proc):
    """Wait until the held rank 1 has started (rank 0 has launched it), or rank 0 has ended."""
    deadline = time.monotonic() + PATIENCE
    while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert started.exists(), "rank 1 never started"


def test_sigterm_while_the_ranks_start_ends_in_one_line_and_removes_the_run(
        tmp_path, spawn, monkeypatch):
    """SIGTERM to the first process (``kill PID``, a scheduler's stop) while rank 1 starts: the
    first ended, rank 1 then failed to join and printed its traceback, and Lightning's watch
    over the ranks killed the first (exit 137) while it removed its half-made run directory,
    whose config.yaml ``--resume`` took for a run. Now: exit 143, one line, no traceback, the
    directory removed so that the same command runs again."""
    release, started = _held_rank_one(tmp_path, monkeypatch)
    out = tmp_path / "ddp"
    proc = start_ddp(spawn, "reverse", out, *ARGS)
    seen = ""
    while "attnlab train reverse ->" not in seen and proc.poll() is None:
        seen += proc.stderr.readline()  # rank 0 is past its checks, launching
    _until_started(started, proc)
    proc.send_signal(signal.SIGTERM)
    release.touch()  # rank 1 starts now, after the signal
    _, err = proc.communicate(timeout=PATIENCE)  # the pipe closes once rank 1 has gone too
    err = seen + err
    assert proc.returncode == 143, err
    said = [line for line in err.splitlines() if line.startswith("attnlab:")]
    assert said == [f"attnlab: interrupted (SIGTERM) before the first checkpoint; removed "
                    f"{out}, so the same command can run again"], err
    assert "Traceback" not in err and "Error" not in err, err
    assert not out.exists()


def test_sigterm_to_every_rank_while_one_starts_ends_in_one_line(tmp_path, spawn, monkeypatch):
    """A scheduler's stop (SIGTERM to every process of the job) while rank 1 starts: rank 1
    ended at once, and the first process, waiting in torch's join where no signal handler
    runs, never heard its own SIGTERM; Lightning's watch then killed it (exit 137), leaving its
    half-made run directory. Now it hears it: exit 143, one line, the directory removed."""
    release, started = _held_rank_one(tmp_path, monkeypatch)
    out = tmp_path / "ddp"
    proc = start_ddp(spawn, "reverse", out, *ARGS)
    seen = ""
    while "attnlab train reverse ->" not in seen and proc.poll() is None:
        seen += proc.stderr.readline()
    _until_started(started, proc)
    os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=PATIENCE)
    release.touch()
    err = seen + err
    assert proc.returncode == 143, err
    said = [line for line in err.splitlines() if line.startswith("attnlab:")]
    assert said == [f"attnlab: interrupted (SIGTERM) before the first checkpoint; removed "
                    f"{out}, so the same command can run again"], err
    assert not out.exists()


def test_ctrl_c_to_every_rank_during_training_is_said_once(tmp_path, spawn):
    """Ctrl-C reaches every process of the terminal's job: each DDP rank got it, and the one
    line saying where the run stopped came once, while a rank that got it outside the loop
    said "attnlab: interrupted" of its own. Now: one line, 130, the step saved."""
    out = tmp_path / "ddp"
    proc = start_ddp(spawn, "reverse", out, *ARGS[2:], "--max-steps", "1000",
                     "--val-every", "100000", "--checkpoint-every", "100000", "--no-early-stop")
    seen = ""
    while "step 100/" not in seen and proc.poll() is None:  # progress every 100 steps
        seen += proc.stderr.readline()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=PATIENCE)
    err = seen + err
    assert proc.returncode == 130, err
    said = [line for line in err.splitlines() if line.startswith("attnlab:")]
    assert len(said) == 1, err
    assert re.fullmatch(rf"attnlab: interrupted at step \d+ of 1000; continue with: attnlab "
                        rf"train reverse --out {re.escape(str(out))} --resume", said[0]), err
    assert (out / "checkpoints" / "last.ckpt").is_file()
