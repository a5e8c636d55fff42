"""Set anomaly detection on scikit-learn's bundled 8×8 digits (no download).

Each example is a set of ``set_size`` images: ``set_size - 1`` of one digit class and one of
another, in random order; the target is the position of the odd one out (UvA Deep Learning
Tutorial 6 builds the same task from CIFAR-100 features). Each image's features are its 64
pixel values scaled from 0..16 to 0..1.

The 1,797 images are split once, by class and with a fixed seed, into disjoint train /
validation / test pools (60 / 20 / 20 %), so no test set contains an image seen in training.
Validation and test sets are drawn with fixed seeds too (the same in every run, whatever
``--seed`` is); training sets are drawn afresh for every index, so training never runs out.

Shapes: N images, T set size, F = 64 features.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from torch.utils.data import Dataset, TensorDataset

from ..settings import set_size_fits

__all__ = ["DigitPool", "digit_pools", "DigitSets", "features_of", "check_image_indices",
           "digit_images", "digit_labels",
           "NUM_FEATURES", "POOL_SEED"]

NUM_FEATURES = 64
NUM_CLASSES = 10
POOL_SEED = 2024  # fixes the split of images into pools and the validation/test sets
FRACTIONS = (0.6, 0.2, 0.2)


@dataclass(frozen=True)
class DigitPool:
    """Images of one split: features (N, 64) in [0, 1], labels (N,), and their indices into
    ``sklearn.datasets.load_digits()``."""

    features: np.ndarray
    labels: np.ndarray
    indices: np.ndarray


@lru_cache(maxsize=1)
def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    data = load_digits()
    return (data.data / 16.0).astype(np.float32), data.target.astype(np.int64)  # (N, 64), (N,)


@lru_cache(maxsize=1)
def digit_pools() -> dict[str, DigitPool]:
    """The disjoint ``train``/``val``/``test`` pools, split within each class (fixed seed)."""
    x, y = _digits()
    rng = np.random.default_rng(POOL_SEED)
    parts: dict[str, list[np.ndarray]] = {"train": [], "val": [], "test": []}
    for c in range(NUM_CLASSES):
        idx = rng.permutation(np.flatnonzero(y == c))
        n_train = round(FRACTIONS[0] * len(idx))
        n_val = round(FRACTIONS[1] * len(idx))
        for name, chunk in zip(parts, np.split(idx, [n_train, n_train + n_val])):
            parts[name].append(chunk)
    pools = {}
    for name, chunks in parts.items():
        idx = np.sort(np.concatenate(chunks))
        pools[name] = DigitPool(x[idx], y[idx], idx)
    return pools


class DigitSets(Dataset):
    """Sets of digits with one anomaly; item i is always the same set (seeded by ``seed`` and i).

    Args:
        pool: the images to draw from (``digit_pools()["train"]`` ...).
        num_sets: number of sets (the dataset's length).
        set_size: elements T per set (T - 1 must not exceed the smallest class in the pool).
        seed: seed of the draws.

    Raises:
        ValueError: if set_size < 3 or a class of the pool has fewer than set_size - 1 images.

    Shape:
        item: (features (T, 64) float32, target: int position of the anomaly).

    Examples:
        >>> sets = DigitSets(digit_pools()["test"], 100, seed=1)
        >>> x, target = sets[0]; x.shape, 0 <= target < 10
        (torch.Size([10, 64]), True)
    """

    def __init__(self, pool: DigitPool, num_sets: int, *, set_size: int = 10, seed: int = 0) -> None:
        smallest = int(np.bincount(pool.labels, minlength=NUM_CLASSES).min())
        broken = set_size_fits(set_size, smallest, name="set_size", of="the pool")
        if broken:
            raise ValueError(broken)
        self.pool, self.num_sets, self.set_size, self.seed = pool, num_sets, set_size, seed
        self.by_class = [np.flatnonzero(pool.labels == c) for c in range(NUM_CLASSES)]

    def __len__(self) -> int:
        return self.num_sets

    def draw(self, i: int) -> tuple[np.ndarray, int]:
        """Row indices into the pool (T,) of set i, and the anomaly's position."""
        rng = np.random.default_rng([self.seed, i])
        normal = int(rng.integers(NUM_CLASSES))
        odd = (normal + int(rng.integers(1, NUM_CLASSES))) % NUM_CLASSES  # any other class
        rows = np.append(rng.choice(self.by_class[normal], self.set_size - 1, replace=False),
                         rng.choice(self.by_class[odd]))
        order = rng.permutation(self.set_size)
        return rows[order], int(np.argmax(order == self.set_size - 1))

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        rows, target = self.draw(i)
        return torch.from_numpy(self.pool.features[rows]), target

    def materialize(self) -> TensorDataset:
        """All sets as tensors (features (N, T, 64), targets (N,)): fast to iterate again."""
        xs, ts = zip(*(self[i] for i in range(len(self))))
        return TensorDataset(torch.stack(xs), torch.tensor(ts))

    def digit_indices(self, i: int) -> np.ndarray:
        """Indices into ``load_digits()`` of the images of set i (for figures)."""
        return self.pool.indices[self.draw(i)[0]]


def features_of(indices: list[int]) -> torch.Tensor:
    """Features (T, 64) of images given by their indices into ``load_digits()``.

    Raises:
        ValueError: if an index is outside [0, 1797).
    """
    check_image_indices(indices)
    return torch.from_numpy(_digits()[0][np.asarray(indices, dtype=np.int64)])


def check_image_indices(indices: list[int]) -> None:
    """``ValueError`` naming the first of ``indices`` that is no image of ``load_digits()``
    (outside [0, 1797)), without building the images' features."""
    count = len(_digits()[0])
    bad = [i for i in indices if not 0 <= i < count]
    if bad:
        raise ValueError(f"digit image index {bad[0]} is outside [0, {count})")


def digit_labels(indices) -> list[int]:
    """The digit (0-9) shown by each of the given ``load_digits()`` images."""
    return _digits()[1][np.asarray(indices, dtype=np.int64)].tolist()


def digit_images(indices) -> np.ndarray:
    """The 8×8 images (T, 8, 8) in [0, 1] of the given ``load_digits()`` indices."""
    x, _ = _digits()
    return x[np.asarray(indices, dtype=np.int64)].reshape(-1, 8, 8)
