"""Alternative attention score functions, for teaching.

Shapes: B batch, T_q queries, T_k keys, d_q / d_k their widths, d_v value width.

Dot-product attention scores a query against a key with q·k/√d_k. Two earlier forms:
    additive (Bahdanau et al., 2015):   score(q, k) = vᵀ tanh(W_q q + W_k k)
    bilinear / "general" (Luong et al., 2015): score(q, k) = qᵀ W k
Both are followed by the same masked softmax and weighted sum as dot-product attention.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .masks import check_mask

__all__ = ["AdditiveAttention", "BilinearAttention", "attend"]


def attend(scores: Tensor, v: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Masked softmax over keys, then the weighted sum of values.

    Rows that may attend to nothing get zero weights and zero output.

    Args:
        scores: (B, T_q, T_k).
        v: (B, T_k, d_v).
        mask: bool or 0/1, True = may attend, as for ``MultiheadAttention`` with one head:
            (T_q, T_k), (B, T_q, T_k) or 4-D (B, 1, T_q, T_k) such as ``padding_mask``'s.

    Returns:
        (values (B, T_q, d_v), attention (B, T_q, T_k)).

    Raises:
        ValueError: for a mask that does not broadcast to the scores (a 4-D one would
            broadcast the scores to 4-D instead, mixing the samples).
    """
    if mask is not None:
        B, T_q, T_k = scores.shape
        mask = check_mask(mask, B, 1, T_q, T_k)[:, 0]  # (B or 1, T_q or 1, T_k)
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    attention = F.softmax(scores, dim=-1)
    if mask is not None:
        attention = attention.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return attention @ v, attention


class AdditiveAttention(nn.Module):
    """Bahdanau's additive attention: score = vᵀ tanh(W_q q + W_k k).

    Args:
        query_dim: width of the queries d_q.
        key_dim: width of the keys d_k.
        hidden_dim: width of the tanh layer.

    Shape:
        q (B, T_q, d_q), k (B, T_k, d_k), v (B, T_k, d_v) -> ((B, T_q, d_v), (B, T_q, T_k)).

    Examples:
        >>> attn = AdditiveAttention(4, 4, 8)
        >>> values, weights = attn(torch.randn(1, 2, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 5))
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.w_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.w_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None):
        hidden = torch.tanh(self.w_q(q)[:, :, None] + self.w_k(k)[:, None])  # (B, T_q, T_k, h)
        scores = self.v(hidden).squeeze(-1)  # (B, T_q, T_k)
        return attend(scores, v, mask)


class BilinearAttention(nn.Module):
    """Luong's "general" (bilinear) attention: score = qᵀ W k.

    Args:
        query_dim: width of the queries d_q.
        key_dim: width of the keys d_k.

    Shape:
        q (B, T_q, d_q), k (B, T_k, d_k), v (B, T_k, d_v) -> ((B, T_q, d_v), (B, T_q, T_k)).

    Examples:
        >>> attn = BilinearAttention(4, 6)
        >>> values, weights = attn(torch.randn(1, 2, 4), torch.randn(1, 3, 6), torch.randn(1, 3, 5))
    """

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        self.w = nn.Linear(key_dim, query_dim, bias=False)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None):
        scores = q @ self.w(k).transpose(-2, -1)  # (B, T_q, T_k)
        return attend(scores, v, mask)
