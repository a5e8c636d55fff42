"""Held-out rows that the training split has too: a ``--test`` or ``--val`` file that shares
inputs with the training data scores the model partly on what it trained on, and nothing in the
scores shows it. The usual causes are a file given twice (``--data train.csv --test
train.csv``) and a test file cut from an older copy of the training data.

``shared_inputs`` words the warning that ``attnlab train`` prints on stderr before training
starts: how many of the file's rows have an input (a text; a sentence's words) that a training
row has, and the first of them. A warning, not a refusal: a user may mean it (a check that the
model fits its training data). Light: no torch.

The same rule for a test file and the validation split that chose the weights: with
``--keep-best`` (the weights kept are those that scored best on the validation split) or
``--patience`` (the run stopped by its scores), test rows that are validation rows too score
the weights on rows that picked them, and the test score is optimistic (``chosen_by``
words how the split chose; ``shared_inputs(..., chosen=...)`` the warning).

Examples:
    >>> shared_inputs(["a b", "c"], ["c", "d", "c"], ["line 2", "line 3", "line 4"],
    ...               what="--test t.csv")
    'warning: --test t.csv: 2 of its 3 rows have an input that a training row has too (first: line 2), so its scores are partly of inputs the model trained on'
    >>> shared_inputs(["c"], ["c", "d"], ["line 2", "line 3"], what="--test t.csv",
    ...               chosen=chosen_by("--val v.csv", keep_best=True, patience=None))
    'warning: --test t.csv: 1 of its 2 rows have an input that is in --val v.csv too (first: line 2), and --keep-best keeps the weights that score best on --val v.csv, so its scores are optimistic'
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path

__all__ = ["shared_inputs", "SharedCount", "shared_note", "chosen_by", "moved_training_file"]


def shared_inputs(train: Iterable[Hashable], held: Sequence[Hashable], places: Sequence[str],
                  *, what: str, chosen: tuple[str, str] | None = None) -> str | None:
    """The warning for the held-out file ``what`` (inputs ``held``, at ``places``: "line 7",
    "row 7") when some of its rows have an input that a row of ``train`` has; None when none
    has. ``chosen`` (``chosen_by``'s): ``train`` is then the validation split that chose the
    weights, and the warning says so."""
    count = SharedCount(train)
    count.see(held, lambda: places)
    return count.note(what, chosen=chosen)


class SharedCount:
    """``shared_inputs``' count, of a held-out file seen a chunk of rows at a time (``see``):
    how many of its rows have an input that a row of ``train`` has, and where the first is."""

    def __init__(self, train: Iterable[Hashable]) -> None:
        self.train = set(train)
        self.shared, self.rows, self.first = 0, 0, None

    def see(self, held: Sequence[Hashable], places) -> None:
        """Count the rows of one chunk (inputs ``held``, at the places ``places()`` gives)."""
        self.rows += len(held)
        shared = [i for i, x in enumerate(held) if x in self.train]
        if shared and self.first is None:
            self.first = places()[shared[0]]
        self.shared += len(shared)

    def note(self, what: str, *, chosen: tuple[str, str] | None = None) -> str | None:
        """The warning (``shared_note``) of the rows seen, None where none is shared."""
        return shared_note(self.shared, self.rows, self.first, what=what,
                           chosen=chosen) if self.shared else None


def chosen_by(val: str, *, keep_best: bool, patience: int | None) -> tuple[str, str] | None:
    """How the validation split ``val`` ("--val v.csv", "the validation rows of --data d.csv")
    chose the run's weights, for ``shared_note``: (``val``, what chose), or None when it chose
    nothing (no --keep-best, no --patience: its scores were only looked at).

    Examples:
        >>> chosen_by("--val v.csv", keep_best=False, patience=3)[1]
        '--patience 3 stops the run by its scores on --val v.csv'
        >>> chosen_by("--val v.csv", keep_best=False, patience=None) is None
        True
    """
    ways = ([f"--keep-best keeps the weights that score best on {val}"] if keep_best else []) \
        + ([f"--patience {patience} stops the run by its scores on {val}"] if patience else [])
    return (val, " and ".join(ways)) if ways else None


def shared_note(shared: int, rows: int, first: str, *, what: str,
                chosen: tuple[str, str] | None = None) -> str:
    """The warning for the held-out file ``what``: ``shared`` of its ``rows`` rows have an
    input that a training row has, the first at ``first`` ("row 7"). ``shared_inputs`` words
    it; a task that compares its inputs another way (jets: by digest) words it here too.
    ``chosen`` (``chosen_by``'s): the rows are instead those of the validation split that
    chose the weights.

    Examples:
        >>> shared_note(80, 80, "row 0", what="--test copy.h5")  # doctest: +ELLIPSIS
        'warning: --test copy.h5: 80 of its 80 rows have an input that a training row has ...'
    """
    if chosen is not None:
        val, how = chosen
        return (f"warning: {what}: {shared} of its {rows} rows have an input that is in {val} "
                f"too (first: {first}), and {how}, so its scores are optimistic")
    return (f"warning: {what}: {shared} of its {rows} rows have an input that a training row "
            f"has too (first: {first}), so its scores are partly of inputs the model trained "
            f"on")


def moved_training_file(given: str | Path, trained: str | Path | None,
                        recorded: str | None) -> str | None:
    """The warning for ``evaluate --data given`` when ``given`` holds the bytes of the run's
    training file, which is no longer at ``trained`` with them (moved, renamed, or changed
    since); None otherwise.

    A task compares ``evaluate --data``'s inputs with its training split re-drawn from the
    file at ``trained`` (config.yaml's ``data``), and finds nothing to compare with there once
    the file has moved: ``evaluate --data moved/train.csv`` then scored the training rows
    without a word. The digest still tells the file (``recorded``: config.yaml's
    ``data_sha256`` of --data); where the file is still in place, the task's own comparison
    counts the rows (so this says nothing).

    Args:
        given: the file (or datasets directory) ``evaluate --data`` names.
        trained: the run's training file as it recorded it (absolute).
        recorded: the digest the run recorded of it (None: none recorded).
    """
    from ..runs import digest_holds, file_digest

    if not recorded or trained is None or not Path(given).exists():
        return None  # (a missing --data is named by the task's reader)
    try:
        if not digest_holds(given, file_digest(given), recorded):
            return None
        if Path(trained).exists() and digest_holds(trained, file_digest(trained), recorded):
            return None  # in place: the task compares the rows themselves
    except OSError:  # unreadable: the task's reader names it
        return None
    return (f"warning: --data {given} holds the bytes of the file this run trained on (its "
            f"SHA-256 is config.yaml's data_sha256 of --data, recorded at {trained}, which has "
            f"moved or changed since), so its rows include the training split and its scores "
            f"are partly of inputs the model trained on")
