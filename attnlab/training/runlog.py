"""A run's training log, written once and sent to every place it goes.

The loop hands each row (a step, its numbers, the training seconds) to one ``RunLog``, which
passes it to its sinks: ``logs/metrics.csv`` (``csvlog.CSVLog``) and TensorBoard event files
in the same folder (``tblog.TensorBoardLog``). Another destination (W&B, MLflow) would be one
more sink with the same three methods, and the loop would not change.

Only global rank 0 writes rows (the loop's rule), so under DDP the other ranks never open a file.
"""
from __future__ import annotations

from pathlib import Path
from typing import Protocol

from .csvlog import CSVLog
from .tblog import TensorBoardLog

__all__ = ["LogSink", "RunLog"]


class LogSink(Protocol):
    """One destination of the training log."""

    def begin(self, step: int) -> None:
        """This process trains from ``step`` (a resumed run: its checkpoint's step)."""

    def write(self, step: int, metrics: dict[str, float], *, seconds: float) -> None:
        """A row: ``metrics`` after ``step`` optimiser steps, ``seconds`` of training in."""

    def close(self) -> None:
        """Write out what is pending and release the files."""


class RunLog:
    """Every row to every sink, in the order given.

    Args:
        sinks: where rows go.

    Examples:
        >>> log = RunLog.for_run("logs")  # logs/metrics.csv and logs/events.out.tfevents.*
        >>> [type(s).__name__ for s in log.sinks]
        ['CSVLog', 'TensorBoardLog']
    """

    def __init__(self, sinks: list[LogSink]) -> None:
        self.sinks = sinks

    @classmethod
    def for_run(cls, log_dir: str | Path) -> "RunLog":
        """The log of a training run: ``log_dir/metrics.csv`` and TensorBoard events beside it."""
        log_dir = Path(log_dir)
        return cls([CSVLog(log_dir / "metrics.csv"), TensorBoardLog(log_dir)])

    def begin(self, step: int) -> None:
        for sink in self.sinks:
            sink.begin(step)

    def write(self, step: int, metrics: dict[str, float], *, seconds: float) -> None:
        for sink in self.sinks:
            sink.write(step, metrics, seconds=seconds)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()
