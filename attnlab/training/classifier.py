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

    def loss(self, batch) -> tuple[Tensor, dict[str, Tensor]]:
        *inputs, targets = batch
        logits = self.model(*inputs)  # (B, C) or (B, T)
        loss = F.cross_entropy(logits, targets)
        return loss, {"acc": (logits.argmax(-1) == targets).float().mean()}
