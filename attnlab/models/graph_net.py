"""``GraphNet``: classify the nodes of one graph, with graph attention or without it.

Shapes: N nodes, F input features, D hidden features per head, H heads, C classes.

    gat:  h ← ELU(GAT_H(h))  (heads concatenated) ...,  logits = GAT_1(h)
    mean: h ← ELU(W · mean_{j ∈ N(i) ∪ {i}} h_j) ...,    logits = W_out · mean(...)
    mlp:  h ← ELU(W h) ...,                              logits = W_out h   (edges ignored)

``gat`` is Veličković et al. (2018)'s network; ``mean`` weighs every neighbour the same (the
same layers with the attention taken out); ``mlp`` sees each node alone, so it shows what the
features alone are worth.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..nn import GraphAttention
from ..nn.graph import check_features, neighbourhood
from .configs import GraphNetConfig

__all__ = ["GraphNet"]


class _MeanNeighbours(nn.Module):
    """W · (the mean of the features of i and its neighbours): aggregation without attention."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.lin = nn.Linear(in_dim, out_dim)

    def forward(self, x: Tensor, adjacency: Tensor) -> Tensor:
        # N(i) ∪ {i}: a self-loop the adjacency already has counts once, as in GraphAttention
        a = neighbourhood(adjacency, x.shape[-2], self_loops=True,
                          name="adjacency").to(x.dtype)  # (…, N, N)
        return self.lin((a @ x) / a.sum(-1, keepdim=True))


class GraphNet(nn.Module):
    """A node classifier: ``num_layers`` layers of the ``kind`` chosen.

    ``GraphNet(config)`` builds the model a ``GraphNetConfig`` describes (``model.config`` is
    that object); the keyword form ``GraphNet(in_dim, num_classes, **fields)`` builds the config
    once from its arguments (a name that is no field is a ``TypeError``) and then the same
    model.

    Args:
        in_dim: node features F.
        num_classes: classes C.
        kind: "gat", "mean" or "mlp".
        model_dim: hidden features D (per head for gat).
        num_heads: heads of gat's hidden layers (its output layer has one).
        num_layers: layers, the output layer included.
        dropout: on the input of every layer and on gat's attention weights.

    Shape:
        x (N, F), adjacency (N, N) bool or 0/1 (``adjacency[i, j]``: j is a neighbour of i;
        a node is always its own neighbour, once, whether or not the diagonal says so)
        -> logits (N, C).

    Examples:
        >>> model = GraphNet(5, 3, kind="gat", model_dim=4, num_heads=2)
        >>> model(torch.randn(6, 5), torch.rand(6, 6) > 0.5).shape
        torch.Size([6, 3])
    """

    def __init__(self, config: GraphNetConfig | int | None = None, /, *args: Any,
                 **fields: Any) -> None:
        super().__init__()
        args = args if config is None else (config, *args)
        config = GraphNetConfig.of_arguments("GraphNet", args, fields, ("in_dim", "num_classes"))
        config.require("GraphNet", "in_dim", "num_classes")
        self.config = config
        kind, heads, layers = config.kind, config.num_heads, config.num_layers
        hidden = config.model_dim * (heads if kind == "gat" else 1)
        widths = [config.in_dim] + [hidden] * (layers - 1)
        self.layers = nn.ModuleList()
        for i, width in enumerate(widths):
            last = i == layers - 1
            out = config.num_classes if last else config.model_dim
            if kind == "gat":
                self.layers.append(GraphAttention(width, out, 1 if last else heads,
                                                  dropout=config.dropout))
            elif kind == "mean":
                self.layers.append(_MeanNeighbours(width, out))
            else:  # "mlp", the config's last choice
                self.layers.append(nn.Linear(width, out))
        self.kind, self.dropout = kind, nn.Dropout(config.dropout)

    @classmethod
    def from_config(cls, config: GraphNetConfig) -> "GraphNet":
        """The model a ``GraphNetConfig`` describes (randomly initialised): ``GraphNet(config)``."""
        return cls(config)

    def neighbourhood(self, x: Tensor, adjacency: Tensor) -> Tensor:
        """The graph as every layer reads it, a bool mask with self-loops, made once a pass:
        a float adjacency's values are checked and an ``edge_index`` converted here, not again
        by each layer (each a host read: a synchronisation on a GPU). ``x`` is checked here
        too, against ``in_dim``, for every kind (a linear layer names neither)."""
        check_features(x, self.config.in_dim)
        if self.kind == "mlp":
            return adjacency
        return neighbourhood(adjacency, x.shape[-2], self_loops=True, name="adjacency")

    def forward(self, x: Tensor, adjacency: Tensor) -> Tensor:
        adjacency = self.neighbourhood(x, adjacency)
        for i, layer in enumerate(self.layers):
            x = self.dropout(x)
            x = layer(x) if self.kind == "mlp" else layer(x, adjacency)
            if i < len(self.layers) - 1:
                x = F.elu(x)
        return x  # (N, C)

    @torch.no_grad()
    def get_attention_maps(self, x: Tensor, adjacency: Tensor) -> list[Tensor]:
        """Every graph attention layer's weights, L × (H, N, N) (gat only)."""
        if self.kind != "gat":
            raise ValueError(f"a {self.kind} network has no attention")
        adjacency, maps = self.neighbourhood(x, adjacency), []
        for i, layer in enumerate(self.layers):
            out, weights = layer(x, adjacency, return_attention=True)
            maps.append(weights)
            x = F.elu(out) if i < len(self.layers) - 1 else out
        return maps
