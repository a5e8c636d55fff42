"""A prepared corpus' ``meta.json``, read and checked without numpy or torch: the part of
``attnlab.data.corpus`` (which re-exports these names) that imports neither, so that
``attnlab train lm --data DIR`` checks the corpus before numpy or torch is imported.

``read_meta`` checks, cheaply, that the token files have the sizes meta.json states and that
tokenizer.json is the one it names; ``corpus_identity`` is what a run records to know later that
the corpus is the one it was trained on (the digests of meta.json and tokenizer.json; see
``attnlab.data.corpus``'s module docstring).

Examples:
    >>> from attnlab.data.corpus import prepare
    >>> _ = Path("input.txt").write_text("to be or not to be\\n" * 20)
    >>> _ = prepare(["input.txt"], "data", tokenizer="char")
    >>> meta = read_meta("data")
    >>> meta["dtype"], meta["train_tokens"] + meta["val_tokens"]
    ('uint16', 380)
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import UsageError
from ..runs import file_digest

__all__ = ["read_meta", "corpus_identity", "changed_token_files", "SPLITS", "TOKEN_BYTES", "CORPUS_FILES"]

SPLITS = ("train", "val")
# Bytes per token of the dtypes ``prepare`` writes (numpy's names, as meta.json stores them);
# a table rather than ``np.dtype(name).itemsize``, so that reading meta.json needs no numpy.
TOKEN_BYTES = {"uint16": 2, "uint32": 4}
CORPUS_FILES = ("train.bin", "val.bin", "tokenizer.json", "meta.json")  # what prepare writes


def read_meta(data_dir: str | Path, *, what: str = "--data") -> dict:
    """``meta.json`` of a prepared directory, checked against the files next to it.

    Cheap checks only (no pass over the token files): each token file's size is the token count
    meta.json states, and tokenizer.json is the one meta.json's digest names (a meta.json
    without digests is checked for sizes only: docs/compatibility.md).

    Args:
        data_dir: a directory written by ``attnlab prepare``.
        what: the flag that named it, to start the messages.

    Returns:
        meta.json's content (``vocab_size``, ``dtype``, ``train_tokens``, ``val_tokens``, ...).

    Raises:
        UsageError: naming the directory (and file) when meta.json is missing or unreadable,
            or a file is missing or does not match it.
    """
    data_dir = Path(data_dir)
    path = data_dir / "meta.json"
    if not path.is_file():
        # a folder of the user's own files (not what a stopped prepare left): prepare writes
        # only to an empty --out
        texts = data_dir.is_dir() and any(p.is_file() and not p.name.startswith(".")
                                          and p.name not in CORPUS_FILES for p in data_dir.iterdir())
        how = f"`attnlab prepare {data_dir}/FILE... --out CORPUS`, then give {what} CORPUS" \
            if texts else f"`attnlab prepare FILE... --out {data_dir}`"
        raise UsageError(f"{what} {data_dir} is not a prepared corpus (no meta.json); run {how}")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
        itemsize = TOKEN_BYTES[meta["dtype"]]
    except (ValueError, TypeError, KeyError, UnicodeDecodeError) as e:
        raise UsageError(f"{what} {path} is not a meta.json written by `attnlab prepare` "
                         f"({type(e).__name__}: {e}); prepare the corpus again") from None
    for split in SPLITS:
        _check_size(data_dir / f"{split}.bin", meta.get(f"{split}_tokens"), itemsize, what)
    _check_tokenizer(data_dir, (meta.get("sha256") or {}).get("tokenizer.json"), what)
    return meta


def _check_size(bin_path: Path, tokens, itemsize: int, what: str) -> None:
    """The token file is there and holds ``tokens`` tokens (when meta.json states a count)."""
    if not bin_path.is_file():
        raise UsageError(f"{what} {bin_path.parent} has no {bin_path.name}; prepare it again")
    size = bin_path.stat().st_size
    if isinstance(tokens, int) and size != tokens * itemsize:
        raise UsageError(f"{what} {bin_path} holds {size // itemsize:,} tokens but meta.json says "
                         f"{tokens:,}: the file was changed after `attnlab prepare` wrote it; "
                         f"prepare the corpus again")


def _check_tokenizer(data_dir: Path, expected: str | None, what: str) -> None:
    """tokenizer.json is the one meta.json's digest names (``expected``; None: not recorded)."""
    tok = data_dir / "tokenizer.json"
    if expected and (not tok.is_file() or file_digest(tok) != expected):
        state = "is missing" if not tok.is_file() else "is not the one meta.json names"
        raise UsageError(f"{what} {tok} {state} (token ids mean nothing without their "
                         f"tokeniser); prepare the corpus again")


def corpus_identity(data_dir: str | Path) -> dict[str, str]:
    """SHA-256 of a prepared corpus' meta.json and tokenizer.json: what a run records to know
    later that the corpus is the one it was trained on (see ``attnlab.data.corpus``)."""
    return {name: file_digest(Path(data_dir) / name) for name in ("meta.json", "tokenizer.json")}


def changed_token_files(data_dir: str | Path) -> list[str]:
    """The token files of a prepared corpus whose SHA-256 is not the one its meta.json holds
    (``prepare`` computed them while writing the files): a pass over every token, for a
    corpus found at a new path once, not for each run that reads it. A meta.json without
    digests (an older ``prepare``'s) vouches for nothing: [].

    Examples:
        >>> from attnlab.data.corpus import prepare
        >>> _ = Path("some.txt").write_text("to be or not to be\\n" * 20)
        >>> _ = prepare(["some.txt"], "some", tokenizer="char")
        >>> changed_token_files("some")
        []
    """
    data_dir = Path(data_dir)
    try:
        held = json.loads((data_dir / "meta.json").read_text(encoding="utf-8")).get("sha256")
    except (OSError, ValueError, AttributeError):
        held = None
    return [name for name in (f"{split}.bin" for split in SPLITS)
            if isinstance(held, dict) and held.get(name)
            and (not (data_dir / name).is_file() or file_digest(data_dir / name) != held[name])]
