"""Scaled dot-product attention and multi-head attention.

Shapes: B batch, H heads, T_q query length, T_k key length (S for an encoder memory),
D model width, E = embed_dim = H·hd, hd head width.

    Attention(Q, K, V) = softmax(QKᵀ / √d_k) V                      (Vaswani et al., 2017, eq. 1)
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) Wᴼ,
    head_i = Attention(Q W_iQ, K W_iK, V W_iV)

The 1/√d_k keeps Var(q·k) ≈ 1 when q and k have unit-variance entries; unscaled it is d_k and the
softmax saturates. Masks follow one convention (see ``masks.py``): True means "may attend".
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .cache import KVCache
from .masks import as_bool_mask, check_mask
from .positional import RotaryEmbedding

__all__ = ["scaled_dot_product", "MultiheadAttention"]


def _guard_empty_rows(mask: Tensor) -> tuple[Tensor, Tensor | None]:
    """Let query rows that may attend to nothing attend to everything; report which they are.

    Their output is zeroed afterwards. Attending to everything (instead of filling -inf) keeps
    the softmax and its gradient finite in every dtype; the zeroing gives zero weights.
    """
    row_ok = mask.any(dim=-1, keepdim=True)  # (B?, H?, T_q, 1)
    # Usually no row is empty (padding masks keep >= 1 key) and the zeroing is a wasted pass over
    # the output, ~10% of a padded training step on CPU (benchmarks/encoder_speed.py). Checking
    # is free on CPU; on an accelerator it would stall the stream, and under torch.compile it
    # would break the graph, so there the guard is always applied.
    if mask.device.type == "cpu" and not torch.compiler.is_compiling() and bool(row_ok.all()):
        return mask, None
    return mask | ~row_ok, row_ok


def scaled_dot_product(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    dropout_p: float = 0.0,
) -> tuple[Tensor, Tensor]:
    """The explicit reference path: softmax(QKᵀ/√d_k)·V, returning the weights too.

    Args:
        q: queries (..., T_q, d_k).
        k: keys (..., T_k, d_k).
        v: values (..., T_k, d_v).
        mask: bool or 0/1, broadcastable to (..., T_q, T_k); True (1) = may attend. A query row
            that may attend to nothing gets zero weights and a zero output.
        dropout_p: dropout on the attention weights (the returned weights are before dropout).

    Returns:
        (values (..., T_q, d_v), attention (..., T_q, T_k)).

    Raises:
        ValueError: if q and k differ in width or k and v in length.

    Example:
        >>> q = k = v = torch.eye(3)[None]
        >>> values, attention = scaled_dot_product(q, k, v)
    """
    if q.size(-1) != k.size(-1):
        raise ValueError(f"q has width {q.size(-1)} but k has width {k.size(-1)}")
    if k.size(-2) != v.size(-2):
        raise ValueError(f"k has {k.size(-2)} positions but v has {v.size(-2)}")
    d_k = q.size(-1)
    attn_logits = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
    row_ok = None
    if mask is not None:
        mask, row_ok = _guard_empty_rows(as_bool_mask(mask))
        # the dtype's minimum, not a literal like -9e15 that overflows float16
        attn_logits = attn_logits.masked_fill(~mask, torch.finfo(attn_logits.dtype).min)
    attention = F.softmax(attn_logits, dim=-1)
    if row_ok is not None:
        attention = attention.masked_fill(~row_ok, 0.0)
    dropped = F.dropout(attention, dropout_p) if dropout_p > 0 else attention
    values = dropped @ v  # (..., T_q, d_v)
    return values, attention


class MultiheadAttention(nn.Module):
    """Multi-head attention, self or cross, with the course's parameter names.

    Self-attention uses one stacked projection ``qkv_proj`` (laid out per head as in the
    course: for head h, rows [q_h; k_h; v_h]). Cross-attention (``kv_dim`` given, or ``cross=True``)
    has ``q_proj`` for the queries and ``kv_proj`` for keys and values from another sequence of
    possibly different length and width. ``o_proj`` maps embed_dim back to input_dim. Weights are
    Xavier-uniform and biases zero, so a block has 4·d² weights and 4·d biases when
    input_dim = embed_dim = d.

    Without ``return_attention`` the forward pass calls
    ``torch.nn.functional.scaled_dot_product_attention`` (fused kernels that never build the
    T_q×T_k matrix); with it, the reference ``scaled_dot_product``. Both give the same output.

    Args:
        input_dim: width of the query input x (and of the output).
        embed_dim: total width E of all heads; must be divisible by num_heads.
        num_heads: number of heads H.
        dropout: dropout on attention weights during training.
        bias: whether the projections have biases.
        kv_dim: width of the key/value sequence for cross-attention (implies ``cross``).
        cross: build a cross-attention module (keys/values from ``memory``).
        rotary: apply rotary position embeddings to queries and keys (self-attention only).
        max_len: longest sequence for rotary embeddings.
        rope_base: rotary frequency base.

    Raises:
        ValueError: if embed_dim is not divisible by num_heads, or widths are not positive.

    Shape:
        x: (B, T_q, input_dim); memory: (B, S, kv_dim); mask broadcastable to (B, H, T_q, T_k);
        output (B, T_q, input_dim); attention (B, H, T_q, T_k).

    Example:
        >>> mha = MultiheadAttention(16, 16, 4)
        >>> o, attention = mha(torch.randn(2, 5, 16), return_attention=True)
    """

    def __init__(
        self,
        input_dim: int,
        embed_dim: int,
        num_heads: int,
        *,
        dropout: float = 0.0,
        bias: bool = True,
        kv_dim: int | None = None,
        cross: bool = False,
        rotary: bool = False,
        max_len: int = 4096,
        rope_base: float = 10000.0,
    ) -> None:
        super().__init__()
        for name, value in (("input_dim", input_dim), ("embed_dim", embed_dim), ("num_heads", num_heads)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if embed_dim % num_heads != 0:
            raise ValueError(
                f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.input_dim, self.embed_dim, self.num_heads = input_dim, embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = dropout
        self.cross = cross or kv_dim is not None
        self.kv_dim = (kv_dim or input_dim) if self.cross else input_dim
        if self.cross:
            self.q_proj = nn.Linear(input_dim, embed_dim, bias=bias)
            self.kv_proj = nn.Linear(self.kv_dim, 2 * embed_dim, bias=bias)
        else:
            self.qkv_proj = nn.Linear(input_dim, 3 * embed_dim, bias=bias)
        self.o_proj = nn.Linear(embed_dim, input_dim, bias=bias)
        self.rotary = RotaryEmbedding(self.head_dim, max_len, rope_base) if rotary else None
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        # Original Transformer initialisation (as in the course): Xavier-uniform, zero bias.
        for module in self.children():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    module.bias.data.fill_(0)

    # ---- projections -------------------------------------------------------------------
    def _heads(self, y: Tensor, n: int) -> tuple[Tensor, ...]:
        B, T, _ = y.shape
        y = y.reshape(B, T, self.num_heads, n * self.head_dim)  # (B, T, H, n·hd)
        y = y.permute(0, 2, 1, 3)  # (B, H, T, n·hd)
        return y.chunk(n, dim=-1)  # n × (B, H, T, hd)

    def _qkv_slices(self) -> tuple[tuple[Tensor, Tensor | None], ...]:
        """Per-role (weight, bias) of the stacked projection, each (E, input_dim) and (E,)."""
        E, H, hd = self.embed_dim, self.num_heads, self.head_dim
        w = self.qkv_proj.weight.view(H, 3, hd, self.input_dim)  # per-head [q; k; v]
        b = None if self.qkv_proj.bias is None else self.qkv_proj.bias.view(H, 3, hd)
        return tuple(
            (w[:, i].reshape(E, self.input_dim), None if b is None else b[:, i].reshape(E))
            for i in range(3)
        )

    def _project(self, x: Tensor, memory: Tensor | None, cache: KVCache | None):
        if not self.cross and memory is None:
            return self._heads(self.qkv_proj(x), 3)
        if memory is None:
            raise ValueError("a cross-attention module needs `memory` (the key/value sequence)")
        if self.cross:
            (q,) = self._heads(self.q_proj(x), 1)
            if cache is not None and cache.static:
                return q, cache.k, cache.v
            k, v = self._heads(self.kv_proj(memory), 2)
        else:  # a self-attention module asked to attend to another sequence of the same width
            (wq, bq), (wk, bk), (wv, bv) = self._qkv_slices()
            (q,) = self._heads(F.linear(x, wq, bq), 1)
            if cache is not None and cache.static:
                return q, cache.k, cache.v
            (k,) = self._heads(F.linear(memory, wk, bk), 1)
            (v,) = self._heads(F.linear(memory, wv, bv), 1)
        if cache is not None:
            cache.set_static(k, v)
        return q, k, v

    # ---- forward -----------------------------------------------------------------------
    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        return_attention: bool = False,
        *,
        memory: Tensor | None = None,
        is_causal: bool = False,
        cache: KVCache | None = None,
        positions: Tensor | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attend from x to itself, or to ``memory`` (cross-attention).

        Args:
            x: queries' input (B, T_q, input_dim).
            mask: bool/0-1 mask broadcastable to (B, H, T_q, T_k); True = may attend.
            return_attention: also return the (B, H, T_q, T_k) weights (reference path).
            memory: key/value input (B, S, kv_dim) for cross-attention.
            is_causal: query i may attend only to keys j <= i (combined with ``mask``). With a
                cache, positions count from the cached length.
            cache: a ``KVCache`` for incremental decoding: self-attention appends this call's
                keys/values; cross-attention computes them from ``memory`` once and reuses them.
            positions: (T_q,) or (B, T_q) integer positions for rotary embeddings (default:
                cached length + 0..T_q-1).

        Returns:
            o (B, T_q, input_dim), or (o, attention) with ``return_attention``.
        """
        if x.ndim != 3:
            raise ValueError(f"x must be (B, T, input_dim), got shape {tuple(x.shape)}")
        if x.shape[-1] != self.input_dim:
            raise ValueError(
                f"x has width {x.shape[-1]} but this attention has input_dim {self.input_dim}"
            )
        if memory is not None:
            if memory.ndim != 3 or memory.shape[0] != x.shape[0] or memory.shape[-1] != self.kv_dim:
                raise ValueError(
                    f"memory must be (B={x.shape[0]}, S, kv_dim={self.kv_dim}), "
                    f"got shape {tuple(memory.shape)}"
                )
        B, T_q, _ = x.shape
        offset = cache.length if (cache is not None and not self.cross and memory is None) else 0
        q, k, v = self._project(x, memory, cache)  # (B, H, T_q, hd), (B, H, T_k, hd) ×2
        if self.rotary is not None and memory is None:
            if positions is None:
                positions = torch.arange(offset, offset + T_q, device=x.device)
            q, k = self.rotary(q, positions), self.rotary(k, positions)
        if cache is not None and not cache.static:
            k, v = cache.update(k, v)  # (B, H, T_k = cached + T_q, hd)
        T_k = k.shape[2]

        causal_flag = False
        if mask is not None:
            mask = check_mask(mask, B, self.num_heads, T_q, T_k)
        if is_causal:
            if mask is None and T_q == T_k:
                causal_flag = True  # the kernels' own causal path, no mask tensor
            elif T_q > 1 or mask is not None:
                # bottom-right aligned: the query at position offset+i sees keys j <= offset+i
                i = torch.arange(T_q, device=x.device)[:, None] + (T_k - T_q)
                causal = torch.arange(T_k, device=x.device)[None, :] <= i  # (T_q, T_k)
                mask = causal if mask is None else mask & causal
        row_ok = None
        if mask is not None:
            mask, row_ok = _guard_empty_rows(mask)

        p = self.dropout if self.training else 0.0
        attention = None
        if return_attention:
            if causal_flag:
                mask = torch.ones(T_q, T_k, dtype=torch.bool, device=x.device).tril()
            values, attention = scaled_dot_product(q, k, v, mask, dropout_p=p)
        else:
            values = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal_flag
            )  # (B, H, T_q, hd)
        if row_ok is not None:
            values = values.masked_fill(~row_ok, 0.0)
            if attention is not None:
                attention = attention.masked_fill(~row_ok, 0.0)
        values = values.permute(0, 2, 1, 3).reshape(B, T_q, self.embed_dim)  # (B, T_q, E)
        o = self.o_proj(values)  # (B, T_q, input_dim)
        return (o, attention) if return_attention else o

    # ---- weight conversion at the boundary (torch.nn, Hugging Face) --------------------
    @torch.no_grad()
    def set_qkv(self, wq: Tensor, wk: Tensor, wv: Tensor,
                bq: Tensor | None = None, bk: Tensor | None = None, bv: Tensor | None = None) -> None:
        """Load separate Q, K, V projections, each (E, in) as in ``nn.Linear`` (y = x Wᵀ + b)."""
        E, H, hd = self.embed_dim, self.num_heads, self.head_dim
        if self.cross:
            self.q_proj.weight.copy_(wq)
            kv = torch.stack((wk.view(H, hd, -1), wv.view(H, hd, -1)), 1)  # (H, 2, hd, kv_dim)
            self.kv_proj.weight.copy_(kv.reshape(2 * E, -1))
            if self.q_proj.bias is not None:
                self.q_proj.bias.copy_(bq)
                self.kv_proj.bias.copy_(torch.stack((bk.view(H, hd), bv.view(H, hd)), 1).reshape(-1))
            return
        w = torch.stack([m.view(H, hd, -1) for m in (wq, wk, wv)], 1)  # (H, 3, hd, in)
        self.qkv_proj.weight.copy_(w.reshape(3 * E, -1))
        if self.qkv_proj.bias is not None:
            b = torch.stack([m.view(H, hd) for m in (bq, bk, bv)], 1)  # (H, 3, hd)
            self.qkv_proj.bias.copy_(b.reshape(-1))

    def get_qkv(self) -> tuple[Tensor, Tensor, Tensor, Tensor | None, Tensor | None, Tensor | None]:
        """The Q, K, V projections as separate (E, in) weights and (E,) biases."""
        E, H, hd = self.embed_dim, self.num_heads, self.head_dim
        if self.cross:
            w = self.kv_proj.weight.view(H, 2, hd, -1)
            b = None if self.kv_proj.bias is None else self.kv_proj.bias.view(H, 2, hd)
            return (self.q_proj.weight, w[:, 0].reshape(E, -1), w[:, 1].reshape(E, -1),
                    self.q_proj.bias, None if b is None else b[:, 0].reshape(E),
                    None if b is None else b[:, 1].reshape(E))
        (wq, bq), (wk, bk), (wv, bv) = self._qkv_slices()
        return wq, wk, wv, bq, bk, bv

    def extra_repr(self) -> str:
        return (f"input_dim={self.input_dim}, embed_dim={self.embed_dim}, "
                f"num_heads={self.num_heads}, cross={self.cross}")
