"""The data side of ``attnlab train translate``: splits, tokenisers and padded batches.

Shapes: B batch, S source tokens, T target tokens (SOS ... EOS).

Why a module of its own: ``translate.py`` holds the task (flags, checks, training, loading);
this holds what turns text into tensors, which training, ``evaluate`` and ``translate`` all
need: the built-in splits (numbers by num2words, dates by babel, test and validation items held
out from the training stream), the splits of the user's ``--data``/``--test`` files, the choice
and fitting of the two tokenisers (``TranslationTokenizers``), and the padded batches. Nothing
here imports Lightning, so the commands that do not train stay free of it.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..errors import UsageError

__all__ = ["TARGET_TOKENIZER_FILE", "TranslationTokenizers", "pad", "encode_pairs",
           "stream_batches", "padded_loader", "builtin_splits", "read_pairs", "file_splits",
           "resolve_tokenizer", "fit_tokenizer"]

TARGET_TOKENIZER_FILE = "target_tokenizer.json"


@dataclass
class TranslationTokenizers:
    """The source and target tokenisers of a translation run.

    ``encode`` reads source text, ``decode`` writes target text; ``save(path)`` writes the
    source tokeniser to ``path`` and the target one next to it as ``target_tokenizer.json``.
    """

    src: Any
    tgt: Any

    def encode(self, text: str) -> list[int]:
        return self.src.encode(text)

    def decode(self, ids) -> str:
        return self.tgt.decode(ids)

    def save(self, path: str | Path) -> None:
        self.src.save(path)
        self.tgt.save(Path(path).with_name(TARGET_TOKENIZER_FILE))


# ---- batches ----------------------------------------------------------------------------
def pad(seqs: list[list[int]], pad_id: int = 0) -> Tensor:
    """Right-pad lists of ids into a (B, L) int64 tensor."""
    out = torch.full((len(seqs), max(1, max(map(len, seqs)))), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out


def encode_pairs(tok: TranslationTokenizers, pairs: list[tuple[str, str]]) -> tuple[Tensor, Tensor]:
    """(src (B, S), tgt (B, T)) of text pairs; targets are wrapped in SOS ... EOS."""
    src = tok.src.encode_batch([s for s, _ in pairs])
    tgt = tok.tgt.encode_batch([t for _, t in pairs], add_special_tokens=True)
    return pad(src), pad(tgt)


def stream_batches(pairs, tok: TranslationTokenizers, batch_size: int, steps: int):
    """``steps`` fresh training batches of a built-in dataset; batch number n (see
    ``numbered_batches``: different on each DDP rank, and computed directly when a run
    resumes) is drawn by its own generator, seeded from (seed, n)."""
    from ..data import numbered_batches

    return numbered_batches(lambda n: encode_pairs(
        tok, pairs.sample(batch_size, seed=f"train/{pairs.seed}/{n}")), steps)


def padded_loader(tok: TranslationTokenizers, pairs: list[tuple[str, str]], batch_size: int):
    """A loader of ready-made padded batches (validation)."""
    batches = [encode_pairs(tok, pairs[i : i + batch_size])
               for i in range(0, len(pairs), batch_size)]
    return torch.utils.data.DataLoader(batches, batch_size=None)


# ---- splits -----------------------------------------------------------------------------
def builtin_splits(cfg: dict[str, Any]):
    """(endless training stream, validation pairs, test pairs) of the built-in dataset."""
    if cfg.get("dataset", "numbers") == "dates":
        from ..data.dates import DatePairs, held_out_days

        test, val = held_out_days(cfg["test_size"], cfg["val_size"])
        stream = DatePairs(cfg["src"], cfg["tgt"], exclude=set(test) | set(val), seed=cfg["seed"])
    else:
        from ..data.numbers import NumberPairs, held_out_numbers

        test, val = held_out_numbers(cfg["max_number"], cfg["test_size"], cfg["val_size"])
        stream = NumberPairs(cfg["src"], cfg["tgt"], cfg["max_number"],
                             exclude=set(test) | set(val), seed=cfg["seed"])
    return stream, [stream.pair(n) for n in val], [stream.pair(n) for n in test]


def read_pairs(path: str, cfg: dict[str, Any], what: str, *, pinned: bool = False
               ) -> list[tuple[str, str]]:
    """The (source, target) rows of a table file; ``what`` names its flag in errors.

    ``pinned``: the file is the run's own ``--data``/``--test``, so its bytes must be the ones
    config.yaml's ``data_sha256`` recorded (when it has), else ``UsageError``: between the
    check at the start and this read, the file changed."""
    from ..data.tables import check_digest, read_table

    columns = [cfg["src_column"], cfg["tgt_column"]]
    if columns[0] == columns[1]:  # the model would learn to copy its input
        raise UsageError(f"--src-column and --tgt-column are both {columns[0]!r}; they must name "
                         f"two different columns")
    rows = read_table(path, columns=columns, what=what)
    if pinned:
        key = what.lstrip("-")
        check_digest(rows.path, rows.sha256, (cfg.get("data_sha256") or {}).get(key), what=what)
    return [(r[columns[0]], r[columns[1]]) for r in rows]


def file_splits(cfg: dict[str, Any]):
    """(train, val, test) pairs of --data (and --test); held-out rows chosen with the seed."""
    pairs = read_pairs(cfg["data"], cfg, "--data", pinned=True)
    random.Random(cfg["seed"]).shuffle(pairs)
    test = read_pairs(cfg["test"], cfg, "--test", pinned=True) if cfg.get("test") else None
    held = max(1, len(pairs) // 10)
    if test is None:
        test, pairs = pairs[:held], pairs[held:]
    val, train = pairs[: min(held, cfg["val_size"])], pairs[min(held, cfg["val_size"]) :]
    if len(train) < 1 or not val:
        raise UsageError(f"--data {cfg['data']}: {len(pairs)} rows are too few to hold out "
                         f"test and validation rows; give at least 3")
    return train, val, test


# ---- tokenisers -------------------------------------------------------------------------
def resolve_tokenizer(kind: str, texts: list[str], *, builtin: bool) -> str:
    """``auto``: words for built-in numbers written as several words (English: ~12 words, none
    unseen), byte-level BPE otherwise (German numbers are one long word; users' text has words
    the training rows never show, which BPE still spells)."""
    if kind != "auto":
        return kind
    words = sum(len(t.split()) for t in texts) / max(1, len(texts))
    return "word" if builtin and words >= 2 else "bpe"


def fit_tokenizer(kind: str, texts: list[str], vocab_size: int):
    """A ``kind`` ("char", "word" or "bpe") tokeniser fit on ``texts``."""
    from ..tokenizers import BPETokenizer, CharTokenizer, WordTokenizer

    if kind == "bpe":
        return BPETokenizer.fit(texts, vocab_size=vocab_size)
    return {"char": CharTokenizer, "word": WordTokenizer}[kind].fit(texts)
