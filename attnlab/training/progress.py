"""What a training run shows while it runs: the progress line on standard error.

On a terminal, one line redrawn in place at most every ``Progress.REDRAW`` seconds (step, bar,
time elapsed < time left, steps/s, losses and the latest validation metrics, cut to the
terminal's width); otherwise (CI, a log file) ten lines a run, ``step N/M  train_loss X``.
"""
from __future__ import annotations

import os
import sys
import time

__all__ = ["Progress", "clock"]


class Progress:
    """The progress of one run of ``max_steps`` steps, written to ``stream`` (stderr).

    The loop asks ``reads_train_loss(step)`` after each step: only then does it read the loss
    off the device (a host synchronisation) and call ``show``.
    """

    REDRAW = 0.1  # seconds between redraws on a terminal

    def __init__(self, max_steps: int, stream=None) -> None:
        self.max_steps = max_steps
        self.stream = stream
        self.tty = (stream or sys.stderr).isatty()
        self.start = self.drawn = time.perf_counter()
        self.first_step = 0  # a resumed run's rate counts from where it started
        self.draws = True  # False on DDP ranks other than 0, which show nothing
        self._due: tuple[int, bool] = (-1, False)
        self._open = False  # a line is drawn and not yet ended

    def begin(self, step: int, *, draws: bool = True) -> None:
        """Training starts (or resumes) at ``step``."""
        self.start = self.drawn = time.perf_counter()
        self.first_step, self.draws = step, draws

    def reads_train_loss(self, step: int) -> bool:
        """Whether the progress after ``step`` steps shows ``train_loss``: on a terminal when a
        redraw is due, else every tenth of the run, and the last step."""
        if self._due[0] != step:
            if not self.draws:
                due = False
            elif self.tty:
                due = time.perf_counter() - self.drawn >= self.REDRAW
            else:  # the steps that end each tenth of the run: ten lines (fewer steps: each)
                due = step * 10 // self.max_steps != (step - 1) * 10 // self.max_steps
            self._due = (step, due or step == self.max_steps)
        return self.draws and self._due[1]

    def show(self, step: int, metrics: dict[str, float]) -> None:
        """After a step that ``reads_train_loss``: redraw the line, or print a log line."""
        if self.tty:
            self._draw(step, metrics)
        else:
            loss = metrics.get("train_loss")
            loss = f"{loss:.4f}" if loss is not None else "-"
            self._write(f"step {step}/{self.max_steps}  train_loss {loss}\n")

    def validating(self, step: int, metrics: dict[str, float], *, done: bool = False) -> None:
        """Before (and, with ``done``, after) a validation: redraw on a terminal when due."""
        if self.tty and self.draws and time.perf_counter() - self.drawn >= self.REDRAW:
            self._draw(step, metrics, "" if done else "validating")

    def end(self, step: int, metrics: dict[str, float], stopped: str | None = None) -> None:
        """Training ended at ``step``; ``stopped`` says why, when it ended before ``max_steps``
        (a target was reached)."""
        early = step < self.max_steps and stopped
        if self.tty and self.draws:
            self._draw(step, metrics, "stopped early" if early else "", final=True)
        self.end_line()
        if early and self.draws:
            self._write(f"stopped early at step {step}/{self.max_steps}: {stopped}\n")

    def end_line(self) -> None:
        """End a drawn line, so that what follows (an error, the summary) starts on its own."""
        if self._open:
            self._write("\n")
            self._open = False

    def _write(self, text: str) -> None:
        stream = self.stream or sys.stderr
        stream.write(text)
        stream.flush()

    def _draw(self, step: int, metrics: dict[str, float], note: str = "", *,
              final: bool = False) -> None:
        now = time.perf_counter()
        self.drawn = now
        total = self.max_steps
        share = min(1.0, step / max(1, total))
        bar = "#" * int(16 * share)
        parts = [f"step {step}/{total} [{bar:<16}] {100 * share:3.0f}%"]
        rate = (step - self.first_step) / max(now - self.start, 1e-9)
        if rate > 0:  # what fits a narrow terminal first; the line is cut at its width
            left = "" if final else f"<{clock((total - step) / rate)}"
            parts.append(f"{clock(now - self.start)}{left}  {rate:.3g} steps/s")
        if note:
            parts.append(note)
        # the losses first: the rest may be cut off
        for name in sorted(metrics, key=lambda k: (k != "train_loss", k != "val_loss")):
            parts.append(f"{name} {float(metrics[name]):.4g}")
        self._write("\r" + "  ".join(parts)[:self._width() - 1] + "\x1b[K")
        self._open = True

    def _width(self) -> int:
        """Columns of the terminal this line goes to: $COLUMNS, else the stream's own terminal
        (stderr can be one while stdout is piped), else 100."""
        import shutil

        columns = os.environ.get("COLUMNS", "")
        if columns.isdecimal() and int(columns) > 0:
            return int(columns)
        try:
            return os.get_terminal_size((self.stream or sys.stderr).fileno()).columns
        except (OSError, ValueError, AttributeError):
            return shutil.get_terminal_size((100, 20)).columns


def clock(seconds: float) -> str:
    """``m:ss``, or ``h:mm:ss`` from an hour.

    Examples:
        >>> clock(75), clock(3725)
        ('1:15', '1:02:05')
    """
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"
