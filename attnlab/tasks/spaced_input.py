"""The tokens of one input typed as symbols separated by spaces: the sequence tasks' symbols
(``reverse 3 1 4``) and the anomaly task's image indices.

Imports nothing heavy: the runtimes of both tasks call it where ``--input`` (or a line of a
data file) enters.
"""
from __future__ import annotations

from ..errors import UsageError

__all__ = ["spaced_tokens"]


def spaced_tokens(text: str, what: str, one: str) -> list[str]:
    """``text.split()``, refused where a line break is inside ``text``: ``str.split`` cuts there
    too, so ``--input "$(cat inputs.txt)"`` was read as one input, its lines joined, and
    answered as if it were one (a reversal of the lines end to end, one odd image of two sets).
    ``one`` names what a single input is ("sequence", "set").

    Examples:
        >>> spaced_tokens(" 3 1\\t4 ", "--input", "sequence")
        ['3', '1', '4']
        >>> spaced_tokens("3 1\\n4", "--input", "sequence")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        attnlab.errors.UsageError: --input holds 2 lines; it is one sequence, on one line ...
    """
    lines = text.strip().count("\n") + 1  # a line break at either end cuts nothing
    if lines > 1:
        raise UsageError(f"{what} holds {lines} lines; it is one {one}, on one line "
                         f"(predict --input-file FILE reads one {one} per line)")
    return text.split()
