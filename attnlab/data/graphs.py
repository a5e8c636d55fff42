"""Graphs for node classification, made here (no download): Zachary's karate club, shipped
with networkx, and a stochastic block model with noisy node features.

Shapes: N nodes, F features, C classes. Each graph is ``(features (N, F), adjacency (N, N)
bool, labels (N,), class names, node names)``; the adjacency is symmetric, without self-loops.
"""
from __future__ import annotations

import torch
from torch import Tensor

from ..settings import nodes_leave_a_test_node

__all__ = ["karate", "block_model", "split_nodes"]


def _adjacency(graph, n: int) -> Tensor:
    adjacency = torch.zeros(n, n, dtype=torch.bool)
    for a, b in graph.edges:
        if a != b:
            adjacency[a, b] = adjacency[b, a] = True
    return adjacency


def karate():
    """Zachary's karate club (34 members, 78 friendships): which of the two clubs each member
    joined after the split. Features: one-hot identities (a node's features say nothing of its
    club, so only the edges can).

    Examples:
        >>> x, adjacency, labels, classes, names = karate()
        >>> x.shape, int(adjacency.sum()) // 2, classes
        (torch.Size([34, 34]), 78, ['Mr. Hi', 'Officer'])
    """
    import networkx as nx

    graph = nx.karate_club_graph()
    classes = ["Mr. Hi", "Officer"]
    labels = torch.tensor([classes.index(graph.nodes[i]["club"]) for i in range(34)])
    return torch.eye(34), _adjacency(graph, 34), labels, classes, [str(i) for i in range(34)]


def block_model(nodes: int = 300, communities: int = 3, p_in: float = 0.1, p_out: float = 0.01,
                noise: float = 1.0, seed: int = 0):
    """A stochastic block model: ``communities`` groups of (nearly) equal size; two nodes of a
    group are linked with probability ``p_in``, of different groups with ``p_out``. Features:
    the one-hot group plus Gaussian noise of standard deviation ``noise``, so a node's own
    features are an unreliable hint and its neighbours' a better one.

    Examples:
        >>> x, adjacency, labels, classes, names = block_model(30, 3, seed=1)
        >>> x.shape, labels.bincount().tolist(), classes
        (torch.Size([30, 3]), [10, 10, 10], ['group 0', 'group 1', 'group 2'])
    """
    import networkx as nx

    sizes = [nodes // communities + (i < nodes % communities) for i in range(communities)]
    probs = [[p_in if a == b else p_out for b in range(communities)] for a in range(communities)]
    graph = nx.stochastic_block_model(sizes, probs, seed=seed)
    labels = torch.tensor([graph.nodes[i]["block"] for i in range(nodes)])
    g = torch.Generator().manual_seed(seed)
    x = torch.nn.functional.one_hot(labels, communities).float()
    x = x + noise * torch.randn(x.shape, generator=g)
    return x, _adjacency(graph, nodes), labels, [f"group {i}" for i in range(communities)], \
        [str(i) for i in range(nodes)]


def split_nodes(labels: Tensor, train_per_class: int, val_per_class: int,
                seed: int = 0) -> dict[str, Tensor]:
    """Boolean masks "train", "val", "test" over the nodes: ``train_per_class`` and
    ``val_per_class`` nodes of every class (drawn with ``seed``), the rest to test.

    Raises:
        ValueError: if a class has too few nodes for the train and validation nodes and one to
            test.
    """
    g = torch.Generator().manual_seed(seed)
    masks = {name: torch.zeros(len(labels), dtype=torch.bool) for name in ("train", "val", "test")}
    for c in labels.unique().tolist():
        members = (labels == c).nonzero().squeeze(1)
        broken = nodes_leave_a_test_node(train_per_class, val_per_class, len(members),
                                         why=f"class {c} has {len(members)} nodes",
                                         names=("train_per_class", "val_per_class"))
        if broken:
            raise ValueError(broken)
        members = members[torch.randperm(len(members), generator=g)]
        masks["train"][members[:train_per_class]] = True
        masks["val"][members[train_per_class:train_per_class + val_per_class]] = True
    masks["test"] = ~(masks["train"] | masks["val"])
    return masks
