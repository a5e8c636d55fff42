"""The training clock: seconds of training since the first step, validation and ``--compile``'s
compilation left out, across ``--resume`` (the checkpoint keeps the seconds before it).

Every row of ``logs/metrics.csv`` carries its reading as ``train_seconds`` (the name of
``metrics.json``'s total), so the time a run took to reach a loss is read off the log of any
run, and runs that validate often are not made to look slow by it.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["TrainClock"]


class TrainClock:
    """Training seconds: ``before`` (a resumed run's, from its checkpoint) plus the time since
    ``start`` (called at the first step), less the time spent inside ``paused()`` and
    ``compiling()``; ``compile_seconds`` is ``compiled_before`` plus the time inside
    ``compiling()``.

    Args:
        before: seconds trained before this process.
        compiled_before: seconds compiled before this process (``compile_seconds``).
        now: the clock read (seconds; ``time.perf_counter``, or a test's).

    Examples:
        >>> ticks = iter([10.0, 12.0, 15.0, 16.0])  # start, pause, resume, read
        >>> clock = TrainClock(5.0, now=lambda: next(ticks))
        >>> clock.start()
        >>> with clock.paused(): pass
        >>> clock.seconds()  # 5 before + 6 since the start - 3 paused
        8.0
        >>> ticks = iter([0.0, 1.0, 31.0, 33.0])  # start, compile 30 s in the first step, read
        >>> clock = TrainClock(now=lambda: next(ticks))
        >>> clock.start()
        >>> with clock.compiling(): pass
        >>> clock.seconds(), clock.compile_seconds
        (3.0, 30.0)
    """

    def __init__(self, before: float = 0.0, *, compiled_before: float = 0.0,
                 now: Callable[[], float] = time.perf_counter):
        self.before, self.now = float(before), now
        self.started: float | None = None
        self.paused_since: float | None = None
        self.excluded = 0.0
        self.compile_seconds = float(compiled_before)  # a resumed run's, as ``before``'s

    def start(self) -> None:
        """Start counting (once: a later call changes nothing)."""
        if self.started is None:
            self.started = self.now()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The time inside is not training time (validation)."""
        self.paused_since = self.now()
        try:
            yield
        finally:
            self.excluded += self.now() - self.paused_since
            self.paused_since = None

    @contextmanager
    def compiling(self) -> Iterator[None]:
        """The time inside is compilation (``--compile``'s first step of a process, which
        compiles the model before it runs): counted in ``compile_seconds``, not as training
        time, so that a compiled run's ``train_seconds`` and samples per second are the
        compiled model's, comparable with an eager run's. ``compile_seconds`` also holds the
        step's own compute (compiling and running one step cannot be timed apart): the whole
        loop is ``seconds() + compile_seconds``."""
        before = self.excluded
        with self.paused():
            yield
        self.compile_seconds += self.excluded - before

    def seconds(self) -> float:
        """Training seconds so far (while paused: up to the pause)."""
        if self.started is None:
            return self.before
        until = self.paused_since if self.paused_since is not None else self.now()
        return self.before + until - self.started - self.excluded
