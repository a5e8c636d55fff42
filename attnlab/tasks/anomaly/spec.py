"""``attnlab train anomaly``: find the odd digit in a set (set anomaly detection) — the spec
(flags, defaults, checks); the heavy half is ``attnlab.tasks.anomaly.runtime``.

Sets of ``--set-size`` 8×8 digit images from scikit-learn's bundled digits (``set_size - 1`` of
one class, one of another, shuffled); a ``SequenceClassifier`` with no positional encoding (a
set has no order) and the per-element head scores every image, and a softmax over the set's
positions picks the anomaly. Validation and test sets are fixed (the same in every run) and drawn
from images never used in training. Metric: ``test_accuracy`` (the anomaly found).

Imports neither torch, numpy nor Lightning: the CLI builds this task's parser and checks its
flags at start-up (``attnlab.tasks.base``); even the check of ``--set-size`` against the data
reads the digits' labels with the standard library (``smallest_pool_class``).

Shapes: T = set_size elements per set, 64 pixel features per element.
"""
from __future__ import annotations

import gzip
from collections import Counter
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ...models.configs import SequenceClassifierConfig
from ...settings import defaults, setting
from ..base import Runtime, Task, model_defaults

__all__ = ["AnomalySettings", "AnomalyTask", "TASKS", "smallest_pool_class"]

# Of each digit class, the shares of the train and validation pools (the rest is test):
# attnlab.data.digits_sets.FRACTIONS, repeated here to stay free of numpy; the example of
# smallest_pool_class checks that both give the same pools.
_FRACTIONS = (0.6, 0.2)


def _digit_labels() -> list[str]:
    """The digit of each of the 1,797 images, from the file ``sklearn.datasets.load_digits``
    reads (64 pixels and the digit per line), found without importing scikit-learn."""
    sklearn = Path(find_spec("sklearn").origin).parent
    with gzip.open(sklearn / "datasets" / "data" / "digits.csv.gz", "rt", encoding="ascii") as f:
        return [line.rsplit(",", 1)[-1].strip() for line in f if line.strip()]


def smallest_pool_class() -> int:
    """The images of the smallest digit class in any of the train / validation / test pools
    (``attnlab.data.digits_sets.digit_pools``): a set of T images needs T - 1 of one class, so
    ``--set-size`` may be at most one more. Each class of n images gives round(0.6·n) to train,
    round(0.2·n) to validation and the rest to test.

    Examples:
        >>> smallest_pool_class()
        35
        >>> import numpy as np; from attnlab.data.digits_sets import digit_pools
        >>> min(int(np.bincount(p.labels, minlength=10).min()) for p in digit_pools().values())
        35
    """
    sizes = []
    for n in Counter(_digit_labels()).values():
        train, val = (round(share * n) for share in _FRACTIONS)
        sizes += [train, val, n - train - val]
    return min(sizes)


@dataclass
class AnomalySettings:
    """The flags of ``attnlab train anomaly`` (docs/classification.md)."""

    # No range here: validate says the whole one, [2, smallest class + 1], read from the data.
    set_size: int = setting(10, help="images per set")
    train_sets: int = setting(10_000, help="sets per epoch, with --epochs (every set is new)",
                              low=1)
    val_sets: int = setting(500, help="validation sets", low=1)
    test_sets: int = setting(1000, help="test sets", low=1)


class AnomalyTask(Task):
    """Find the one image of another digit class in a set of ``--set-size`` images."""

    name = "anomaly"
    help = "set anomaly detection: find the odd digit among 10 (scikit-learn's digits)"
    model_config = SequenceClassifierConfig
    model_flags = ("input_dropout",)
    settings = AnomalySettings
    # Chosen by measuring the test accuracy and the time of the whole command against a
    # narrower model and against no dropout (benchmarks/RESULTS.md, classify_speed and "Numbers
    # once quoted in the tasks' code"): without dropout the model fits its 1,078 training
    # images.
    defaults = {
        **model_defaults(SequenceClassifierConfig, ("input_dropout",)),
        **defaults(AnomalySettings),
        "max_steps": 1500, "batch_size": 64, "lr": 1e-3, "warmup": 100, "model_dim": 128,
        "num_heads": 4, "num_layers": 2, "dim_feedforward": 256, "dropout": 0.1,
        "input_dropout": 0.1, "threads": 1,
    }

    def runtime_module(self) -> Runtime:
        """``runtime.py`` of this package (torch, the model, training), imported on first use."""
        from . import runtime

        return runtime

    def validate(self, cfg: dict[str, Any]) -> None:
        """``--set-size`` against the data: every pool must hold T - 1 images of each class."""
        smallest = smallest_pool_class()
        if not 2 <= cfg["set_size"] <= smallest + 1:
            raise UsageError(f"--set-size must be in [2, {smallest + 1}] (the smallest digit "
                             f"class of a split has {smallest} images), got {cfg['set_size']}")



TASKS = {"anomaly": AnomalyTask()}
