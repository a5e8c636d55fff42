"""Synthetic per-element tasks: reverse, copy and sort a sequence of symbols.

Shapes: N sequences, T = seq_len positions, C = num_categories symbols.

Each example is a sequence of T integers in 0..C-1 drawn uniformly at random; its label is the
sequence reversed (the course's ``ReverseDataset``), copied, or sorted. Inputs are kept as
integers and one-hot encoded by the model's caller (``F.one_hot(x, C)``), as in the course.

Every split draws from its own ``torch.Generator`` seeded from ``(seed, split)``, so the
validation and test sets are the same for every run with the same seed, whatever the global
random state, and the training set changes with ``--seed``.
"""
from __future__ import annotations

import torch
from torch import Tensor
from torch.utils.data import Dataset

from .resumable import ResumableBatches, shard

__all__ = ["SEQUENCE_TASKS", "SequenceDataset", "ReverseDataset", "make_labels", "split_seed",
           "pad_to_length", "batch_loader", "BatchLoader"]

SEQUENCE_TASKS = ("reverse", "copy", "sort")
_SPLITS = {"train": 0, "val": 1, "test": 2}


def make_labels(task: str, inputs: Tensor) -> Tensor:
    """The target of ``task`` for integer inputs (N, T) -> (N, T)."""
    if task == "reverse":
        return inputs.flip(-1)
    if task == "copy":
        return inputs.clone()
    if task == "sort":
        return inputs.sort(dim=-1).values
    raise ValueError(f"task must be one of {SEQUENCE_TASKS}, got {task!r}")


def split_seed(seed: int, split: str) -> int:
    """A seed of its own for each split, so splits never overlap in their random streams."""
    if split not in _SPLITS:
        raise ValueError(f"split must be one of {tuple(_SPLITS)}, got {split!r}")
    return (int(seed) * 1_000_003 + _SPLITS[split]) % 2**63


class SequenceDataset(Dataset):
    """``size`` random sequences and their labels for ``task``.

    Indexing with an int gives one example ``(inputs (T,), labels (T,))``; with a list or tensor
    of indices it gives a whole batch ``(B, T), (B, T)`` in one gather (see ``batch_loader``).

    Args:
        task: "reverse", "copy" or "sort".
        num_categories: symbols C (inputs are 0..C-1).
        seq_len: positions T.
        size: number of sequences N.
        seed: the run's seed.
        split: "train", "val" or "test" (each has its own random stream).

    Raises:
        ValueError: if the task, sizes or split are invalid.

    Examples:
        >>> ds = SequenceDataset("reverse", num_categories=10, seq_len=16, size=100, seed=0)
        >>> x, y = ds[0]; bool((y == x.flip(0)).all())
        True
    """

    def __init__(self, task: str, num_categories: int, seq_len: int, size: int, *, seed: int = 0,
                 split: str = "train") -> None:
        for name, value in (("num_categories", num_categories), ("seq_len", seq_len), ("size", size)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.task, self.num_categories, self.seq_len, self.size = task, num_categories, seq_len, size
        generator = torch.Generator().manual_seed(split_seed(seed, split))
        self.inputs = torch.randint(num_categories, (size, seq_len), generator=generator)  # (N, T)
        self.labels = make_labels(task, self.inputs)  # (N, T)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, idx):
        return self.inputs[idx], self.labels[idx]


def ReverseDataset(num_categories: int, seq_len: int, size: int, *, seed: int = 0,
                   split: str = "train") -> SequenceDataset:
    """The course's ``ReverseDataset(num_categories, seq_len, size)``: labels are the inputs reversed."""
    return SequenceDataset("reverse", num_categories, seq_len, size, seed=seed, split=split)


class BatchLoader(ResumableBatches):
    """Batches of an in-memory dataset, each gathered with one indexing operation, resumable.

    A ``torch.utils.data.DataLoader`` calls ``dataset[i]`` B times and collates the results; for
    tensors already in memory that per-example Python work costs more than a small model's
    training step. Here ``dataset[indices]`` returns the whole batch.

    Epoch e is shuffled by a generator seeded from (seed, e), so an epoch's order does not
    depend on what ran before, and a run resumed in the middle of an epoch continues with the
    batches it had not seen (``ResumableBatches``). Under ``torch.distributed`` each rank takes
    every world_size-th batch of the same shuffled order (an unshuffled loader is not split).

    Args:
        dataset: indexable with a tensor of indices (e.g. ``SequenceDataset``).
        batch_size: examples per batch.
        shuffle: a new order every epoch (else the dataset's order).
        seed: the run's seed.
        drop_last: drop a last, smaller batch.

    Examples:
        >>> loader = BatchLoader(SequenceDataset("copy", 5, 4, 50), 16, shuffle=True)
        >>> [len(x) for x, y in loader]
        [16, 16, 16, 2]
    """

    def __init__(self, dataset, batch_size: int, *, shuffle: bool, seed: int = 0,
                 drop_last: bool = False) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        super().__init__()
        self.dataset, self.batch_size, self.shuffle = dataset, batch_size, shuffle
        self.seed, self.drop_last = seed, drop_last
        self.examples = len(dataset)

    def _shard(self) -> tuple[int, int]:
        # training batches are split between ranks; evaluation sets are whole on every rank, so
        # that all ranks see the same validation metrics (and agree on early stopping)
        return shard() if self.shuffle else (0, 1)

    def _batches(self, epoch: int) -> list[torch.Tensor]:
        n = len(self.dataset)
        if self.shuffle:
            g = torch.Generator().manual_seed(split_seed(self.seed, "train") + 7 + epoch)
            order = torch.randperm(n, generator=g)
        else:
            order = torch.arange(n)
        batches = list(order.split(self.batch_size))
        if self.drop_last and batches and len(batches[-1]) < self.batch_size:
            batches.pop()
        rank, world = self._shard()
        return batches[rank::world][:len(self)]

    def __len__(self) -> int:
        """Batches per epoch on this rank: under DDP each rank has as many (the remainder of
        the batches over the ranks is left out, as DistributedSampler(drop_last=True) does),
        so that each step of every rank takes as many batches, epoch ends included."""
        full = self.all_batches()
        rank, world = self._shard()
        if full < world:  # fewer batches than ranks: one each where there is
            return len(range(rank, full, world))
        return self.kept(full) // world

    def all_batches(self) -> int:
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def epoch_batches(self, epoch: int, start: int):
        return (self.dataset[indices] for indices in self._batches(epoch)[start:])


def batch_loader(dataset, batch_size: int, *, shuffle: bool, seed: int = 0,
                 drop_last: bool = False) -> BatchLoader:
    """``BatchLoader(dataset, batch_size, shuffle=..., seed=..., drop_last=...)``."""
    return BatchLoader(dataset, batch_size, shuffle=shuffle, seed=seed, drop_last=drop_last)


def pad_to_length(task: str, tokens: list[int], seq_len: int, num_categories: int) -> tuple[list[int], int]:
    """Place a sequence shorter than ``seq_len`` so that a model trained on length ``seq_len``
    answers it in its first ``len(tokens)`` output positions.

    A model for reversal maps position i to seq_len-1-i, so the tokens go at the end (after
    zeros); for copy they go at the start; for sort at the start, followed by the largest
    symbol, which sorts after every token. Returns (the padded sequence, where it starts).
    """
    n = len(tokens)
    if n > seq_len:
        raise ValueError(f"{n} tokens is longer than seq_len ({seq_len})")
    pad = seq_len - n
    if task == "reverse":
        return [0] * pad + list(tokens), pad
    if task == "copy":
        return list(tokens) + [0] * pad, 0
    if task == "sort":
        return list(tokens) + [num_categories - 1] * pad, 0
    raise ValueError(f"task must be one of {SEQUENCE_TASKS}, got {task!r}")
