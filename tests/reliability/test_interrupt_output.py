"""A training run interrupted the ways real life does, with its output sent where real life sends
it: the terminal closed (SIGHUP), standard error a full disk, standard output a pipe whose reader
left early, a kill after the last checkpoint and a resume."""
import csv
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

from attnlab.cli import main

from ..training.loop_probe import probe_loop

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


def test_a_closed_terminal_saves_the_step_as_ctrl_c_does(tmp_path, spawn):
    """The terminal of a run is closed (an ssh session dropped): SIGHUP, and every write to
    the terminal fails from then on. The run saves the step it was at and exits 129, as
    Ctrl-C saves and exits 130; it was killed with nothing saved since its last checkpoint."""
    out = tmp_path / "run"
    command, env = _command(out, "--max-steps", "100000", "--checkpoint-every", "100000",
                            "--val-every", "100000")
    terminal, tty = os.openpty()  # the run's terminal: the progress line redrawn there
    proc = spawn(command, stdin=tty, stdout=tty, stderr=tty, env=env, start_new_session=True)
    os.close(tty)
    shown, deadline = b"", time.time() + PATIENCE
    while not re.search(rb"step (\d{2,})/", shown) and time.time() < deadline:
        try:
            shown += os.read(terminal, 4096)
        except OSError:  # the process ended: its terminal reads no more
            break
    assert re.search(rb"step (\d{2,})/", shown), shown[-2000:]
    os.close(terminal)  # the terminal is gone ...
    proc.send_signal(signal.SIGHUP)  # ... and says so
    assert proc.wait(timeout=PATIENCE) == 128 + signal.SIGHUP
    state = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    assert state["global_step"] >= 10  # the step it was at, not nothing
    assert not (out / "metrics.json").exists()


def test_sighup_says_where_the_run_stopped_and_how_to_continue(tmp_path, spawn):
    """SIGHUP (the terminal closed, an ssh session dropped) killed a run with nothing saved
    since its last checkpoint; it saves the step it was at, as Ctrl-C and SIGTERM do, and
    exits 129 with the line that says how to continue."""
    out = tmp_path / "run"
    # the signal at the first progress line, a tenth into the run: nine tenths left for it
    # to arrive mid-run on a busy machine
    command, env = _command(out, "--max-steps", "2000", "--checkpoint-every", "100000",
                            "--val-every", "100000")
    proc = spawn(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen, deadline = "", time.time() + PATIENCE
    while "step 200/" not in seen and proc.poll() is None and time.time() < deadline:
        seen += proc.stderr.readline()  # a line every tenth of the run
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 129, seen + err
    assert re.fullmatch(rf"attnlab: interrupted at step \d+ of 2000; continue with: attnlab "
                        rf"train reverse --out {re.escape(str(out))} --resume\n", err), err
    assert (out / "checkpoints" / "last.ckpt").is_file()


def test_under_nohup_sighup_stays_ignored_and_the_run_trains_on(tmp_path, spawn):
    """`nohup attnlab train ...` starts the run with SIGHUP ignored: the loop's own handler
    must not take that back, or closing the terminal would stop a run that asked not to be."""
    out = tmp_path / "run"
    command, env = _command(out, "--max-steps", "1000", "--val-every", "100000")
    ignore = lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN)  # noqa: E731 (nohup's)
    proc = spawn(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                 preexec_fn=ignore)
    seen = ""
    while "step 100/" not in seen and proc.poll() is None:  # a tenth in: mid-run
        seen += proc.stderr.readline()
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 0, seen + err
    assert json.loads((out / "metrics.json").read_text())["steps"] == 1000


def test_a_full_standard_error_does_not_lose_the_run(tmp_path):
    """`attnlab train ... 2>/dev/full`: the notes and progress cannot be written, which ended
    the run at its first note (exit 1, nothing said, the run directory removed). The run
    trains and writes its directory; its summary goes to standard output, the summary's
    first line naming the run (no blank line before it, for `| head -1`)."""
    out = tmp_path / "run"
    command, env = _command(out, "--max-steps", "4")
    with open("/dev/full", "w") as full:
        proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=full, text=True, env=env,
                              timeout=PATIENCE)
    assert proc.returncode == 0
    assert json.loads((out / "metrics.json").read_text())["steps"] == 4
    assert proc.stdout.splitlines()[0] == f"reverse run: {out}"


def test_a_closed_standard_error_does_not_lose_the_run_nor_fill_standard_output(tmp_path):
    """`attnlab train ... 2>&-`: Python has no sys.stderr, and print(file=None) prints to
    standard output: the notes went there, then the progress line failed, ending the run
    (exit 1, the run directory removed). The run trains; standard output is its summary."""
    out = tmp_path / "run"
    command, env = _command(out, "--max-steps", "4")
    proc = subprocess.run(command, stdout=subprocess.PIPE, text=True, env=env,
                          timeout=PATIENCE, preexec_fn=lambda: os.close(2))
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[0] == f"reverse run: {out}", proc.stdout
    assert json.loads((out / "metrics.json").read_text())["steps"] == 4


def test_standard_output_closed_early_keeps_the_run_and_exits_as_python_does(tmp_path, spawn):
    """`attnlab train ... | head -1` whose reader has gone before the summary: the run is
    written whole, the process exits 1 as Python's convention for a closed pipe has it, and
    the interpreter's exit adds no "Exception ignored ... BrokenPipeError" (status 120)."""
    out = tmp_path / "run"
    command, env = _command(out, "--max-steps", "4")
    proc = spawn(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    proc.stdout.close()  # the reader has what it wanted
    err = proc.stderr.read()
    assert proc.wait(timeout=PATIENCE) == 1, err
    assert "Exception ignored" not in err and "Traceback" not in err, err
    assert json.loads((out / "metrics.json").read_text())["steps"] == 4


class _Kill(Exception):
    pass


def test_a_resumed_runs_log_has_each_step_once(tmp_path, monkeypatch):
    """Killed at step 25 with its checkpoint at step 20, then resumed: metrics.csv, which a
    user plots, has each step once, 1 to 30, with the numbers of the process that trained
    it. It had the resumed steps 21-30 only, and the interrupted process's 1-25 beside it in
    metrics.part1.csv, so that the two together showed 21-25 twice. The part file keeps the
    interrupted process's log as it was."""

    class Kill:
        def on_train_batch_end(self, loop):
            if loop.step == 25:
                raise _Kill

    out = tmp_path / "run"
    argv = ["train", "reverse", "--out", str(out), *TINY, "--max-steps", "30",
            "--checkpoint-every", "20", "--val-every", "10"]  # a row after every step
    with monkeypatch.context() as m:
        probe_loop(m, Kill())
        with pytest.raises(_Kill):
            main(argv)
    before = _rows(out / "logs" / "metrics.csv")
    assert main([*argv, "--resume"]) == 0

    rows = _rows(out / "logs" / "metrics.csv")
    trained = [int(r["step"]) for r in rows if r["train_loss"]]
    validated = [int(r["step"]) for r in rows if r["val_loss"]]
    assert trained == list(range(1, 31)) and validated == [10, 20, 30]
    assert rows[:len(_upto(before, 20))] == _upto(before, 20)  # the first process's numbers
    assert _rows(out / "logs" / "metrics.part1.csv") == before  # as it was, steps 1-24


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _upto(rows, step):
    return [r for r in rows if int(r["step"]) <= step]

