"""``attnlab train anomaly``: find the odd digit in a set (set anomaly detection) — the spec
(flags, defaults, checks); the runtime module (the part that imports torch) is
``attnlab.tasks.anomaly.runtime``.

Sets of ``--set-size`` 8×8 digit images from scikit-learn's bundled digits (``set_size - 1`` of
one class, one of another, shuffled); a ``SequenceClassifier`` with no positional encoding (a
set has no order) and the per-element head scores every image, and a softmax over the set's
positions picks the anomaly. Validation and test sets are fixed (the same in every run) and drawn
from images never used in training. Metric: ``test_accuracy`` (the anomaly found).

Imports neither torch, numpy nor Lightning: the CLI builds this task's parser and checks its
flags at start-up (``attnlab.tasks.base``); even the check of ``--set-size`` against the data
reads the digits' labels with the standard library (``checks.smallest_pool_class``).

Shapes: T = set_size elements per set, 64 pixel features per element.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...errors import UsageError
from ...models.configs import SequenceClassifierConfig
from ...run_config import RunSettings
from ...settings import set_size_fits, setting
from ..base import Runtime, Task
from ..memory import step_activations
from .checks import smallest_pool_class

__all__ = ["AnomalySettings", "AnomalyTask", "TASKS"]

@dataclass
class AnomalySettings:
    """The flags of ``attnlab train anomaly`` (docs/classification.md)."""

    # No range here: validate says the whole one, [2, smallest class + 1], read from the data.
    set_size: int = setting(10, help="images per set")
    train_sets: int = setting(10_000, help="sets per epoch, with --epochs (every set is new)",
                              low=1)
    val_sets: int = setting(500, help="validation sets", low=1)
    test_sets: int = setting(1000, help="test sets", low=1)


class AnomalyRunConfig(RunSettings[AnomalySettings, SequenceClassifierConfig, None]):
    """The settings of an anomaly run: ``cfg.model`` is the set classifier's config."""


class AnomalyTask(Task):
    """Find the one image of another digit class in a set of ``--set-size`` images."""

    name = "anomaly"
    help = "set anomaly detection: find the odd digit among 10 (scikit-learn's digits)"
    run_config = AnomalyRunConfig
    val_metrics = ("val_loss", "val_acc")  # the odd image's position found
    model_flags = ("model_dim", "num_heads", "num_layers", "dim_feedforward", "dropout",
                   "norm_first", "input_dropout")
    # Chosen by measuring the test accuracy and the time of the whole command against a
    # narrower model and against no dropout (benchmarks/RESULTS.md, classify_speed and "Numbers
    # once quoted in the tasks' code"): without dropout the model fits its 1,078 training
    # images.
    overrides = {
        "max_steps": 1500, "model_dim": 128, "dim_feedforward": 256, "dropout": 0.1,
        "input_dropout": 0.1, "threads": 1,
    }

    def runtime(self) -> Runtime:
        """``runtime.py`` of this package (torch, the model, training), imported on first use."""
        from . import runtime

        return runtime

    def validate(self, cfg: dict[str, Any]) -> None:
        """``--set-size`` against the data: every pool must hold T - 1 images of each class."""
        broken = set_size_fits(cfg["set_size"], smallest_pool_class())
        if broken:
            raise UsageError(broken)

    def memory_estimate(self, cfg: dict[str, Any]) -> list[tuple[str, float]]:
        """The weights (default count); the --val-sets made at once, each element's 64 pixel
        features in float32, held twice while they are stacked (``DigitSets.materialize``);
        and one training step's activations over --batch-size new sets of --set-size
        (``step_activations``). (--train-sets only counts the sets of an epoch: each batch
        draws its own.)"""
        T, val = cfg["set_size"], cfg["val_sets"]
        return [*super().memory_estimate(cfg),
                (f"--val-sets {val:,} of --set-size {T:,}", 2 * val * T * 64 * 4),
                *step_activations(cfg, batch=cfg["batch_size"], length=T,
                                  length_flag="--set-size")]



TASKS = {"anomaly": AnomalyTask()}
