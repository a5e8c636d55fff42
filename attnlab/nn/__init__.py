"""attnlab.nn — the Transformer's building blocks in plain PyTorch (imports torch only).

Masks everywhere: bool or 0/1, broadcastable to (B, H, T_q, T_k), True = may attend.
"""
from .attention import MultiheadAttention, scaled_dot_product
from .blocks import DecoderBlock, EncoderBlock
from .cache import KVCache
from .feedforward import FeedForward
from .masks import causal_mask, expand_mask, padding_mask, window_mask
from .positional import LearnedPositionalEncoding, PositionalEncoding, RotaryEmbedding
from .scores import AdditiveAttention, BilinearAttention
from .stacks import Transformer, TransformerDecoder, TransformerEncoder

__all__ = [
    "scaled_dot_product", "MultiheadAttention", "EncoderBlock", "DecoderBlock",
    "TransformerEncoder", "TransformerDecoder", "Transformer", "FeedForward", "KVCache",
    "PositionalEncoding", "LearnedPositionalEncoding", "RotaryEmbedding",
    "expand_mask", "causal_mask", "padding_mask", "window_mask",
    "AdditiveAttention", "BilinearAttention",
]
