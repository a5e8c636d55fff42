"""Multi-head attention: self or cross, fused or reference, full or one cached step.

Shapes: B batch, H heads, T_q query length, T_k key length (S for an encoder memory),
D model width, E = embed_dim = H·hd, hd head width.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) Wᴼ,
    head_i = Attention(Q W_iQ, K W_iK, V W_iV)                     (Vaswani et al., 2017, §3.2.2)

Grouped-query attention (Ainslie et al., 2023) gives H_kv < H heads keys and values: query head
i reads key/value head ⌊i / (H / H_kv)⌋ (H_kv = 1: multi-query attention, Shazeer 2019), so
the projections and the KV cache hold H_kv heads, not H. QK-norm (Qwen3, OLMo 2) RMS-normalises
each head's q and k before the rotation; a sliding window (Mistral) lets query i see keys
i − W + 1..i only.

Attention itself (softmax(QKᵀ/√d_k)V, fused kernel and reference path) is in ``sdpa.py``.
Positions enter through parts passed in: ``pos_embeddings`` (applied to q and k, e.g. rotary)
and ``attn_bias`` (a score bias from the lengths, e.g. ALiBi); see ``positional.py``. Masks
follow one convention (see ``masks.py``): True means "may attend".
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..settings import heads_divide_width
from .arguments import checked
from .cache import KVCache
from .masks import check_mask
from .norms import RMSNorm
from .positional import RotaryEmbedding, position_range
from .quantize import linear
from .sdpa import attend, scaled_dot_product
from .weight_init import init_with, xavier_zero

__all__ = ["scaled_dot_product", "MultiheadAttention"]


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
    T_q×T_k matrix); with it, or inside ``attnlab.nn.capture``, the reference
    ``scaled_dot_product``. Both give the same output. ``step`` is the fast path of generation:
    one new token against a pre-allocated ``KVCache``.

    Args:
        input_dim: width of the query input x (and of the output).
        embed_dim: total width E of all heads; must be divisible by num_heads. Each head is
            hd = E / H wide; E other than input_dim gives the heads a width of their own
            (Qwen3-0.6B: input_dim 1024, 16 heads of 128, so E = 2048; Gemma's head_dim).
        num_heads: number of heads H.
        dropout: dropout on attention weights during training.
        bias: whether the projections have biases.
        kv_dim: width of the key/value sequence for cross-attention (implies ``cross``).
        cross: build a cross-attention module (keys/values from ``memory``).
        pos_embeddings: a module applied to queries and keys, ``pe(q, positions)``
            (self-attention only; e.g. ``RotaryEmbedding``; torchtune's ``pos_embeddings``).
        attn_bias: a module giving a score bias ``attn_bias(T_q, T_k)`` -> (H, T_q, T_k) or
            (B, H, T_q, T_k) (self-attention only; e.g. ``ALiBi``).
        rotary: shorthand for ``pos_embeddings=RotaryEmbedding(head_dim, max_len, rope_base)``.
        max_len: longest sequence for ``rotary``.
        rope_base: rotary frequency base for ``rotary``.
        num_kv_heads: key/value heads H_kv (default H); must divide H. Fewer is grouped-query
            attention, 1 multi-query; self-attention only.
        qkv_bias: biases on the query/key/value projection (default: ``bias``); Qwen2 has
            them and none on the output (``bias=False, qkv_bias=True``).
        qk_norm: an ``RMSNorm`` of each head's q and k (``q_norm``, ``k_norm``, width hd)
            before the positions act; self-attention only.
        norm_eps: the epsilon of those norms.
        window: sliding-window causal attention: with ``is_causal``, query i sees the W keys
            i − W + 1..i (Mistral's ``sliding_window``); self-attention only. A
            ``KVCache(window=W)`` then keeps only the keys the window reads.

    Raises:
        ValueError: if embed_dim is not divisible by num_heads, num_heads not by num_kv_heads,
            or widths are not positive.

    Shape:
        x: (B, T_q, input_dim); memory: (B, S, kv_dim); mask broadcastable to (B, H, T_q, T_k);
        output (B, T_q, input_dim); attention (B, H, T_q, T_k).

    Examples:
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
        pos_embeddings: nn.Module | None = None,
        attn_bias: nn.Module | None = None,
        rotary: bool = False,
        max_len: int = 4096,
        rope_base: float = 10000.0,
        num_kv_heads: int | None = None,
        qkv_bias: bool | None = None,
        qk_norm: bool = False,
        norm_eps: float = 1e-6,
        window: int | None = None,
    ) -> None:
        super().__init__()
        for name, value in (("input_dim", input_dim), ("embed_dim", embed_dim),
                            ("num_heads", num_heads), ("dropout", dropout)):
            checked(name, value)
        if broken := heads_divide_width(embed_dim, num_heads, names=("embed_dim", "num_heads")):
            raise ValueError(broken)
        self.input_dim, self.embed_dim, self.num_heads = input_dim, embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = dropout
        self.cross = cross or kv_dim is not None
        self.kv_dim = (kv_dim or input_dim) if self.cross else input_dim
        self.num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.window = window
        self._check_options(qk_norm)
        qkv_bias = bias if qkv_bias is None else qkv_bias
        if self.cross:
            self.q_proj = nn.Linear(input_dim, embed_dim, bias=qkv_bias)
            self.kv_proj = nn.Linear(self.kv_dim, 2 * embed_dim, bias=qkv_bias)
        else:  # E for the queries, H_kv·hd each for the keys and the values
            kv_width = self.num_kv_heads * self.head_dim
            self.qkv_proj = nn.Linear(input_dim, embed_dim + 2 * kv_width, bias=qkv_bias)
        self.o_proj = nn.Linear(embed_dim, input_dim, bias=bias)
        if qk_norm:
            self.q_norm = RMSNorm(self.head_dim, norm_eps)
            self.k_norm = RMSNorm(self.head_dim, norm_eps)
        if rotary and pos_embeddings is None:
            pos_embeddings = RotaryEmbedding(self.head_dim, max_len, rope_base)
        self.pos_embeddings, self.attn_bias = pos_embeddings, attn_bias
        self._reset_parameters()

    def _check_options(self, qk_norm: bool) -> None:
        """The grouped-query, QK-norm and window options: self-attention's, in range."""
        H, H_kv = self.num_heads, checked("num_kv_heads", self.num_kv_heads)
        checked("window", self.window)
        if H % H_kv:
            raise ValueError(f"num_heads ({H}) must be divisible by num_kv_heads ({H_kv})")
        if self.cross and (H_kv != H or qk_norm or self.window is not None):
            raise ValueError("num_kv_heads, qk_norm and window are options of self-attention; "
                             "this is a cross-attention module")

    # a capture (``attnlab.nn.capture``) adds callables here that receive the weights; empty,
    # the forward pass stays on the fused kernel
    _attention_sinks: tuple = ()

    def _reset_parameters(self) -> None:
        # Original Transformer initialisation (as in the course): Xavier-uniform, zero bias,
        # carried by each projection so that its reset_parameters() after a meta-device build
        # gives it again (weight_init.py)
        for name in ("q_proj", "kv_proj", "qkv_proj", "o_proj"):  # not the parts passed in
            module = getattr(self, name, None)
            if module is not None:
                init_with(module, xavier_zero)

    # ---- projections -------------------------------------------------------------------
    def _heads(self, y: Tensor, n: int, heads: int | None = None) -> tuple[Tensor, ...]:
        B, T, _ = y.shape
        y = y.reshape(B, T, heads or self.num_heads, n * self.head_dim)  # (B, T, H, n·hd)
        y = y.permute(0, 2, 1, 3)  # (B, H, T, n·hd)
        return y.chunk(n, dim=-1)  # n × (B, H, T, hd)

    def _split_qkv(self, y: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The stacked projection's output (B, T, E + 2·H_kv·hd), laid out per key/value head g
        as [q of its r = H/H_kv query heads; k_g; v_g] (r = 1: the course's [q_h; k_h; v_h]),
        as q (B, H, T, hd) and k, v (B, H_kv, T, hd); query head g·r + j reads head g."""
        H, H_kv, hd = self.num_heads, self.num_kv_heads, self.head_dim
        if H_kv == H:
            return self._heads(y, 3)
        B, T, _ = y.shape
        r = H // H_kv
        y = y.reshape(B, T, H_kv, (r + 2) * hd).permute(0, 2, 1, 3)  # (B, H_kv, T, (r+2)·hd)
        q, k, v = y.split((r * hd, hd, hd), dim=-1)
        q = q.reshape(B, H_kv, T, r, hd).transpose(2, 3).reshape(B, H, T, hd)
        return q, k, v

    def _qkv_slices(self) -> tuple[tuple[Tensor, Tensor | None], ...]:
        """Per-role (weight, bias) of the stacked projection: the queries' (E, input_dim) and
        (E,), the keys' and the values' (H_kv·hd, input_dim) and (H_kv·hd,)."""
        b = self.qkv_proj.bias
        biases = (None,) * 3 if b is None else self.qkv_rows(b)
        return tuple(zip(self.qkv_rows(self.qkv_proj.weight), biases))

    def qkv_rows(self, t: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The query, key and value rows of ``t``, whose rows are the outputs of a
        self-attention's stacked ``qkv_proj`` (its weight, its bias, or the B of a LoRA update
        of it, ``attnlab.interop.peft_adapter``): (E, ...), (H_kv·hd, ...), (H_kv·hd, ...)."""
        H_kv, hd, rest = self.num_kv_heads, self.head_dim, t.shape[1:]
        r = self.num_heads // H_kv
        w = t.reshape(H_kv, r + 2, hd, *rest)  # per key/value head [q..; k; v]
        roles = (slice(0, r), slice(r, r + 1), slice(r + 1, r + 2))
        return tuple(w[:, i].reshape(-1, *rest) for i in roles)

    def kv_rows(self, t: Tensor) -> tuple[Tensor, Tensor]:
        """The key and value rows of ``t``, whose rows are the outputs of a cross-attention's
        stacked ``kv_proj``: (E, ...) each."""
        w = t.reshape(self.num_heads, 2, self.head_dim, *t.shape[1:])  # per head [k; v]
        return w[:, 0].reshape(-1, *t.shape[1:]), w[:, 1].reshape(-1, *t.shape[1:])

    def _project(self, x: Tensor, memory: Tensor | None, cache: KVCache | None):
        if not self.cross and memory is None:
            return self._qk_normed(*self._split_qkv(self.qkv_proj(x)))
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
                return self._qk_normed(q, None, None)[0], cache.k, cache.v
            (k,) = self._heads(F.linear(memory, wk, bk), 1, self.num_kv_heads)
            (v,) = self._heads(F.linear(memory, wv, bv), 1, self.num_kv_heads)
            q, k, v = self._qk_normed(q, k, v)
        if cache is not None:
            cache.set_static(k, v)
        return q, k, v

    def _qk_normed(self, q: Tensor, k: Tensor | None, v: Tensor | None):
        """q and k through ``q_norm`` and ``k_norm`` (QK-norm), where this module has them."""
        m = self._modules
        if "q_norm" not in m:
            return q, k, v
        return m["q_norm"](q), None if k is None else m["k_norm"](k), v

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
        score_bias: Tensor | None = None,
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
            positions: (T_q,) or (B, T_q) integer positions for ``pos_embeddings`` (default:
                cached length + 0..T_q-1).
            score_bias: float scores added before the softmax, broadcastable to
                (B, H, T_q, T_k) (a per-input pairwise bias; added to ``attn_bias``'s).

        Returns:
            o (B, T_q, input_dim), or (o, attention) with ``return_attention``.
        """
        self._check_inputs(x, memory)
        B, T_q, _ = x.shape
        self_attn = memory is None
        offset = cache.length if (cache is not None and self_attn and not self.cross) else 0
        q, k, v = self._project(x, memory, cache)  # (B, H, T_q, hd), (B, H, T_k, hd) ×2
        if self.pos_embeddings is not None and self_attn:
            if positions is None:
                positions = self._positions(offset, T_q, x.device)
            q, k = self.pos_embeddings(q, positions), self.pos_embeddings(k, positions)
        if cache is not None and not cache.static:
            k, v = cache.update(k, v)  # (B, H, T_k = cached + T_q, hd)
            mask = cache.kept(mask)  # a windowed cache dropped its oldest keys
        T_k = k.shape[2]
        if mask is not None:
            mask = check_mask(mask, B, self.num_heads, T_q, T_k)
        mask, causal_flag = self._causal(mask, is_causal, T_q, T_k, x.device, self.window)
        if self.attn_bias is not None and self_attn:
            bias = self.attn_bias(T_q, T_k)
            score_bias = bias if score_bias is None else score_bias + bias
        sinks = self._attention_sinks
        values, attention = attend(q, k, v, mask, is_causal=causal_flag, bias=score_bias,
                                   dropout_p=self.dropout if self.training else 0.0,
                                   need_weights=return_attention or bool(sinks))
        for sink in sinks:
            sink(attention)
        values = values.permute(0, 2, 1, 3).reshape(B, T_q, self.embed_dim)  # (B, T_q, E)
        o = self.o_proj(values)  # (B, T_q, input_dim)
        return (o, attention) if return_attention else o

    def _positions(self, start: int, T: int, device: torch.device) -> Tensor:
        """The default positions start..start+T-1 after ``start`` cached tokens, checked as
        integers against the positional part's ``max_len`` (when it has one)."""
        return position_range(start, T, max_len=getattr(self.pos_embeddings, "max_len", None),
                              device=device)

    def check_dtype(self, x: Tensor, name: str = "x") -> None:
        """``TypeError`` for an input whose dtype is not the weights' (outside autocast, which
        casts for itself): the linear layers failed with "mat1 and mat2 must have the same
        dtype", naming neither the input nor the module. A quantised projection (no
        parameters) is skipped. The dtype is a parameter's, not ``o_proj.weight``'s: a LoRA
        layer's ``weight`` forms W₀ + BA, a matrix product, to be read."""
        weight = next(self.o_proj.parameters(), None)
        if (isinstance(weight, Tensor) and x.dtype != weight.dtype
                and not torch.is_autocast_enabled(x.device.type)):
            raise TypeError(f"{name} has dtype {x.dtype} but the weights are {weight.dtype}: "
                            f"convert {name} with .to({weight.dtype})")

    def _check_inputs(self, x: Tensor, memory: Tensor | None) -> None:
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
            self.check_dtype(memory, "memory")
        self.check_dtype(x)

    @staticmethod
    def _causal(mask: Tensor | None, is_causal: bool, T_q: int, T_k: int,
                device: torch.device, window: int | None = None) -> tuple[Tensor | None, bool]:
        """(mask with causality, and the sliding ``window`` if any, folded in; whether the
        kernel's own causal flag can do it)."""
        if not is_causal and window is not None:
            raise ValueError("a sliding window (window=) is causal attention's: pass "
                             "is_causal=True")
        if not is_causal:
            return mask, False
        if window is None or window >= T_k:
            if mask is None and T_q == T_k:
                return None, True  # the kernels' own causal path, no mask tensor
            if T_q == 1 and mask is None:
                return None, False  # one new query sees every cached key
        # bottom-right aligned: the query at position offset+i sees keys j <= offset+i
        i = torch.arange(T_q, device=device)[:, None] + (T_k - T_q)
        j = torch.arange(T_k, device=device)[None, :]
        causal = j <= i  # (T_q, T_k)
        if window is not None:
            causal = causal & (j > i - window)  # and only the last `window` keys
        return (causal if mask is None else mask & causal), False

    # ---- one cached step of generation ------------------------------------------------------
    def step(self, x: Tensor, cache: KVCache, *, positions: Tensor | None = None,
             key_mask: Tensor | None = None) -> Tensor:
        """Causal self-attention of one new token against its cache: the fast path of
        generation, the same numbers as ``forward(x, is_causal=True, cache=cache)``.

        Self-attention only. No validation, no mask building (the new query may see every
        cached key), one write into the cache's buffer (``KVCache.reserve`` it first),
        functional calls only; in training mode with dropout it takes ``forward``.

        Args:
            x: the new token's input (B, 1, input_dim).
            cache: this layer's self-attention cache; the new key and value are appended.
            positions: (B, 1) or (1,) positions for ``pos_embeddings`` (default: cache length).
            key_mask: bool (B, 1, 1, T_k) with True at real keys (padded prompts), or None.

        Returns:
            o (B, 1, input_dim).
        """
        if self.training and self.dropout:
            return self(x, key_mask, is_causal=True, cache=cache, positions=positions)
        B, H, hd = x.shape[0], self.num_heads, self.head_dim
        # parameters by dict lookup, not nn.Module.__getattr__: a step is bound by Python overhead
        m = self._modules
        y = linear(m["qkv_proj"], x)  # (B, 1, E + 2·H_kv·hd)
        if self.num_kv_heads == H:  # viewed per head [q; k; v]: (B, H, 1, 3·hd), then thirds
            q, k, v = y.view(B, H, 1, 3 * hd).chunk(3, dim=-1)
        else:  # per key/value head [q of its r heads; k; v]; with one step the heads of q follow
            r = H // self.num_kv_heads
            q, k, v = y.view(B, self.num_kv_heads, 1, (r + 2) * hd).split((r * hd, hd, hd), -1)
            q = q.reshape(B, H, 1, hd)
        if "q_norm" in m:
            q, k = m["q_norm"](q), m["k_norm"](k)
        if self.pos_embeddings is not None:
            if positions is None:
                positions = self._positions(cache.length, 1, x.device)
            q, k = self.pos_embeddings(q, positions), self.pos_embeddings(k, positions)
        k, v = cache.update(k, v)  # (B, H_kv, T_k, hd): a windowed cache's last keys only
        key_mask = cache.kept(key_mask)
        T_k = k.shape[2]
        if self.window is not None and T_k > self.window:  # the last `window` keys only
            recent = (torch.arange(T_k, device=x.device) >= T_k - self.window).view(1, 1, 1, T_k)
            key_mask = recent if key_mask is None else key_mask & recent
        bias = None if self.attn_bias is None else self.attn_bias(1, T_k)
        if self._attention_sinks or bias is not None:
            values, attention = attend(q, k, v, key_mask, bias=bias,
                                       need_weights=bool(self._attention_sinks))
            for sink in self._attention_sinks:
                sink(attention)
        else:
            values = F.scaled_dot_product_attention(  # (B, H, 1, hd)
                q, k, v, attn_mask=key_mask, enable_gqa=self.num_kv_heads != H)
        # (B, H, 1, hd) -> (B, 1, E): with one query the heads are already contiguous
        return linear(m["o_proj"], values.view(B, 1, self.embed_dim))

    # ---- weight conversion at the boundary (torch.nn, Hugging Face) --------------------
    @torch.no_grad()
    def set_qkv(self, wq: Tensor, wk: Tensor, wv: Tensor,
                bq: Tensor | None = None, bk: Tensor | None = None, bv: Tensor | None = None) -> None:
        """Load separate Q, K, V projections as in ``nn.Linear`` (y = x Wᵀ + b): wq (E, in),
        wk and wv (H_kv·hd, in); the three biases exactly when this module has them.

        Raises:
            ValueError: for biases missing where the projection has them, or given where it
                has none (they would be dropped without a word).
        """
        self._check_qkv_biases(bq, bk, bv)
        E, H, hd = self.embed_dim, self.num_heads, self.head_dim
        if self.cross:
            self.q_proj.weight.copy_(wq)
            kv = torch.stack((wk.view(H, hd, -1), wv.view(H, hd, -1)), 1)  # (H, 2, hd, kv_dim)
            self.kv_proj.weight.copy_(kv.reshape(2 * E, -1))
            if self.q_proj.bias is not None:
                self.q_proj.bias.copy_(bq)
                self.kv_proj.bias.copy_(torch.stack((bk.view(H, hd), bv.view(H, hd)), 1).reshape(-1))
            return
        H_kv = self.num_kv_heads
        r = H // H_kv
        # per key/value head g: [q of heads g·r..g·r+r-1; k_g; v_g]  (H_kv, r + 2, hd, in)
        w = torch.cat((wq.view(H_kv, r, hd, -1), wk.view(H_kv, 1, hd, -1),
                       wv.view(H_kv, 1, hd, -1)), 1)
        self.qkv_proj.weight.copy_(w.reshape(self.qkv_proj.weight.shape))
        if self.qkv_proj.bias is not None:
            b = torch.cat((bq.view(H_kv, r, hd), bk.view(H_kv, 1, hd), bv.view(H_kv, 1, hd)), 1)
            self.qkv_proj.bias.copy_(b.reshape(-1))

    def _check_qkv_biases(self, *biases: Tensor | None) -> None:
        has = (self.q_proj if self.cross else self.qkv_proj).bias is not None
        given = [b is not None for b in biases]
        if all(given) if has else not any(given):
            return
        if has:
            raise ValueError("set_qkv: this attention's q, k, v projections have biases "
                             "(qkv_bias=True): pass bq, bk and bv, or build it with qkv_bias=False")
        raise ValueError("set_qkv: biases were given, but this attention's q, k, v projections "
                         "have none (qkv_bias=False): build it with qkv_bias=True")

    def get_qkv(self) -> tuple[Tensor, Tensor, Tensor, Tensor | None, Tensor | None, Tensor | None]:
        """The Q, K, V projections as separate weights and biases (``set_qkv``'s shapes)."""
        if self.cross:
            wk, wv = self.kv_rows(self.kv_proj.weight)
            bk, bv = (None, None) if self.kv_proj.bias is None else self.kv_rows(self.kv_proj.bias)
            return self.q_proj.weight, wk, wv, self.q_proj.bias, bk, bv
        (wq, bq), (wk, bk), (wv, bv) = self._qkv_slices()
        return wq, wk, wv, bq, bk, bv

    def extra_repr(self) -> str:
        extra = "" if self.num_kv_heads == self.num_heads else f", num_kv_heads={self.num_kv_heads}"
        extra += "" if self.window is None else f", window={self.window}"
        return (f"input_dim={self.input_dim}, embed_dim={self.embed_dim}, "
                f"num_heads={self.num_heads}{extra}, cross={self.cross}")
