"""Training module for ``SequenceClassifier``: text classification and set anomaly detection.

Both tasks are one cross-entropy: over C classes for the per-sequence head (logits (B, C)), or
over the T positions of a set for the per-element head (scores (B, T), target = the position).
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from .module import TaskModule

__all__ = ["ClassifierModule"]


class ClassifierModule(TaskModule):
    """``TaskModule`` for batches ``(inputs, targets)`` or ``(inputs, mask, targets)``.

    ``inputs`` are token ids (B, T) (padding = the model's pad id) or features (B, T, F);
    ``mask`` (B, T) marks real elements; ``targets`` (B,) are classes or positions. Logs
    ``loss`` and ``acc`` (``val_acc`` during validation).
    """

    def __init__(self, model, cfg, max_steps: int) -> None:
        super().__init__(model, cfg, max_steps)
        # classify's --label-smoothing (an older run's: 0.0); anomaly and jets have none
        self.label_smoothing = (float(cfg.label_smoothing) if cfg.readable("label_smoothing")
                                else 0.0)

    def loss(self, batch) -> tuple[Tensor, dict[str, Tensor]]:
        *inputs, targets = batch
        logits = self.model(*inputs)  # (B, C) or (B, T)
        # smoothed in training only: val_loss is the plain cross-entropy, as in lm
        smoothing = self.label_smoothing if self.training else 0.0
        loss = F.cross_entropy(logits, targets, label_smoothing=smoothing)
        return loss, {"acc": (logits.argmax(-1) == targets).float().mean()}
