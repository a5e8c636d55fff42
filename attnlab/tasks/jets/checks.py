"""The jet files ``attnlab train jets`` checks before a run directory is written, and the index
ranges of --data's split. Light at import (the standard library): the files are read with
pandas (``data.py``) only when ``check_files`` runs.
"""
from __future__ import annotations

import math
import sys
from typing import Any

from ...errors import UsageError

__all__ = ["DATA_FILES", "split_ranges", "range_labels", "check_files"]

DATA_FILES = ("data", "val", "test")  # the settings that name jet files


def split_ranges(n: int, *, val_fraction: float, test_fraction: float, val: str | None = None,
                 test: str | None = None) -> dict[str, tuple[int, int]]:
    """The index ranges [start, stop) of --data's N jets: train, and val / test unless their
    own file (``val``, ``test``) is given (the test jets last, the validation jets before
    them).

    Examples:
        >>> split_ranges(1000, val_fraction=0.1, test_fraction=0.2)
        {'train': (0, 700), 'val': (700, 800), 'test': (800, 1000)}
    """
    ranges, stop = {}, n
    for name, own, fraction in (("test", test, test_fraction), ("val", val, val_fraction)):
        if not own:
            size = math.ceil(n * fraction)
            ranges[name] = (stop - size, stop)
            stop -= size
    return {"train": (0, stop), **dict(reversed(ranges.items()))}


def range_labels(path: str, start: int, stop: int, chunk: int) -> set[int]:
    """The classes among jets ``start .. stop - 1`` of ``path``, read a chunk at a time and
    only until both are seen (``data.read_labels``)."""
    from .data import read_labels

    seen: set[int] = set()
    for a in range(start, stop, chunk):
        seen.update(read_labels(path, a, min(a + chunk, stop)).tolist())
        if len(seen) > 1:
            break
    return seen


def check_files(cfg: dict[str, Any]) -> None:
    """Every jets file ``cfg`` (the settings dict ``validate`` checks, before it is frozen)
    names is readable, with both classes (``data.check_jet_file``),
    and each part of --data's split (``split_ranges``) holds jets of both classes; otherwise a
    ``UsageError`` naming the flag. Then (not on --resume) a warning on stderr for each --val
    or --test file with jets that --data trains on (``_say_shared``)."""
    from .data import check_jet_file  # numpy and pandas: only when the files are read

    # the jets' digests only where they are compared: not on --resume (a third of the scan)
    resuming = bool(cfg.get("resume"))
    digests: dict[str, list] = {key: [] for key in DATA_FILES if cfg.get(key)}
    counts = {key: check_jet_file(cfg[key], what=f"--{key}",
                                  max_constituents=cfg["max_constituents"],
                                  digests=None if resuming else digests[key])
              for key in digests}
    parts = split_ranges(counts["data"], val_fraction=cfg["val_fraction"],
                         test_fraction=cfg["test_fraction"], val=cfg.get("val"),
                         test=cfg.get("test"))
    for part, (start, stop) in parts.items():
        labels = range_labels(cfg["data"], start, stop, cfg["chunk_size"])
        if len(set(labels)) < 2:
            raise UsageError(
                f"--data {cfg['data']}: its {part} range (jets {start}..{stop - 1} of "
                f"{counts['data']}) does not hold jets of both classes; use a larger file "
                f"or give --{'data' if part == 'train' else part} FILE")
    if not resuming:  # once every check passed; not said again on --resume
        _say_shared(cfg, digests, parts)


def _say_shared(cfg: dict[str, Any], digests: dict[str, list],
                parts: dict[str, tuple[int, int]]) -> None:
    """A warning on stderr per held-out part with jets that --data trains on: a --val or
    --test file (a copy of --data under another name, or files cut from one sample twice), or
    --data's own val or test range (a file that holds its jets twice). Its scores are partly
    of trained jets. And for test jets that the validation part has when it chooses the
    weights (--keep-best, --patience): the test scores are then optimistic."""
    import numpy as np

    from ...data.overlap import chosen_by
    from .data import shared_jets

    data = np.concatenate(digests["data"])
    trained = data[parts["train"][0]:parts["train"][1]]
    held = {}  # by part: (its digests, how a warning names it, its first row)
    for key in ("val", "test"):
        if cfg.get(key):
            held[key] = np.concatenate(digests[key]), f"--{key} {cfg[key]}", 0
        else:
            a, b = parts[key]
            held[key] = data[a:b], f"--data {cfg['data']} (its {key} range, rows {a}..{b - 1})", a
    notes = [shared_jets(trained, jets, what, first_row=first)
             for jets, what, first in held.values()]
    chosen = chosen_by(held["val"][1], keep_best=bool(cfg.get("keep_best")),
                       patience=cfg.get("patience"))
    if chosen:  # test jets that chose the weights
        jets, what, first = held["test"]
        notes.append(shared_jets(held["val"][0], jets, what, first_row=first, chosen=chosen))
    for note in notes:
        if note:
            print(note, file=sys.stderr, flush=True)
