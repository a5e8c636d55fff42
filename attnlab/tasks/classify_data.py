"""The data side of ``attnlab train classify``: reading the user's files, the train / val /
test splits, the tokeniser, and the padded, length-grouped batches.

Shapes: B batch, T tokens (or a set's elements), F features per element (``--set-column``).

Why a module of its own: ``classify.py`` holds the task (flags, checks, training, loading) and
the model and metrics; this holds what turns rows into tensors, which training, ``evaluate`` and
``predict`` all need: reading a CSV/TSV/JSONL file (texts, or sets of feature rows), the
per-class split with ``--seed``, labels of held-out files checked against training, fitting the
tokeniser, and the batches (padded with id 0 and masked, or zero-padded sets with a mask).
Nothing here imports Lightning, so the commands that do not train stay free of it.
"""
from __future__ import annotations

import math
import random
from typing import Any

import torch

from ..data.resumable import ResumableBatches, shard
from ..errors import UsageError

__all__ = ["load_splits", "fit_tokenizer", "encode", "make_batches"]


def _read(cfg: dict[str, Any], key: str, features: list[str] | None = None, *,
          pinned: bool = False):
    """The ``(input, label)`` examples of the file ``cfg[key]`` — (text, label) rows, or
    ((T, F) tensor, label) sets with ``--set-column`` — their line numbers, the file, and the
    SHA-256 of the bytes read.

    ``pinned``: the file is one of the run's own (``--data``/``--test``/``--val``), so its bytes
    must be the ones config.yaml's ``data_sha256`` recorded, when it recorded them."""
    from ..data.tables import check_digest

    if cfg.get("set_column"):
        from ..data.feature_sets import parse_feature_columns, read_feature_sets

        sets = read_feature_sets(cfg[key], set_column=cfg["set_column"],
                                 label_column=cfg["label_column"], what=f"--{key}",
                                 feature_columns=features or parse_feature_columns(cfg["feature_columns"]))
        found, examples = sets, sets
    else:
        from ..data.tables import read_table

        found = read_table(cfg[key], [cfg["text_column"], cfg["label_column"]], what=f"--{key}")
        examples = [(row[cfg["text_column"]], row[cfg["label_column"]].strip()) for row in found]
    if pinned:
        check_digest(found.path, found.sha256, (cfg.get("data_sha256") or {}).get(key),
                     what=f"--{key}")
    return examples, found.lines, found.path, found.sha256


def _split(indices_by_label: dict[str, list[int]], fraction: float, rng: random.Random):
    """Hold out ``fraction`` of each class (never a class's last example): (kept, held out)."""
    kept, held = [], []
    for label in sorted(indices_by_label):
        idx = list(indices_by_label[label])
        rng.shuffle(idx)
        n = min(round(fraction * len(idx)), len(idx) - 1)
        held += idx[:n]
        kept += idx[n:]
    return sorted(kept), sorted(held)


def _check_labels(examples, lines, path, labels: set[str], key: str) -> None:
    for (_, label), line in zip(examples, lines):
        if label not in labels:
            known = ", ".join(sorted(labels)[:10]) + (", ..." if len(labels) > 10 else "")
            raise UsageError(f"--{key} {path} line {line}: label {label!r} never seen in "
                             f"training (labels: {known})")


def load_splits(cfg: dict[str, Any], *, digests: dict[str, str] | None = None
                ) -> dict[str, list[tuple[Any, str]]]:
    """The (text, label) pairs of the train / val / test splits — ((T, F) tensor, label) sets
    with ``--set-column``, and then also ``"features"``, the feature columns' names;
    ``UsageError`` on data errors, and when a file's bytes are not those config.yaml's
    ``data_sha256`` recorded. ``digests``, when given, receives the SHA-256 of the bytes read
    from each file, by option ("data", "test", "val")."""
    sets = cfg.get("set_column")
    if not cfg.get("data"):
        raise UsageError("--data FILE is required: a CSV, TSV or JSONL file with columns "
                         f"{sets or cfg['text_column']!r} and {cfg['label_column']!r}")
    label = cfg["label_column"]
    digests = {} if digests is None else digests
    pairs, _, path, digests["data"] = _read(cfg, "data", pinned=True)
    features = getattr(pairs, "features", None)  # held-out files must have the same features
    labels = {lab for _, lab in pairs}
    if len(labels) < 2:
        raise UsageError(f"--data {path}: column {label!r} has a single class "
                         f"({next(iter(labels))!r}); a classifier needs at least 2")
    by_label: dict[str, list[int]] = {}
    for i, (_, lab) in enumerate(pairs):
        by_label.setdefault(lab, []).append(i)
    rng = random.Random(cfg["seed"])
    splits: dict[str, list[tuple[str, str]]] = {}
    train_idx = list(range(len(pairs)))
    left = 1.0  # the fraction of --data not yet held out: fractions are of the whole file
    for key in ("test", "val"):
        if cfg.get(key):
            held, lines, held_path, digests[key] = _read(cfg, key, features, pinned=True)
            _check_labels(held, lines, held_path, labels, key)
            splits[key] = list(held)
            continue
        keep = set(train_idx)
        subset = {lab: [i for i in idx if i in keep] for lab, idx in by_label.items()}
        train_idx, held_idx = _split(subset, min(1.0, cfg[f"{key}_fraction"] / left), rng)
        left -= cfg[f"{key}_fraction"]
        if not held_idx:
            raise UsageError(f"--data {path}: too few {'sets' if sets else 'rows'} ({len(pairs)}) "
                             f"to hold out a {key} split; add rows or give --{key} FILE")
        splits[key] = [pairs[i] for i in held_idx]
    splits["train"] = [pairs[i] for i in train_idx]
    if sets:
        splits["features"] = features
    return splits


def fit_tokenizer(cfg: dict[str, Any], texts: list[str]):
    from ..tokenizers import BPETokenizer, CharTokenizer, WordTokenizer

    cls = {"char": CharTokenizer, "word": WordTokenizer, "bpe": BPETokenizer}[cfg["tokenizer"]]
    return cls.fit(texts, vocab_size=cfg["vocab_size"])


def encode(tokenizer, texts: list[str], max_len: int) -> list[list[int]]:
    """Token ids of each text, cut to the first ``max_len``."""
    return [ids[:max_len] for ids in tokenizer.encode_batch(texts)]


def make_batches(ids: list, targets: list[int], batch_size: int, *,
                 shuffle: bool = False, seed: int = 0) -> list[tuple[torch.Tensor, ...]]:
    """Padded batches (ids (B, T) with pad 0, targets (B,)) of sequences of similar length —
    or, when ``ids`` are feature sets ((T, F) tensors), (features (B, T, F) zero-padded,
    mask (B, T) True = real element, targets (B,)).

    Sorting by length within windows of 50 batches keeps padding small; ``shuffle`` mixes the
    windows and the batch order (seeded) so training batches still vary.
    """
    order = list(range(len(ids)))
    rng = random.Random(seed)
    if shuffle:
        rng.shuffle(order)
    window = batch_size * 50
    order = [i for w in range(0, len(order), window)
             for i in sorted(order[w : w + window], key=lambda i: len(ids[i]))]
    batches = [order[b : b + batch_size] for b in range(0, len(order), batch_size)]
    if shuffle:
        rng.shuffle(batches)
    out = []
    for batch in batches:
        y = torch.tensor([targets[i] for i in batch])
        if torch.is_tensor(ids[batch[0]]):  # feature sets
            from torch.nn.utils.rnn import pad_sequence

            from ..nn import padding_mask

            x = pad_sequence([ids[i] for i in batch], batch_first=True)  # (B, T, F)
            mask = padding_mask(torch.tensor([len(ids[i]) for i in batch]))[:, 0, 0]  # (B, T)
            out.append((x, mask, y))
            continue
        T = max(len(ids[i]) for i in batch)
        x = torch.zeros(len(batch), T, dtype=torch.long)  # (B, T), 0 = pad
        for row, i in enumerate(batch):
            x[row, : len(ids[i])] = torch.tensor(ids[i])
        out.append((x, y))
    return out


class _Batches(ResumableBatches):
    """A new shuffle of the length-grouped training batches every epoch; resumable mid-epoch.
    Under DDP each rank takes every world-th batch, all ranks the same count."""

    def __init__(self, ids, targets, batch_size: int, seed: int) -> None:
        super().__init__()
        self.ids, self.targets, self.batch_size, self.seed = ids, targets, batch_size, seed

    def epoch_batches(self, epoch: int, start: int):
        batches = make_batches(self.ids, self.targets, self.batch_size, shuffle=True,
                               seed=self.seed * 100_003 + epoch + 1)
        rank, world = shard()
        return batches[: len(batches) - len(batches) % world][rank::world][start:]

    def __len__(self) -> int:
        return self.num_batches // shard()[1]

    @property
    def num_batches(self) -> int:
        """Batches per epoch over all ranks."""
        return math.ceil(len(self.ids) / self.batch_size)


def _targets(pairs, labels: list[str]) -> list[int]:
    index = {label: i for i, label in enumerate(labels)}
    return [index[lab] for _, lab in pairs]


def _inputs(cfg, tokenizer, xs) -> list:
    """Model inputs: token ids of texts, or feature sets standardised as in training."""
    if cfg.get("set_column"):
        from ..data.feature_sets import standardise

        return standardise(xs, cfg["feature_mean"], cfg["feature_std"])
    return encode(tokenizer, xs, cfg["max_len"])


def _test_batches(cfg, tokenizer, pairs):
    return make_batches(_inputs(cfg, tokenizer, [x for x, _ in pairs]),
                        _targets(pairs, cfg["labels"]), 256)

