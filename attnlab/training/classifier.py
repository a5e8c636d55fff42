"""Training module for ``SequenceClassifier``: text classification and set anomaly detection.

Both tasks are one cross-entropy: over C classes for the per-sequence head (logits (B, C)), or
over the T positions of a set for the per-element head (scores (B, T), target = the position).
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from .module import TaskModule

__all__ = ["ClassifierModule"]


class ClassifierModule(TaskModule):
    """``TaskModule`` for batches ``(inputs, targets)`` or ``(inputs, mask, targets)``.

    ``inputs`` are token ids (B, T) (padding = the model's pad id) or features (B, T, F);
    ``mask`` (B, T) marks real elements; ``targets`` (B,) are classes or positions. Logs
    ``loss`` and ``acc`` (``val_acc`` during validation).

    ``split_metrics(logits (N, C), targets (N,)) -> {name: value}``, when given, measures the
    whole validation split at once (jets' ``val_auc``): the validation's logits are kept on
    the device until its end.
    """

    def __init__(self, model, cfg, max_steps: int, *,
                 split_metrics: Callable[[Tensor, Tensor], dict[str, float]] | None = None) -> None:
        super().__init__(model, cfg, max_steps)
        self.split_metrics = split_metrics
        self._kept: list[tuple[Tensor, Tensor]] = []
        # classify's --label-smoothing (an older run's: 0.0); anomaly and jets have none
        self.label_smoothing = (float(cfg.label_smoothing) if cfg.readable("label_smoothing")
                                else 0.0)

    def loss(self, batch) -> tuple[Tensor, dict[str, Tensor]]:
        *inputs, targets = batch
        logits = self.model(*inputs)  # (B, C) or (B, T)
        # smoothed in training only: val_loss is the plain cross-entropy, as in lm
        smoothing = self.label_smoothing if self.training else 0.0
        loss = F.cross_entropy(logits, targets, label_smoothing=smoothing)
        if self.split_metrics is not None and not self.training:
            self._kept.append((logits.detach(), targets))
        return loss, {"acc": (logits.argmax(-1) == targets).float().mean()}

    def validation_start(self) -> None:
        self._kept = []

    def validation_end(self) -> dict[str, float]:
        """``split_metrics`` of every validation batch's logits and targets (none without)."""
        if self.split_metrics is None or not self._kept:
            return {}
        logits, targets = (torch.cat(parts) for parts in zip(*self._kept))
        self._kept = []
        return self.split_metrics(logits.float(), targets)
