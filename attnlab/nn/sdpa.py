"""Scaled dot-product attention: the explicit reference path and the fused kernel's call.

Shapes: B batch, H heads, T_q query length, T_k key length, d_k key width, d_v value width.

    Attention(Q, K, V) = softmax(QKᵀ / √d_k + bias) V              (Vaswani et al., 2017, eq. 1)

The 1/√d_k keeps Var(q·k) ≈ 1 when q and k have unit-variance entries; unscaled it is d_k and the
softmax saturates. ``bias`` is an optional additive score term (ALiBi, a pairwise bias); it is
zero in the paper. Masks follow one convention (see ``masks.py``): True means "may attend".
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from .masks import attention_mask_as_bool, broadcasts_to, broadcasts_together

__all__ = ["scaled_dot_product", "attend"]


def _guard_empty_rows(mask: Tensor) -> tuple[Tensor, Tensor]:
    """Let query rows that may attend to nothing attend to everything; report which they are.

    Their output is zeroed afterwards. Attending to everything (instead of filling -inf) keeps
    the softmax and its gradient finite in every dtype; the zeroing gives zero weights.
    The guard is always applied: asking first whether any row is empty is a read of the mask,
    a host synchronisation on an accelerator and a graph break under torch.compile, and
    the same path on every device lets a CPU test vouch for the GPU's.
    """
    row_ok = mask.any(dim=-1, keepdim=True)  # (B?, H?, T_q, 1)
    return mask | ~row_ok, row_ok


def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> None:
    """q, k, v as the formula needs them (shapes and dtypes only, never values): a 1-D input
    failed with an IndexError, batch dimensions that do not broadcast and mixed dtypes deep
    inside the matmul, naming neither argument."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.ndim < 2:
            raise ValueError(f"{name} must be (..., T, d) with at least 2 dimensions, got shape "
                             f"{tuple(t.shape)}")
    if q.size(-1) != k.size(-1):
        raise ValueError(f"q has width {q.size(-1)} but k has width {k.size(-1)}")
    if k.size(-2) != v.size(-2):
        raise ValueError(f"k has {k.size(-2)} positions but v has {v.size(-2)}")
    if not broadcasts_together(q.shape[:-2], k.shape[:-2], v.shape[:-2]):
        raise ValueError(f"the batch dimensions of q {tuple(q.shape)}, k {tuple(k.shape)} and "
                         f"v {tuple(v.shape)} (all but the last two) do not broadcast together")
    # under autocast the matmuls cast for themselves
    if len({q.dtype, k.dtype, v.dtype}) > 1 and not torch.is_autocast_enabled(q.device.type):
        raise TypeError(f"q, k and v must have one dtype, got {q.dtype}, {k.dtype} and "
                        f"{v.dtype}")


def scaled_dot_product(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    dropout_p: float = 0.0,
    bias: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The explicit reference path: softmax(QKᵀ/√d_k)·V, returning the weights too.

    Args:
        q: queries (..., T_q, d_k).
        k: keys (..., T_k, d_k).
        v: values (..., T_k, d_v).
        mask: bool or 0/1, broadcastable to (..., T_q, T_k); True (1) = may attend. A query row
            that may attend to nothing gets zero weights and a zero output.
        dropout_p: dropout on the attention weights (the returned weights are before dropout).
        bias: float scores added before the softmax, broadcastable to (..., T_q, T_k) (ALiBi,
            a pairwise bias).

    Returns:
        (values (..., T_q, d_v), attention (..., T_q, T_k)).

    Raises:
        ValueError: if q, k or v has fewer than 2 dimensions, q and k differ in width, k and v
            in length, their batch dimensions do not broadcast together, or the mask does not
            broadcast to the scores (..., T_q, T_k) (it would broadcast them, mixing samples).
        TypeError: if q, k and v differ in dtype (outside autocast).

    Examples:
        >>> q = k = v = torch.eye(3)[None]
        >>> values, attention = scaled_dot_product(q, k, v)
    """
    _check_qkv(q, k, v)
    d_k = q.size(-1)
    attn_logits = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
    if bias is not None:
        attn_logits = attn_logits + bias.to(attn_logits.dtype)
    row_ok = None
    if mask is not None:
        mask = attention_mask_as_bool(mask)  # first: a list or a NumPy array is named there
        if not broadcasts_to(mask.shape, attn_logits.shape):
            raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to the "
                             f"scores (..., T_q, T_k) = {tuple(attn_logits.shape)}")
        mask, row_ok = _guard_empty_rows(mask)
        # the dtype's minimum, not a literal like -9e15 that overflows float16
        attn_logits = attn_logits.masked_fill(~mask, torch.finfo(attn_logits.dtype).min)
    attention = F.softmax(attn_logits, dim=-1)
    if row_ok is not None:
        attention = attention.masked_fill(~row_ok, 0.0)
    dropped = F.dropout(attention, dropout_p) if dropout_p > 0 else attention
    values = dropped @ v  # (..., T_q, d_v)
    return values, attention


def attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, *,
           is_causal: bool = False, bias: Tensor | None = None, dropout_p: float = 0.0,
           need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
    """Attention of heads on the fused kernel, or on the reference path when the weights are
    needed; query rows that may attend to nothing give zero weights and a zero output.

    Args:
        q, k, v: (B, H, T_q, hd), (B, H_kv, T_k, hd), (B, H_kv, T_k, hd); H_kv < H (dividing
            it) is grouped-query attention: query head i reads key/value head i // (H / H_kv).
        mask: bool, broadcastable to (B, H, T_q, T_k), True = may attend (already checked).
        is_causal: the kernel's own causal path (T_q == T_k, no mask given).
        bias: float scores added before the softmax, broadcastable to (B, H, T_q, T_k).
        dropout_p: dropout on the weights.
        need_weights: compute and return the weights (reference path).

    Returns:
        (values (B, H, T_q, hd), weights (B, H, T_q, T_k) or None).
    """
    row_ok = None
    if is_causal and (need_weights or bias is not None):
        # the explicit path and a float mask cannot use the kernel's causal flag; every row of
        # this mask sees its own key, so it needs no guard
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        is_causal = False
    elif mask is not None:
        mask, row_ok = _guard_empty_rows(mask)
    attention = None
    grouped = k.shape[-3] != q.shape[-3]
    if need_weights:
        if grouped:  # each key/value head repeated for the query heads that read it
            r = q.shape[-3] // k.shape[-3]
            k, v = k.repeat_interleave(r, dim=-3), v.repeat_interleave(r, dim=-3)
        values, attention = scaled_dot_product(q, k, v, mask, dropout_p=dropout_p, bias=bias)
    else:
        if bias is not None:  # one float mask: the bias where allowed, -inf where not
            bias = bias.to(q.dtype)
            mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
        values = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p,
                                                is_causal=is_causal,
                                                enable_gqa=grouped)  # (B, H, T_q, hd)
    if row_ok is not None:
        values = values.masked_fill(~row_ok, 0.0)
        if attention is not None:
            attention = attention.masked_fill(~row_ok, 0.0)
    return values, attention
