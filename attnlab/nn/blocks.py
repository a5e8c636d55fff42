"""Encoder and decoder blocks.

Shapes: B batch, T target/sequence length, S source (memory) length, D model width, H heads.

Post-LN (the paper's and the course's default):
    x = LayerNorm(x + Dropout(MHA(x)));  x = LayerNorm(x + Dropout(FFN(x)))
Pre-LN (``norm_first=True``; Xiong et al., 2020 — trains without warm-up trouble):
    x = x + Dropout(MHA(LayerNorm(x)));  x = x + Dropout(FFN(LayerNorm(x)))
The decoder adds, between the two, cross-attention whose queries come from the decoder and whose
keys and values come from the encoder's output (a T×S map).
"""
from __future__ import annotations

from torch import Tensor, nn

from .attention import MultiheadAttention
from .cache import KVCache
from .feedforward import FeedForward

__all__ = ["EncoderBlock", "DecoderBlock"]


def _sublayer(x: Tensor, fn, norm: nn.LayerNorm, dropout: nn.Module, norm_first: bool):
    """Residual connection around ``fn`` with the LayerNorm before (pre-LN) or after (post-LN).

    ``fn`` may return (out, attention); the attention is passed through.
    """
    out = fn(norm(x) if norm_first else x)
    extra = None
    if isinstance(out, tuple):
        out, extra = out
    x = x + dropout(out)
    return (x if norm_first else norm(x)), extra


class EncoderBlock(nn.Module):
    """Self-attention and feed-forward, each with a residual connection and LayerNorm.

    Args:
        input_dim: model width D.
        num_heads: attention heads H (D must be divisible by H).
        dim_feedforward: hidden width of the feed-forward network.
        dropout: dropout on each sub-layer's output and inside the feed-forward network.
        norm_first: pre-LN instead of the paper's post-LN.
        activation: feed-forward activation ("relu", "gelu", "gelu_tanh", "silu").
        layer_norm_eps: LayerNorm epsilon (BERT uses 1e-12).
        bias: biases in the linear layers.
        attention_dropout: dropout on the attention weights.
        rotary: rotary position embeddings in the attention.
        max_len: longest sequence for rotary embeddings.

    Shape:
        x (B, T, D), mask broadcastable to (B, H, T, T) with True = may attend -> (B, T, D).

    Example:
        >>> block = EncoderBlock(input_dim=16, num_heads=4, dim_feedforward=32)
        >>> block(torch.randn(2, 5, 16)).shape
        torch.Size([2, 5, 16])
    """

    def __init__(self, input_dim: int, num_heads: int, dim_feedforward: int, dropout: float = 0.0,
                 *, norm_first: bool = False, activation: str = "relu", layer_norm_eps: float = 1e-5,
                 bias: bool = True, attention_dropout: float = 0.0, rotary: bool = False,
                 max_len: int = 4096) -> None:
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.norm_first = norm_first
        self.self_attn = MultiheadAttention(input_dim, input_dim, num_heads, bias=bias,
                                            dropout=attention_dropout, rotary=rotary, max_len=max_len)
        self.linear_net = FeedForward(input_dim, dim_feedforward, dropout,
                                      activation=activation, bias=bias)
        self.norm1 = nn.LayerNorm(input_dim, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(input_dim, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, is_causal: bool = False,
                cache: KVCache | None = None, positions: Tensor | None = None,
                return_attention: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Args: see ``MultiheadAttention.forward``. Returns x, or (x, attention)."""
        def attn(h):
            return self.self_attn(h, mask, return_attention, is_causal=is_causal,
                                  cache=cache, positions=positions)
        x, attention = _sublayer(x, attn, self.norm1, self.dropout, self.norm_first)
        x, _ = _sublayer(x, self.linear_net, self.norm2, self.dropout, self.norm_first)
        return (x, attention) if return_attention else x


class DecoderBlock(nn.Module):
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
        bias: biases in the linear layers.
        attention_dropout: dropout on the attention weights.

    Shape:
        x (B, T, D), memory (B, S, memory_dim); tgt_mask broadcastable to (B, H, T, T);
        memory_mask to (B, H, T, S) -> (B, T, D).

    Example:
        >>> block = DecoderBlock(input_dim=16, num_heads=4, dim_feedforward=32)
        >>> block(torch.randn(2, 5, 16), torch.randn(2, 7, 16)).shape
        torch.Size([2, 5, 16])
    """

    def __init__(self, input_dim: int, num_heads: int, dim_feedforward: int, dropout: float = 0.0,
                 *, norm_first: bool = False, activation: str = "relu", memory_dim: int | None = None,
                 layer_norm_eps: float = 1e-5, bias: bool = True, attention_dropout: float = 0.0,
                 rotary: bool = False, max_len: int = 4096) -> None:
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.norm_first = norm_first
        self.self_attn = MultiheadAttention(input_dim, input_dim, num_heads, bias=bias,
                                            dropout=attention_dropout, rotary=rotary, max_len=max_len)
        self.cross_attn = MultiheadAttention(input_dim, input_dim, num_heads, bias=bias,
                                             dropout=attention_dropout,
                                             kv_dim=memory_dim or input_dim)
        self.linear_net = FeedForward(input_dim, dim_feedforward, dropout,
                                      activation=activation, bias=bias)
        self.norm1 = nn.LayerNorm(input_dim, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(input_dim, eps=layer_norm_eps)
        self.norm3 = nn.LayerNorm(input_dim, eps=layer_norm_eps)
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
        cache = cache or {}

        def self_attn(h):
            return self.self_attn(h, tgt_mask, return_attention, is_causal=is_causal,
                                  cache=cache.get("self"))

        def cross_attn(h):
            return self.cross_attn(h, memory_mask, return_attention, memory=memory,
                                   cache=cache.get("cross"))
        x, self_w = _sublayer(x, self_attn, self.norm1, self.dropout, self.norm_first)
        x, cross_w = _sublayer(x, cross_attn, self.norm2, self.dropout, self.norm_first)
        x, _ = _sublayer(x, self.linear_net, self.norm3, self.dropout, self.norm_first)
        return (x, self_w, cross_w) if return_attention else x
