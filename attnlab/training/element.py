"""Training the per-element predictor (reverse, copy, sort): a class for every position.

Shapes: B batch, T positions, K classes.

The loss is the cross-entropy over every position; the accuracies are per token and per whole
sequence (every position right), as in the course.
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from .module import TaskModule

__all__ = ["ElementModule", "check_labels", "element_metrics"]


def check_labels(logits: Tensor, labels: Tensor) -> None:
    """Labels must be a class for every position, (B, T) for logits (B, T, K): shapes only,
    no value read. A label per set, as the course's anomaly batches have, was cross-entropy's
    "Expected input batch_size (160) to match target batch_size (16)", deep in ``fit``.

    Raises:
        ValueError: naming the shape given and the one expected.
    """
    if labels.shape != logits.shape[:-1]:
        hint = ("; a label per sequence or set (the course's anomaly task) needs a subclass "
                "with its own training_step, validation_step and test_step, as the course's "
                "AnomalyPredictor (docs/examples/02_reversal_and_sets.ipynb)"
                if labels.dim() == 1 else "")
        raise ValueError(f"labels must be (B, T) = {tuple(logits.shape[:-1])}, a class for "
                         f"every position, got shape {tuple(labels.shape)}{hint}")


def element_metrics(logits: Tensor, labels: Tensor) -> dict[str, Tensor]:
    """Loss and accuracies of per-element predictions, logits (B, T, K) and labels (B, T)
    (``check_labels``)."""
    check_labels(logits, labels)
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
