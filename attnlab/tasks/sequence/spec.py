"""``attnlab train reverse|copy|sort``: per-element prediction on random symbol sequences — the
spec (flags, defaults, checks, memory); the runtime module (the part that imports torch) is
``attnlab.tasks.sequence.runtime``.

The course's headline experiment (UvA DL Tutorial 6): a one-layer, one-head Transformer learns
to reverse sequences of 16 digits; its attention map shows the anti-diagonal. Copy and sort are
the same set-up with other labels.

Imports neither torch nor Lightning: the CLI builds this task's parser and checks its flags at
start-up (``attnlab.tasks.base``).

Shapes: N sequences, T = seq_len, C = num_categories.

Examples:
    >>> task = TASKS["sort"]
    >>> task.defaults["num_layers"], task.defaults["early_stop"], task.budget(task.config())
    (2, False, 2500)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ...errors import UsageError
from ...models.configs import ElementPredictorConfig
from ...run_config import RunSettings
from ...settings import epoch_steps, setting
from ..base import Runtime, Task
from ..memory import step_activations, weight_bytes

__all__ = ["SequenceSettings", "SequenceTask", "TASKS"]


@dataclass
class SequenceSettings:
    """The flags of the per-element tasks (docs/cli.md, "Train"). The three splits are drawn
    from ``--seed`` (``attnlab.data.SequenceDataset``)."""

    num_categories: int = setting(10, help="symbols 0..N-1", low=2)
    seq_len: int = setting(16, help="sequence length", low=1)
    train_size: int = setting(50_000, help="training sequences", low=1)
    val_size: int = setting(1_000, help="validation sequences", low=1)
    test_size: int = setting(10_000, help="test sequences", low=1)
    early_stop: bool = setting(True, help="stop once validation sequence accuracy is 1.0 at "
                                          "three validations in a row (--max-steps is then an "
                                          "upper bound)")


class SequenceRunConfig(RunSettings[SequenceSettings, ElementPredictorConfig, None]):
    """The settings of a reverse, copy or sort run: ``cfg.model`` is the
    ``ElementPredictor``'s config."""


class SequenceTask(Task):
    """reverse, copy or sort ``--seq-len`` symbols out of ``--num-categories``."""

    run_config = SequenceRunConfig  # model flags: --input-dropout, ...
    val_metrics = ("val_loss", "val_acc", "val_seq_acc")  # training.element.element_metrics
    # the course's 1-layer, 1-head, 32-wide model (ElementPredictorConfig's defaults) with a
    # 20× higher peak lr and a short warm-up: docs/reverse.md, "The defaults, and why", has
    # the measurements
    overrides: dict[str, Any] = {
        "dim_feedforward": 64, "lr": 1e-2, "warmup": 20, "batch_size": 128, "max_steps": 600,
        "val_every": 10, "threads": 1,
    }

    def runtime(self) -> Runtime:
        """``runtime.py`` of this package (torch, the model, training), imported on first use."""
        from . import runtime

        return runtime

    def __init__(self, name: str, help: str, **overrides: Any) -> None:
        self.name, self.help = name, help
        self.overrides = {**SequenceTask.overrides, **overrides}

    def check_settings(self, cfg: dict[str, Any], *, typed_only: bool = False) -> Any:
        """The typed settings, and with them ``--seq-len`` at most the model's position table
        (``ElementPredictorConfig.max_len``): a longer one trained up to its first forward
        pass and ended in a traceback (and is named before the memory check, which refused
        --seq-len 100000000 for petabytes); then every other check."""
        super().check_settings(cfg, typed_only=True)
        positions = ElementPredictorConfig.max_len
        if cfg["seq_len"] > positions:
            raise UsageError(f"--seq-len must be at most {positions:,} (the positions of the "
                             f"model's sinusoidal table, max_len), got {cfg['seq_len']}")
        return None if typed_only else super().check_settings(cfg)

    def validate(self, cfg: dict[str, Any]) -> None:
        """``--val-every`` may not be unset here (the shared setting allows it): early stopping
        counts validations, and the run validates every ``--val-every`` steps."""
        if cfg.get("val_every") is None:
            raise UsageError(f"--val-every must be a positive integer for {self.name}, got None")

    def budget(self, cfg: RunSettings) -> int:
        """The step budget of the typed run config ``cfg``: --epochs × batches per epoch, or
        --max-steps."""
        if cfg.epochs:
            return epoch_steps(cfg, math.ceil(cfg.train_size / cfg.batch_size), cfg.epochs)
        return cfg.max_steps

    def memory_estimate(self, cfg: dict[str, Any]) -> list[tuple[str, float]]:
        """The three splits' int64 inputs and labels, held in memory; the input and output
        layers over the C symbols (C × D weights each, with their gradients and AdamW's
        moments) and one batch's one-hot inputs (B × T × C, int64), which a mistyped
        ``--num-categories 1000000000`` makes terabytes; and the attention maps of one
        sequence (every layer and head, T × T), which the figures draw; and one training
        step's activations (``step_activations``) over a batch of at most --train-size."""
        n = cfg["train_size"] + cfg["val_size"] + cfg["test_size"]
        T, C = cfg["seq_len"], cfg["num_categories"]
        B = min(cfg["batch_size"], cfg["train_size"])  # a batch holds at most the training set
        maps = cfg["num_layers"] * cfg["num_heads"] * T * T * 4
        return [*super().memory_estimate(cfg),
                (f"{n:,} sequences of --seq-len {T:,}", 2 * n * T * 8),
                (f"the input and output layers over --num-categories {C:,}",
                 weight_bytes(cfg, 2 * C * cfg["model_dim"])),
                (f"one batch of one-hot inputs ({B:,} x {T:,} x {C:,})", B * T * C * 8),
                (f"the attention maps of one sequence ({T:,} x {T:,} per head and layer)", maps),
                *step_activations(cfg, batch=B, length=T, length_flag="--seq-len", outputs=C,
                                  outputs_flag="--num-categories")]



TASKS = {
    "reverse": SequenceTask("reverse", "reverse a sequence of symbols (the course's experiment)"),
    "copy": SequenceTask("copy", "copy a sequence of symbols"),
    # sorting needs to compare every pair: one 1-head layer stalls at ~97% of sequences; two
    # 4-head layers do it, given the whole cosine schedule: early stopping on 1,000 validation
    # sequences ended at 0.9994 of the test set, 2,500 steps reach 1.0 (docs/reverse.md)
    "sort": SequenceTask("sort", "sort a sequence of symbols", model_dim=64, num_heads=4,
                         num_layers=2, dim_feedforward=128, lr=5e-3, max_steps=2500,
                         early_stop=False),
}
