"""Training the per-element predictor (reverse, copy, sort): a class for every position.

Shapes: B batch, T positions, K classes.

The loss is the cross-entropy over every position; the accuracies are per token and per whole
sequence (every position right), as in the course.
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from .module import TaskModule

__all__ = ["ElementModule", "element_metrics"]


def element_metrics(logits: Tensor, labels: Tensor) -> dict[str, Tensor]:
    """Loss and accuracies of per-element predictions, logits (B, T, K) and labels (B, T)."""
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))  # (B·T, K)
    correct = logits.argmax(-1) == labels  # (B, T)
    return {"loss": loss, "acc": correct.float().mean(),
            "seq_acc": correct.all(-1).float().mean()}


class ElementModule(TaskModule):
    """``TaskModule`` for an ``ElementPredictor``: batches are (inputs (B, T), labels (B, T)).
    Logs ``acc`` and ``seq_acc`` (``val_acc``, ``val_seq_acc`` in validation)."""

    def loss(self, batch) -> tuple[Tensor, dict[str, Tensor]]:
        """Cross-entropy over every position, and the accuracies (``element_metrics``)."""
        inputs, labels = batch
        metrics = element_metrics(self.model(inputs), labels)
        return metrics.pop("loss"), metrics
