"""Training module for ``GraphNet``: full-batch node classification. A batch is the whole
graph, ``(features (N, F), adjacency (N, N), targets (N,))``, with target -100 on the nodes the
loss must not count (the others of the split)."""
from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from .module import TaskModule

__all__ = ["GraphModule", "graph_step"]


def graph_step(model, batch) -> tuple[Tensor, dict[str, Tensor]]:
    """Cross-entropy and accuracy of ``model`` over the nodes whose target is not -100.

    No boolean indexing (``logits[targets != -100]``): its size is a value the host would
    wait for, and it splits a compiled graph; -100 is cross-entropy's ``ignore_index``, and the
    accuracy counts the same nodes."""
    x, adjacency, targets = batch
    logits = model(x, adjacency)  # (N, C)
    loss = F.cross_entropy(logits, targets, ignore_index=-100)
    counted = targets != -100  # (N,)
    right = (logits.argmax(-1) == targets) & counted
    return loss, {"acc": right.sum() / counted.sum().clamp(min=1)}


class GraphModule(TaskModule):
    """The graph task's ``TaskModule``: its loss is ``graph_step``'s."""

    def loss(self, batch) -> tuple[Tensor, dict[str, Tensor]]:
        return graph_step(self.model, batch)
