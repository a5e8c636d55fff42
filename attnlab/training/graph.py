"""Training module for ``GraphNet``: full-batch node classification. A batch is the whole
graph, ``(features (N, F), adjacency (N, N), targets (N,))``, with target -100 on the nodes the
loss must not count (the others of the split)."""
from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from .module import TaskModule

__all__ = ["GraphModule"]


class GraphModule(TaskModule):
    """Cross-entropy and accuracy over the nodes whose target is not -100."""

    def step(self, batch) -> tuple[Tensor, dict[str, Tensor]]:
        x, adjacency, targets = batch
        logits = self.model(x, adjacency)  # (N, C)
        counted = targets != -100
        loss = F.cross_entropy(logits[counted], targets[counted])
        acc = (logits[counted].argmax(-1) == targets[counted]).float().mean()
        return loss, {"acc": acc}
