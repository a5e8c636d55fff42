"""Training progress on standard error: on a terminal one line redrawn in place, at most ten
times a second, with the step, the losses and the time left; in logs ten lines a run."""
import io
import re
import sys

import pytest

import attnlab.training.progress as progress_module
from attnlab.training.progress import Progress
from attnlab.cli import main


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_redraws_at_most_ten_times_a_second_and_always_at_the_last_step(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(progress_module.time, "perf_counter", lambda: now[0])
    progress = Progress(1000, stream=FakeTerminal())
    read = []
    for step in range(1, 1001):
        now[0] += 0.004  # 250 steps a second
        if progress.reads_train_loss(step):
            read.append(step)
            progress.drawn = now[0]  # what a draw does
        assert progress.reads_train_loss(step) == (step in read)  # asked twice, one answer
    assert 35 <= len(read) <= 41 and read[-1] == 1000  # 4 s of training: ~40 redraws
    # not a terminal: every tenth of the run
    lines = Progress(1000, stream=io.StringIO())
    assert [s for s in range(1, 1001) if lines.reads_train_loss(s)] == list(range(100, 1001, 100))


def test_a_log_gets_ten_lines_whatever_the_budget(monkeypatch):
    """Ten lines a run, at the end of each tenth (13 steps once gave 13 lines, 25 gave 13)."""
    for max_steps in (10, 13, 19, 25, 99, 101, 1234):
        lines = Progress(max_steps, stream=io.StringIO())
        read = [s for s in range(1, max_steps + 1) if lines.reads_train_loss(s)]
        assert len(read) == 10 and read[-1] == max_steps, (max_steps, read)
    few = Progress(7, stream=io.StringIO())
    assert [s for s in range(1, 8) if few.reads_train_loss(s)] == list(range(1, 8))


@pytest.mark.slow
def test_a_run_in_a_terminal_shows_one_line_with_step_losses_and_time_left(monkeypatch, tmp_path):
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)  # here: pytest resets it after fixtures
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["train", "reverse", "--out", str(tmp_path / "run"), "--max-steps", "40",
                 "--threads", "1"]) == 0
    text = terminal.getvalue()
    frames = [f.removesuffix("\x1b[K") for f in text.split("\r")[1:]]
    assert frames, text
    assert "Epoch" not in text  # Lightning's own bar (epochs these runs do not have) is off
    last = frames[-1]
    assert last.startswith("step 40/40 [################] 100%"), last
    assert re.search(r"  \d+:\d\d  [\d.]+ steps/s", last)  # elapsed; nothing is left
    assert re.search(r"train_loss \d", last) and re.search(r"val_loss \d", last)
    assert last.endswith("\n")  # the summary and any error start on a line of their own
    assert len(frames) <= 40  # redrawn on some steps, not on every one
    assert not re.search(r"^step \d+/40  train_loss", text, re.M)  # no log lines as well
    assert all(re.search(r"\d:\d\d<\d+:\d\d", f) for f in frames[:-1] if "steps/s" in f)


# reverse learns 3 symbols of length 4 within a few validations; the budget is far larger
EARLY = ["--num-categories", "3", "--seq-len", "4", "--val-every", "5", "--max-steps", "2000",
         "--threads", "1", "--lr", "3e-3", "--warmup", "5"]


@pytest.mark.slow
def test_a_run_stopped_by_its_target_says_so(monkeypatch, tmp_path):
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["train", "reverse", "--out", str(tmp_path / "run"), *EARLY]) == 0
    frames = terminal.getvalue().split("\r")
    last, said = frames[-1].splitlines()[0], frames[-1].splitlines()[-1]
    assert re.match(r"step (\d+)/2000 ", last) and int(re.match(r"step (\d+)", last)[1]) < 2000
    assert "stopped early" in last and "<" not in last.split("steps/s")[0]
    step = re.match(r"step (\d+)", last)[1]
    assert said == (f"stopped early at step {step}/2000: val_seq_acc reached 1 at 3 "
                    f"validations in a row")


@pytest.mark.slow
def test_a_log_says_why_the_run_stopped_before_its_budget(tmp_path, capsys):
    """Not on a terminal (CI, a log file) the last progress line was "step 60/2000" and the
    summary then said 100 steps, with no word of the target reached."""
    assert main(["train", "reverse", "--out", str(tmp_path / "run"), *EARLY]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert re.fullmatch(r"stopped early at step (\d+)/2000: val_seq_acc reached 1 at 3 "
                        r"validations in a row", err[-1]), err[-3:]


def test_the_line_is_cut_to_the_terminal_width_so_it_redraws_in_place(monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    out = FakeTerminal()
    progress = Progress(1000, stream=out)
    progress.start -= 10  # 500 steps in 10 s
    progress._draw(500, {"val_acc": 0.5, "val_loss": 0.25, "train_loss": 0.125,
                         "val_seq_acc": 0.0, "val_bleu": 12.5, "val_chrf": 40.25})
    line = out.getvalue().removeprefix("\r").removesuffix("\x1b[K")
    assert len(line) == 119, line  # a longer line would wrap and not redraw in place
    assert line.startswith("step 500/1000 [########        ]  50%  0:10<0:10  50 steps/s  "
                           "train_loss 0.125  val_loss 0.25  ")  # the losses first



def test_the_width_is_that_of_stderrs_own_terminal_when_stdout_is_piped(monkeypatch):
    import fcntl
    import os
    import pty
    import struct
    import termios

    monkeypatch.delenv("COLUMNS", raising=False)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 72, 0, 0))
    try:
        with open(follower, "w", closefd=True) as terminal:
            progress = Progress(1000, stream=terminal)
            progress.start -= 10
            progress._draw(500, dict(train_loss=0.125, val_loss=0.25, val_acc=0.5,
                                     val_seq_acc=0.25, val_bleu=12.5))
            shown = os.read(leader, 4096).decode()
    finally:
        os.close(leader)
    line = shown.removeprefix("\r").removesuffix("\x1b[K")
    assert len(line) == 71 and line.startswith("step 500/1000"), repr(shown)


def test_only_rank_zero_reads_the_loss_for_its_line(monkeypatch):
    """Under DDP only global rank 0 draws; the other ranks read no loss off the device for a
    line they never show (each read is a host synchronisation)."""
    now = [0.0]
    monkeypatch.setattr(progress_module.time, "perf_counter", lambda: now[0])
    progress = Progress(100, stream=FakeTerminal())
    progress.begin(0, draws=False)
    read = []
    for step in range(1, 101):
        now[0] += 0.05
        if progress.reads_train_loss(step):
            read.append(step)
    assert read == []
