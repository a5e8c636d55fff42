"""attnlab.nn — the Transformer's building blocks in plain PyTorch (imports torch only).

Masks everywhere: bool or 0/1, broadcastable to (B, H, T_q, T_k), True = may attend.
Attention weights of any model: ``with capture(model) as cache: model(x)`` (``capture.py``).
Positional kinds ("learned", "rope", "alibi", ...): ``POSITIONAL_KINDS`` (``positional.py``).
"""
from .attention import MultiheadAttention, scaled_dot_product
from .blocks import DecoderBlock, EncoderBlock
from .cache import KVCache
from .capture import ActivationCache, capture
from .feedforward import FeedForward, GatedFeedForward
from .graph import GraphAttention
from .lora import LoRALinear, add_lora, merge_lora
from .norms import RMSNorm, make_norm
from .masks import causal_mask, expand_mask, padding_mask, window_mask
from .positional import (
    POSITIONAL_KINDS, ALiBi, LearnedPositionalEncoding, PositionalEncoding, PositionalKind,
    RotaryEmbedding, positional_kind,
)
from .quantize import quantize
from .scores import AdditiveAttention, BilinearAttention
from .stacks import Transformer, TransformerDecoder, TransformerEncoder

__all__ = [
    "scaled_dot_product", "MultiheadAttention", "EncoderBlock", "DecoderBlock",
    "TransformerEncoder", "TransformerDecoder", "Transformer", "FeedForward", "GatedFeedForward",
    "RMSNorm", "make_norm", "KVCache",
    "PositionalEncoding", "LearnedPositionalEncoding", "RotaryEmbedding", "ALiBi",
    "PositionalKind", "POSITIONAL_KINDS", "positional_kind", "capture", "ActivationCache",
    "expand_mask", "causal_mask", "padding_mask", "window_mask",
    "AdditiveAttention", "BilinearAttention", "GraphAttention", "quantize",
    "LoRALinear", "add_lora", "merge_lora",
]
