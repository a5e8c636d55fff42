"""Notes and warnings on standard error, said once per command.

``attnlab predict --input-file`` predicts a long file a chunk at a time, and each chunk's
``predict_many`` finds its own inputs with unknown words, NaN answers or cut translations. Said
as found, a note came once per chunk with that chunk's count (13 lines for a file of 10^5
inputs, none with the file's total). Within ``said_once(inputs)`` (the command open over all
its chunks), ``say`` holds each kind of note and prints it once when the command ends, stops
or fails: the count of the whole file and the first input named (the first chunk's). Outside
it (one call of ``predict_many`` from Python) ``say`` prints at once, as before.

Examples:
    >>> import contextlib, sys
    >>> def line(count, inputs):
    ...     return f"note: {count} of {inputs} inputs are odd (first: line 2)"
    >>> with contextlib.redirect_stderr(sys.stdout):
    ...     say("odd", 1, line, 3)
    note: 1 of 3 inputs are odd (first: line 2)
    >>> with contextlib.redirect_stderr(sys.stdout), said_once(10):
    ...     say("odd", 1, line, 3)
    ...     say("odd", 2, lambda count, inputs: "a later chunk's first", 3)
    note: 3 of 10 inputs are odd (first: line 2)
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["say", "said_once", "progress"]

# a note's line from (how many inputs it is said of, how many inputs there are in all)
Line = Callable[[int, int], str]


class _Held:
    """The notes of one command, by kind: the first line said of each and the summed count."""

    def __init__(self, inputs: int) -> None:
        self.inputs = inputs
        self.kinds: dict[str, tuple[int, Line]] = {}

    def add(self, kind: str, count: int, line: Line) -> None:
        held, first = self.kinds.get(kind, (0, line))
        self.kinds[kind] = (held + count, first)

    def lines(self) -> list[str]:
        return [line(count, self.inputs) for count, line in self.kinds.values()]


_HELD: ContextVar[_Held | None] = ContextVar("attnlab_notes_held", default=None)


def say(kind: str, count: int, line: Line, inputs: int) -> None:
    """Print ``line(count, inputs)`` on stderr, or, inside ``said_once``, hold it: the lines
    of one ``kind`` are then said once, by the first one's ``line``, of their summed ``count``
    and of the command's inputs. ``count`` 0 says nothing.

    Args:
        kind: what the note is about (``"unknown"``, ``"nan"``); one line per kind.
        count: how many of the ``inputs`` given now the note is about.
        line: the whole line (``note: ...``, ``warning: ...``) for a count and a total.
        inputs: how many inputs were given now (the total outside ``said_once``).
    """
    if count == 0:
        return
    held = _HELD.get()
    if held is None:
        print(line(count, inputs), file=sys.stderr, flush=True)
    else:
        held.add(kind, count, line)


@contextmanager
def said_once(inputs: int) -> Iterator[None]:
    """While open, ``say`` holds notes; at its end (a stop or an error too, before the
    command's last line) each kind is printed once, its count of all ``inputs``."""
    held = _Held(inputs)
    token = _HELD.set(held)
    try:
        yield
    finally:
        _HELD.reset(token)
        for line in held.lines():
            print(line, file=sys.stderr, flush=True)


def progress(command: str, before: int, done: int, total: int, started: float, chunk: int,
             unit: str = "inputs") -> None:
    """``COMMAND: N of M inputs (R/s)`` on stderr after the chunk (``unit`` ``before`` to
    ``done``, begun at ``started``, a ``time.perf_counter``) that passes a further tenth of
    ``total``, for more than one ``chunk`` of them (a log of a million lines gets ten lines,
    not 123).

    Examples:
        >>> import contextlib, time
        >>> with contextlib.redirect_stderr(sys.stdout):  # doctest: +ELLIPSIS
        ...     progress("evaluate", 0, 3, 10, time.perf_counter(), 3, "rows")
        evaluate: 3 of 10 rows (...)
    """
    import time

    if total > chunk and 10 * done // total > 10 * before // total:
        rate = done / max(time.perf_counter() - started, 1e-9)
        print(f"{command}: {done:,} of {total:,} {unit} ({rate:,.0f}/s)", file=sys.stderr,
              flush=True)
