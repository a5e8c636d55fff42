"""Graph attention (Veličković et al., 2018): attention over a node's neighbours.

Shapes: N nodes, F input features, H heads, C features per head, E edges.

Each head projects the nodes, h'_i = W h_i, and scores node i's neighbour j by

    e_ij = LeakyReLU(aᵀ [W h_i ‖ W h_j])  =  LeakyReLU(a_dstᵀ W h_i + a_srcᵀ W h_j),

then takes the softmax over i's neighbourhood (its neighbours and, by default, itself) and sums
the neighbours' projections with those weights. The heads are concatenated (H·C features) or
averaged (C features). The neighbourhood is a mask in attnlab's convention — True where node i
may attend to node j — so this is the same masked softmax as a Transformer's, with a different
score: a Transformer block whose mask is the adjacency attends over the graph, and with no mask
over the complete graph (docs/history.md, "Graph attention").

The graph is an adjacency (N, N), bool or 0/1 floats, ``adjacency[i, j]`` = j is a neighbour
of i (i attends to j); or an integer ``edge_index`` (2, E) of (source j, target i) pairs as in
PyTorch Geometric (messages flow from ``edge_index[0]`` to ``edge_index[1]``). The dtype tells
them apart. Repeated edges count once. An ``edge_index`` is turned into an adjacency, and its
node numbers checked, and a float adjacency's values checked (0 and 1 only), on every call: a
read of its values, a host synchronisation on a GPU and a graph break under torch.compile. To
train, convert it once (``adjacency_from_edges``, or ``adjacency.bool()``) and pass the bool
adjacency, which the forward pass only reads as a mask (no host synchronisation); ``GraphNet``
reads the graph it is given once a pass, not once a layer.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..settings import check_argument
from .arguments import BlockArguments, checked
from .masks import as_bool_mask
from .scores import attend
from .weight_init import init_with, xavier_zero

__all__ = ["GraphAttention", "adjacency_from_edges", "neighbourhood", "check_features"]


def check_features(x: Tensor, in_dim: int) -> None:
    """Node features as a layer or a network takes them: a float tensor (N, in_dim) or
    (B, N, in_dim). Its type and shape only, never its values (no host synchronisation): a
    wrong width was a matrix product's "mat1 and mat2 shapes cannot be multiplied", a vector
    an IndexError, integers a RuntimeError of casting.

    Raises:
        TypeError: ``x`` is not a tensor, or not floating point.
        ValueError: ``x`` has another shape, naming it and ``in_dim``.
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor of node features (N, {in_dim}), got "
                        f"{type(x).__name__}: pass torch.as_tensor(x, dtype=torch.float32)")
    if x.ndim not in (2, 3) or x.shape[-1] != in_dim:
        raise ValueError(f"x must be node features (N, in_dim) or (B, N, in_dim) with in_dim "
                         f"{in_dim}, got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"x must be float node features, got {x.dtype}: pass x.float()")


def neighbourhood(graph: Tensor, num_nodes: int, *, self_loops: bool,
                  name: str = "graph") -> Tensor:
    """The boolean (…, N, N) mask of a graph given as an ``edge_index`` (2, E) of integers or
    an adjacency (…, N, N), bool or 0/1 floats (``mask[i, j]``: j is a neighbour of i), each
    node its own neighbour once with ``self_loops`` (whatever the diagonal says). One reading
    for ``GraphAttention`` and ``GraphNet``'s mean aggregation; ``name``: the caller's
    parameter, named when it is no tensor."""
    if not isinstance(graph, Tensor):
        raise TypeError(f"{name} must be a tensor, an edge_index (2, E) of integers or an "
                        f"adjacency (N, N) of bools, got {type(graph).__name__}: pass "
                        f"torch.tensor(...)")
    if not graph.dtype.is_floating_point and graph.dtype != torch.bool:  # integer: edges
        square = graph.shape[-2:] == (num_nodes, num_nodes)
        if square and (graph.ndim > 2 or num_nodes != 2):  # (2, 2): edges, by dtype
            raise ValueError(f"an integer graph is an edge_index (2, E); an adjacency must "
                             f"be bool or 0/1 floats, got {graph.dtype} of shape "
                             f"{tuple(graph.shape)}: pass adjacency.bool()")
        mask = adjacency_from_edges(graph, num_nodes)
    else:
        if graph.shape[-2:] != (num_nodes, num_nodes):  # before its values are read
            # float edges, as a (2, E) made with torch.tensor of floats or .float(), were
            # refused as a float mask "got 2", which named no edge_index
            hint = (f"; an edge_index (2, E) must be integers: edge_index.long()"
                    if graph.ndim == 2 and graph.shape[0] == 2 else "")
            raise ValueError(f"adjacency must be (N, N) = ({num_nodes}, {num_nodes}), got "
                             f"shape {tuple(graph.shape)} of {graph.dtype}{hint}")
        mask = as_bool_mask(graph)
    if self_loops:
        mask = mask | torch.eye(num_nodes, dtype=torch.bool, device=mask.device)
    return mask


def adjacency_from_edges(edge_index: Tensor, num_nodes: int) -> Tensor:
    """The (N, N) boolean adjacency of ``edge_index`` (2, E): ``adj[target, source] = True``.

    Raises:
        ValueError: if ``edge_index`` is not (2, E) or names a node outside 0..N-1.
    """
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"edge_index must be (2, E), got shape {tuple(edge_index.shape)}")
    if edge_index.numel():
        low, high = (int(v) for v in torch.aminmax(edge_index))  # one read of the values
        if low < 0 or high >= num_nodes:  # the node outside, not both ends of the range
            raise ValueError(f"edge_index names node {low if low < 0 else high}, outside "
                             f"0..{num_nodes - 1} (the graph has {num_nodes} nodes)")
    adjacency = torch.zeros(num_nodes, num_nodes, dtype=torch.bool, device=edge_index.device)
    adjacency[edge_index[1], edge_index[0]] = True
    return adjacency


class GraphAttention(nn.Module):
    """One graph attention layer (GAT).

    Args:
        in_dim: input features per node F.
        out_dim: features per head C.
        num_heads: heads H.
        concat: concatenate the heads (H·C outputs) or average them (C outputs).
        negative_slope: LeakyReLU's slope for negative scores.
        dropout: dropout on the attention weights (training only).
        self_loops: every node also attends to itself (as in the paper).
        bias: add a learned bias to the output.

    Raises:
        ValueError: when built, naming the argument, for a width or a number of heads that
            is not a positive integer, or a dropout outside [0, 1); when called, for an ``x``
            that is not (N, in_dim) or (B, N, in_dim) (``check_features``), or a graph of
            another shape or naming a node outside 0..N-1.
        TypeError: when called, for an ``x`` or a graph that is not a tensor, or an ``x``
            of integers.

    Shape:
        x (N, F) or (B, N, F); graph: adjacency (N, N) / (B, N, N) or edge_index (2, E)
        -> (N, H·C) or (N, C) (with a leading B if given). With ``return_attention``, also the
        weights (H, N, N) (or (B, H, N, N)), zero outside each neighbourhood.

    A node with no neighbour (and no self-loop) gets zero weights and the bias as output:
    finite, never NaN.

    Examples:
        >>> gat = GraphAttention(4, 8, num_heads=2)
        >>> edges = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # a path 0 - 1 - 2
        >>> out, weights = gat(torch.randn(3, 4), edges, return_attention=True)
        >>> out.shape, weights.shape, (weights[:, 0, 2] == 0).all().item()
        (torch.Size([3, 16]), torch.Size([2, 3, 3]), True)
    """

    def __init__(self, in_dim: int, out_dim: int, num_heads: int = 1, *, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, self_loops: bool = True,
                 bias: bool = True) -> None:
        super().__init__()
        # widths of at least 1, checked here once (0 heads built a layer of 0 outputs)
        check_argument(BlockArguments, "input_dim", in_dim, shown="in_dim")
        check_argument(BlockArguments, "head_dim", out_dim, shown="out_dim")
        checked("num_heads", num_heads)
        checked("dropout", dropout)
        self.in_dim, self.out_dim, self.num_heads = in_dim, out_dim, num_heads
        self.concat, self.negative_slope, self.self_loops = concat, negative_slope, self_loops
        self.lin = nn.Linear(in_dim, num_heads * out_dim, bias=False)  # W, all heads
        self.att_src = nn.Parameter(torch.empty(num_heads, out_dim))  # a's half for j
        self.att_dst = nn.Parameter(torch.empty(num_heads, out_dim))  # a's half for i
        self.bias = nn.Parameter(torch.zeros(num_heads * out_dim if concat else out_dim)) \
            if bias else None
        self.dropout = nn.Dropout(dropout)
        init_with(self.lin, xavier_zero)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform a, zero bias (W's own ``reset_parameters`` is Xavier-uniform): the
        initialisation again, after ``to_empty`` (a meta-device build's memory)."""
        nn.init.xavier_uniform_(self.att_src)
        nn.init.xavier_uniform_(self.att_dst)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def neighbourhood(self, graph: Tensor, num_nodes: int) -> Tensor:
        """The boolean (…, N, N) mask of who attends to whom, self-loops included if asked."""
        return neighbourhood(graph, num_nodes, self_loops=self.self_loops)

    def forward(self, x: Tensor, graph: Tensor, *, return_attention: bool = False):
        check_features(x, self.in_dim)
        N, H, C = x.shape[-2], self.num_heads, self.out_dim
        mask = self.neighbourhood(graph, N).unsqueeze(-3)  # (…, 1, N, N)
        h = self.lin(x).unflatten(-1, (H, C)).transpose(-3, -2)  # (…, H, N, C)
        e_dst = (h * self.att_dst[:, None]).sum(-1)  # (…, H, N): aᵀ's half for node i
        e_src = (h * self.att_src[:, None]).sum(-1)  # (…, H, N): and for neighbour j
        scores = F.leaky_relu(e_dst[..., :, None] + e_src[..., None, :], self.negative_slope)
        scores, mask = torch.broadcast_tensors(scores, mask)  # (…, H, N, N)
        lead = scores.shape[:-2]
        # one x for a batch of graphs: the same features on each, (B, H, N, C)
        h = h.expand(*lead, N, C).reshape(-1, N, C)
        out, weights = attend(scores.reshape(-1, N, N), h, mask.reshape(-1, N, N))
        if self.dropout.p and self.training:
            weights = self.dropout(weights)
            out = weights @ h
        out, weights = out.reshape(*lead, N, C), weights.reshape(*lead, N, N)
        out = out.transpose(-3, -2).flatten(-2) if self.concat else out.mean(-3)  # (…, N, ·)
        if self.bias is not None:
            out = out + self.bias
        return (out, weights) if return_attention else out

    def extra_repr(self) -> str:
        return (f"{self.in_dim}, {self.out_dim}, num_heads={self.num_heads}, "
                f"concat={self.concat}, self_loops={self.self_loops}")
