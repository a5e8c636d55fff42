"""Training module for ``SequenceClassifier``: text classification and set anomaly detection.

One loss per kind of target (classify's ``--multi-label`` and ``--regression``; anomaly and jets
train the first):

    single       cross-entropy over C classes of the per-sequence head (logits (B, C)), or over
                 the T positions of a set for the per-element head (scores (B, T), target = the
                 position); --class-weights weigh the classes, --label-smoothing smooths
    multi        binary cross-entropy of each of C logits (a sigmoid each), targets (B, C) 0/1
    regression   mean squared error of the one output (B, 1), targets (B,)

A validation's scores that are no mean of per-batch numbers (a macro F1, R², an AUC) need every
prediction first: between ``validation_start`` and ``validation_end`` the module keeps each
batch's outputs and targets on the device, and ``validation_end`` scores them together with the
task's ``scores`` function (nothing is read on the host inside a step).
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from .module import TaskModule
from .totals import ratio

__all__ = ["ClassifierModule", "OBJECTIVES"]

OBJECTIVES = ("single", "multi", "regression")


class ClassifierModule(TaskModule):
    """``TaskModule`` for batches ``(inputs, targets)`` or ``(inputs, mask, targets)``.

    ``inputs`` are token ids (B, T) (padding = the model's pad id) or features (B, T, F);
    ``mask`` (B, T) marks real elements; ``targets`` are classes or positions (B,), label sets
    (B, C) or numbers (B,). Logs ``loss`` and, for one class per row, ``acc`` (``val_acc``
    during validation), and at each validation what ``scores`` gives, as ``val_NAME``.

    Args:
        model, cfg, max_steps: as ``TaskModule``'s.
        objective: "single", "multi" or "regression" (see the module doc).
        class_weight: (C,) weights of the classes in the cross-entropy (training and
            validation: ``val_loss`` is the loss the run minimises, Σ w_y·CE / Σ w_y over the
            whole validation split), or None.
        scores: ``(outputs (N, C), targets) -> {name: number}`` of a whole validation
            (classify's macro F1, jets' AUC), or None.
    """

    def __init__(self, model, cfg, max_steps: int, *, objective: str = "single",
                 class_weight: Tensor | None = None,
                 scores: Callable[[Tensor, Tensor], dict[str, float]] | None = None) -> None:
        super().__init__(model, cfg, max_steps)
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
        self.objective, self.scores = objective, scores
        # classify's --label-smoothing (an older run's: 0.0); anomaly and jets have none
        self.label_smoothing = (float(cfg.label_smoothing) if cfg.readable("label_smoothing")
                                else 0.0)
        # a buffer, so that it moves to the run's device; not saved: config.yaml records it
        self.register_buffer("class_weight", class_weight, persistent=False)
        self._seen: list[tuple[Tensor, Tensor]] | None = None

    def targets(self, batch) -> Tensor | int:
        """With --class-weights, the sum of the rows' class weights (the weighted loss's mean
        divides by it); else the rows. Summed in the weights' dtype, at least float32: a
        --precision 64 run's float64 (float32's sum would cost the accumulated step its
        float64 digits), a bf16 run's in float32."""
        if self.objective != "single" or self.class_weight is None:
            return super().targets(batch)
        wide = torch.promote_types(self.class_weight.dtype, torch.float32)
        return self.class_weight[batch[-1]].to(wide).sum()

    def loss(self, batch) -> tuple[Tensor, dict[str, Tensor]]:
        *inputs, targets = batch
        logits = self.model(*inputs)  # (B, C) or (B, T)
        if self._seen is not None and not self.training:
            self._seen.append((logits.detach(), targets))
        if self.objective == "regression":
            return F.mse_loss(logits[:, 0].float(), targets.float()), {}
        if self.objective == "multi":
            return F.binary_cross_entropy_with_logits(logits.float(), targets.float()), {}
        weight = None if self.class_weight is None else self.class_weight.to(logits.dtype)
        acc = (logits.argmax(-1) == targets).float().mean()
        if self.training:
            return F.cross_entropy(logits, targets, weight=weight,
                                   label_smoothing=self.label_smoothing), {"acc": acc}
        # not smoothed: val_loss is the plain cross-entropy, as in lm; with --class-weights
        # the weighted loss of the whole split, Σ w_y·CE / Σ w_y (a batch's own mean divides
        # by its own Σ w_y, so a mean of those would depend on how the split is cut)
        # in float32, weights and all: bf16 would round a weight of 0.3 to 0.3008 in the sum
        # but not in the count; float32 counts whole rows exactly to 2**24
        weight = None if weight is None else self.class_weight.float()
        summed = F.cross_entropy(logits.float(), targets, weight=weight, reduction="sum")
        weights = (torch.ones(len(targets), device=targets.device) if weight is None
                   else weight[targets])  # (B,)
        return summed / weights.sum(), {"acc": acc, **ratio("loss", summed, weights.sum())}

    def validation_start(self) -> None:
        if self.scores is not None:
            self._seen = []

    def validation_end(self) -> dict[str, float]:
        """``scores`` of every validation batch's outputs and targets, as ``val_NAME``."""
        seen, self._seen = self._seen, None
        if not seen:
            return {}
        outputs, targets = (torch.cat(parts) for parts in zip(*seen))
        found = self.scores(outputs.float().cpu(), targets.cpu())
        return {f"val_{name}": float(value) for name, value in found.items()}
