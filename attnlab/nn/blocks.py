"""Encoder and decoder blocks, composed from the parts they are given.

Shapes: B batch, T target/sequence length, S source (memory) length, D model width, H heads.

Post-LN (the paper's and the course's default):
    x = LayerNorm(x + Dropout(MHA(x)));  x = LayerNorm(x + Dropout(FFN(x)))
Pre-LN (``norm_first=True``; Xiong et al., 2020 — trains without warm-up trouble):
    x = x + Dropout(MHA(LayerNorm(x)));  x = x + Dropout(FFN(LayerNorm(x)))
The decoder adds, between the two, cross-attention whose queries come from the decoder and whose
keys and values come from the encoder's output (a T×S map).

A block takes its parts (``attn=``, ``ff=``, ``norm=``, and the positional parts of its
self-attention) or builds the course's defaults from its arguments; the parts keep the course's
names (``self_attn``, ``linear_net``, ``norm1``...), so state dicts are unchanged. ``step`` is
generation's fast path: one new token through the block's own parts.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from ..settings import heads_divide_width
from .arguments import checked
from .attention import MultiheadAttention
from .cache import KVCache
from .capture import capture
from .feedforward import FeedForward, GatedFeedForward

__all__ = ["EncoderBlock", "DecoderBlock"]

NormFactory = Callable[[int], nn.Module]


def _norm(norm: nn.Module, x: Tensor) -> Tensor:
    """``norm(x)``; a plain LayerNorm as one functional call. Per-token steps are bound by
    Python overhead, so parameters are read from ``_parameters`` (a dict lookup) rather than
    through ``nn.Module.__getattr__``, a slower lookup made ~20 times per layer and token
    (benchmarks/RESULTS.md, "Numbers once quoted in the code")."""
    if type(norm) is nn.LayerNorm:
        p = norm._parameters
        return torch.layer_norm(x, norm.normalized_shape, p["weight"], p["bias"], norm.eps)
    return norm(x)


def _heads_divide(input_dim: int, num_heads: int) -> None:
    """``ValueError`` unless the heads divide the width, naming the block's own arguments: the
    attention inside would name its ``embed_dim``, which a block's caller never wrote."""
    checked("input_dim", input_dim)
    checked("num_heads", num_heads)
    if broken := heads_divide_width(input_dim, num_heads, names=("input_dim", "num_heads")):
        raise ValueError(broken)


def _ff_step(ff: nn.Module, x: Tensor) -> Tensor:
    return ff.step(x) if isinstance(ff, (FeedForward, GatedFeedForward)) else ff(x)


class _Block(nn.Module):
    """What encoder and decoder blocks share: the residual sub-layer."""

    def _setup(self, input_dim: int, norm_first: bool, layer_norm_eps: float,
               norm: NormFactory | None, count: int, bias: bool) -> None:
        self.norm_first, self.input_dim = norm_first, input_dim
        # bias=False drops the LayerNorms' shift too, as nanoGPT's GPT(bias=False) does
        make = norm or (lambda d: nn.LayerNorm(d, eps=layer_norm_eps, bias=bias))
        for i in range(1, count + 1):
            setattr(self, f"norm{i}", make(input_dim))

    def _check_input(self, x: Tensor) -> None:
        """x is (B, T, input_dim) of the attention's dtype, checked before the first norm:
        a pre-LN block's LayerNorm failed first, with "Given normalized_shape=[16], expected
        input with shape [*, 16]" or "mixed dtype (CPU)", naming neither x nor input_dim."""
        if x.ndim != 3 or x.shape[-1] != self.input_dim:
            raise ValueError(f"x must be (B, T, input_dim={self.input_dim}), got shape "
                             f"{tuple(x.shape)}")
        if isinstance(self.self_attn, MultiheadAttention):
            self.self_attn.check_dtype(x)

    def _sublayer(self, x: Tensor, fn: Callable[[Tensor], Tensor], norm: nn.Module) -> Tensor:
        """Residual connection around ``fn`` with the norm before (pre-LN) or after (post-LN)."""
        if self.norm_first:
            return x + self.dropout(fn(norm(x)))
        return norm(x + self.dropout(fn(x)))


class EncoderBlock(_Block):
    """Self-attention and feed-forward, each with a residual connection and LayerNorm.

    Args:
        input_dim: model width D.
        num_heads: attention heads H (D must be divisible by H).
        dim_feedforward: hidden width of the feed-forward network.
        dropout: dropout on each sub-layer's output and inside the feed-forward network.
        ff_dropout: dropout inside the default feed-forward network, if not ``dropout`` (the
            course's); BERT's and GPT-2's have none there (0.0).
        norm_first: pre-LN instead of the paper's post-LN.
        activation: feed-forward activation ("relu", "gelu", "gelu_tanh", "silu").
        layer_norm_eps: LayerNorm epsilon (BERT uses 1e-12).
        bias: biases in the linear layers and the default LayerNorms.
        attention_dropout: dropout on the attention weights.
        attn: the self-attention module (default: ``MultiheadAttention(D, D, H)`` with the
            options above); generation calls its ``step``.
        ff: the feed-forward module (default: ``FeedForward(D, dim_feedforward)``).
        norm: a factory ``norm(D) -> module`` for the two norms (default: LayerNorm).
        pos_embeddings: positional module for queries and keys of the default attention
            (e.g. ``RotaryEmbedding``).
        attn_bias: score-bias module of the default attention (e.g. ``ALiBi``).

    Shape:
        x (B, T, D), mask broadcastable to (B, H, T, T) with True = may attend -> (B, T, D).

    Examples:
        >>> block = EncoderBlock(input_dim=16, num_heads=4, dim_feedforward=32)
        >>> block(torch.randn(2, 5, 16)).shape
        torch.Size([2, 5, 16])
    """

    def __init__(self, input_dim: int, num_heads: int, dim_feedforward: int, dropout: float = 0.0,
                 *, norm_first: bool = False, activation: str = "relu", layer_norm_eps: float = 1e-5,
                 bias: bool = True, attention_dropout: float = 0.0, attn: nn.Module | None = None,
                 ff: nn.Module | None = None, norm: NormFactory | None = None,
                 pos_embeddings: nn.Module | None = None,
                 attn_bias: nn.Module | None = None, ff_dropout: float | None = None) -> None:
        super().__init__()
        checked("dropout", dropout)
        ff_dropout = dropout if checked("ff_dropout", ff_dropout) is None else ff_dropout
        checked("attention_dropout", attention_dropout)
        if attn is None:
            _heads_divide(input_dim, num_heads)
        self.self_attn = attn if attn is not None else MultiheadAttention(
            input_dim, input_dim, num_heads, bias=bias, dropout=attention_dropout,
            pos_embeddings=pos_embeddings, attn_bias=attn_bias)
        self.linear_net = ff if ff is not None else FeedForward(
            input_dim, dim_feedforward, ff_dropout, activation=activation, bias=bias)
        self._setup(input_dim, norm_first, layer_norm_eps, norm, 2, bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, is_causal: bool = False,
                cache: KVCache | None = None, positions: Tensor | None = None,
                score_bias: Tensor | None = None,
                return_attention: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Args: see ``MultiheadAttention.forward``. Returns x, or (x, attention (B, H, T, T))
        with ``return_attention`` (recorded by ``attnlab.nn.capture``)."""
        if return_attention:
            with capture(self, "self_attn", detach=False) as seen:
                x = self(x, mask, is_causal=is_causal, cache=cache, positions=positions,
                         score_bias=score_bias)
            return x, seen["self_attn"]
        self._check_input(x)

        def attn(h: Tensor) -> Tensor:
            return self.self_attn(h, mask, is_causal=is_causal, cache=cache, positions=positions,
                                  score_bias=score_bias)
        x = self._sublayer(x, attn, self.norm1)
        return self._sublayer(x, self.linear_net, self.norm2)

    def step(self, x: Tensor, cache: KVCache, *, positions: Tensor | None = None,
             key_mask: Tensor | None = None) -> Tensor:
        """One new token through the block: ``forward(x, key_mask, is_causal=True, cache=cache)``
        in eval mode, on the parts' fast paths (``MultiheadAttention.step``, no mask building).

        Args:
            x: (B, 1, D) the new token's states.
            cache: this block's self-attention cache (``KVCache.reserve`` it first).
            positions: (B, 1) positions for the attention's ``pos_embeddings``.
            key_mask: bool (B, 1, 1, T_k), True at real keys, or None.

        Returns:
            (B, 1, D).
        """
        if self.training:  # dropout: the general path
            return self(x, key_mask, is_causal=True, cache=cache, positions=positions)
        m = self._modules  # dict lookups: see ``_norm``
        attn, ff, n1, n2 = m["self_attn"], m["linear_net"], m["norm1"], m["norm2"]
        if self.norm_first:
            x = x + attn.step(_norm(n1, x), cache, positions=positions, key_mask=key_mask)
            return x + _ff_step(ff, _norm(n2, x))
        x = _norm(n1, x + attn.step(x, cache, positions=positions, key_mask=key_mask))
        return _norm(n2, x + _ff_step(ff, x))


class DecoderBlock(_Block):
    """Masked self-attention, cross-attention to the encoder memory, and feed-forward.

    Args:
        input_dim: model width D.
        num_heads: attention heads H.
        dim_feedforward: hidden width of the feed-forward network.
        dropout: dropout on each sub-layer's output and inside the feed-forward network.
        norm_first: pre-LN instead of post-LN.
        activation: feed-forward activation.
        memory_dim: width of the encoder memory (default: D).
        layer_norm_eps: LayerNorm epsilon.
        bias: biases in the linear layers and the default LayerNorms.
        attention_dropout: dropout on the attention weights.
        attn: the self-attention part (default built from the arguments above).
        cross_attn: the cross-attention part (default built from the arguments above).
        ff: the feed-forward part (default built from the arguments above).
        norm: a factory ``norm(D) -> module`` for the three norms (default: LayerNorm).
        pos_embeddings: positional part of the default self-attention (RoPE).
        attn_bias: positional bias of the default self-attention's scores (ALiBi).

    Shape:
        x (B, T, D), memory (B, S, memory_dim); tgt_mask broadcastable to (B, H, T, T);
        memory_mask to (B, H, T, S) -> (B, T, D).

    Examples:
        >>> block = DecoderBlock(input_dim=16, num_heads=4, dim_feedforward=32)
        >>> block(torch.randn(2, 5, 16), torch.randn(2, 7, 16)).shape
        torch.Size([2, 5, 16])
    """

    def __init__(self, input_dim: int, num_heads: int, dim_feedforward: int, dropout: float = 0.0,
                 *, norm_first: bool = False, activation: str = "relu", memory_dim: int | None = None,
                 layer_norm_eps: float = 1e-5, bias: bool = True, attention_dropout: float = 0.0,
                 attn: nn.Module | None = None, cross_attn: nn.Module | None = None,
                 ff: nn.Module | None = None, norm: NormFactory | None = None,
                 pos_embeddings: nn.Module | None = None,
                 attn_bias: nn.Module | None = None) -> None:
        super().__init__()
        checked("dropout", dropout)
        checked("attention_dropout", attention_dropout)
        if attn is None or cross_attn is None:
            _heads_divide(input_dim, num_heads)
        self.self_attn = attn if attn is not None else MultiheadAttention(
            input_dim, input_dim, num_heads, bias=bias, dropout=attention_dropout,
            pos_embeddings=pos_embeddings, attn_bias=attn_bias)
        self.cross_attn = cross_attn if cross_attn is not None else MultiheadAttention(
            input_dim, input_dim, num_heads, bias=bias, dropout=attention_dropout,
            kv_dim=memory_dim or input_dim)
        self.linear_net = ff if ff is not None else FeedForward(
            input_dim, dim_feedforward, dropout, activation=activation, bias=bias)
        self._setup(input_dim, norm_first, layer_norm_eps, norm, 3, bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, *, is_causal: bool = True,
                cache: dict[str, KVCache] | None = None, return_attention: bool = False):
        """Args:
            x: target-side input (B, T, D).
            memory: encoder output (B, S, memory_dim).
            tgt_mask: extra self-attention mask (True = may attend), combined with causality.
            memory_mask: cross-attention mask, usually the source padding (B, 1, 1, S).
            is_causal: mask future target positions (the decoder's definition; default True).
            cache: {"self": KVCache, "cross": KVCache} for incremental decoding.
            return_attention: also return the self- and cross-attention weights.

        Returns:
            x, or (x, self_attention (B, H, T, T), cross_attention (B, H, T, S)).
        """
        if return_attention:
            with capture(self, ("self_attn", "cross_attn"), detach=False) as seen:
                x = self(x, memory, tgt_mask, memory_mask, is_causal=is_causal, cache=cache)
            return x, seen["self_attn"], seen["cross_attn"]
        self._check_input(x)
        cache = cache or {}

        def self_attn(h: Tensor) -> Tensor:
            return self.self_attn(h, tgt_mask, is_causal=is_causal, cache=cache.get("self"))

        def cross_attn(h: Tensor) -> Tensor:
            return self.cross_attn(h, memory_mask, memory=memory, cache=cache.get("cross"))
        x = self._sublayer(x, self_attn, self.norm1)
        x = self._sublayer(x, cross_attn, self.norm2)
        return self._sublayer(x, self.linear_net, self.norm3)

    def step(self, x: Tensor, memory: Tensor, cache: dict[str, KVCache],
             memory_mask: Tensor | None = None) -> Tensor:
        """One new target token (B, 1, D): ``forward(x, memory, None, memory_mask, cache=cache)``
        in eval mode, with the self-attention on its fast ``step``. Returns (B, 1, D)."""
        if self.training:
            return self(x, memory, None, memory_mask, cache=cache)
        m = self._modules  # dict lookups: see ``_norm``
        n1, n2, n3, ff = m["norm1"], m["norm2"], m["norm3"], m["linear_net"]

        def cross(h: Tensor) -> Tensor:
            return self.cross_attn(h, memory_mask, memory=memory, cache=cache["cross"])
        if self.norm_first:
            x = x + self.self_attn.step(_norm(n1, x), cache["self"])
            x = x + cross(_norm(n2, x))
            return x + _ff_step(ff, _norm(n3, x))
        x = _norm(n1, x + self.self_attn.step(x, cache["self"]))
        x = _norm(n2, x + cross(x))
        return _norm(n3, x + _ff_step(ff, x))
