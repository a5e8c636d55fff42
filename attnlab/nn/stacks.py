"""Stacks of blocks: encoder, decoder, and the encoder–decoder Transformer (no embeddings).

Shapes: B batch, T target/sequence length, S source length, D model width, H heads, L layers.

Attention maps come from ``attnlab.nn.capture`` (the blocks return only their outputs); ``step``
runs one new token through every layer's own fast path (generation). ``checkpoint_activations``
makes a stack keep no block's activations while it trains (they are recomputed in backward).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from .arguments import checked
from .blocks import DecoderBlock, EncoderBlock, _norm
from .cache import KVCache
from .capture import capture
from .masks import attention_mask_as_bool
from .positional import RotaryEmbedding

__all__ = ["TransformerEncoder", "TransformerDecoder", "Transformer", "checkpoint_activations"]


def checkpoint_activations(module: nn.Module, enabled: bool = True) -> int:
    """Activation checkpointing per block in every encoder and decoder stack inside ``module``:
    while training, a block's inner activations are not kept for the backward pass but
    recomputed there from its input (Chen et al., 2016), trading about one more forward per
    block for the memory of all but one block's activations. Returns the stacks changed.

    Examples:
        >>> enc = TransformerEncoder(2, input_dim=16, num_heads=4, dim_feedforward=32)
        >>> checkpoint_activations(enc)
        1
    """
    stacks = [m for m in module.modules()
              if isinstance(m, (TransformerEncoder, TransformerDecoder))]
    for stack in stacks:
        stack.checkpointed = enabled
    return len(stacks)


def _through(stack: nn.Module, layer: nn.Module, *args, **kwargs) -> Tensor:
    """``layer(*args, **kwargs)``; in a ``checkpointed`` stack, while training with gradients
    and no cache, through ``torch.utils.checkpoint`` (non-reentrant: it replays the random
    state, so the recomputed dropout masks are the ones drawn, and the gradients equal)."""
    training = stack.training and torch.is_grad_enabled()
    if stack.checkpointed and training and kwargs.get("cache") is None:
        return checkpoint(layer, *args, use_reentrant=False, **kwargs)
    return layer(*args, **kwargs)


def _bool_once(mask: Tensor | None) -> Tensor | None:
    """A stack's mask as bool, checked here once for every layer: each layer would read a
    float mask's values again (a host synchronisation per layer on a GPU); a bool one it
    never reads."""
    return None if mask is None else attention_mask_as_bool(mask)


def _final_norm(final_norm: bool | None, block_args: dict) -> nn.Module:
    """Pre-LN stacks end with a LayerNorm (the residual stream is never normalised otherwise)."""
    if final_norm is None:
        final_norm = block_args.get("norm_first", False)
    if not final_norm:
        return nn.Identity()
    return nn.LayerNorm(block_args["input_dim"], eps=block_args.get("layer_norm_eps", 1e-5),
                        bias=block_args.get("bias", True))


def _rotary_shorthand(rotary: bool, max_len: int, block_args: dict) -> dict:
    """``rotary=True``: one ``RotaryEmbedding`` (buffers only) shared by every layer's
    self-attention, passed as its ``pos_embeddings``."""
    if rotary and block_args.get("pos_embeddings") is None:
        head_dim = block_args["input_dim"] // block_args["num_heads"]
        block_args = {**block_args, "pos_embeddings": RotaryEmbedding(head_dim, max_len)}
    return block_args


def _maps(cache, names: list[str]) -> list[Tensor]:
    return [cache[name] for name in names]


class TransformerEncoder(nn.Module):
    """``num_layers`` encoder blocks applied in turn.

    Args:
        num_layers: number of blocks L.
        final_norm: a LayerNorm after the last block (default: only when norm_first).
        rotary: shorthand for a shared ``pos_embeddings=RotaryEmbedding(D // H, max_len)``.
        max_len: longest sequence for ``rotary``.
        **block_args: arguments of ``EncoderBlock`` (input_dim, num_heads, dim_feedforward, ...;
            parts given as modules, such as ``pos_embeddings``, are shared by every layer).

    Shape:
        x (B, T, D), mask broadcastable to (B, H, T, T) (True = may attend) -> (B, T, D).

    Examples:
        >>> enc = TransformerEncoder(2, input_dim=16, num_heads=4, dim_feedforward=32)
        >>> [m.shape for m in enc.get_attention_maps(torch.randn(1, 5, 16))]
        [torch.Size([1, 4, 5, 5]), torch.Size([1, 4, 5, 5])]
    """

    checkpointed = False  # ``checkpoint_activations``

    def __init__(self, num_layers: int, *, final_norm: bool | None = None, rotary: bool = False,
                 max_len: int = 4096, **block_args) -> None:
        super().__init__()
        checked("num_layers", num_layers)
        block_args = _rotary_shorthand(rotary, max_len, block_args)
        self.layers = nn.ModuleList([EncoderBlock(**block_args) for _ in range(num_layers)])
        self.norm = _final_norm(final_norm, block_args)

    @classmethod
    def of_layers(cls, layers: list[nn.Module], norm: nn.Module | None = None
                  ) -> "TransformerEncoder":
        """The stack of ``layers``, blocks built by the caller (a model builds its own from its
        config, as ``attnlab.models.CausalLM`` does), then ``norm`` (default: none). Its
        parameters have the names the constructor gives them (``layers.0...``, ``norm``).

        Examples:
            >>> blocks = [EncoderBlock(16, 4, 32, norm_first=True) for _ in range(2)]
            >>> enc = TransformerEncoder.of_layers(blocks, nn.LayerNorm(16))
            >>> enc(torch.randn(1, 5, 16)).shape
            torch.Size([1, 5, 16])
        """
        checked("num_layers", len(layers))
        stack = cls.__new__(cls)
        nn.Module.__init__(stack)
        stack.layers = nn.ModuleList(layers)
        stack.norm = nn.Identity() if norm is None else norm
        return stack

    def forward(self, x: Tensor, mask: Tensor | None = None, *, is_causal: bool = False,
                cache: list[KVCache] | None = None, positions: Tensor | None = None,
                score_bias: Tensor | None = None) -> Tensor:
        """Args: see ``EncoderBlock.forward`` (``cache``: one ``KVCache`` per layer;
        ``score_bias``: one float bias (B, H, T, T) added in every layer). Returns (B, T, D)."""
        mask = _bool_once(mask)
        for i, layer in enumerate(self.layers):
            x = _through(self, layer, x, mask, is_causal=is_causal, positions=positions,
                         score_bias=score_bias, cache=None if cache is None else cache[i])
        return self.norm(x)

    def get_attention_maps(self, x: Tensor, mask: Tensor | None = None, *,
                           is_causal: bool = False, **kwargs) -> list[Tensor]:
        """Every layer's attention weights, a list of L tensors (B, H, T, T), recorded by
        ``attnlab.nn.capture`` during one forward pass (``kwargs`` go to ``forward``)."""
        names = [f"layers.{i}.self_attn" for i in range(len(self.layers))]
        with capture(self, names, detach=False) as cache:
            self(x, mask, is_causal=is_causal, **kwargs)
        return _maps(cache, names)

    def step(self, x: Tensor, cache: list[KVCache], *, positions: Tensor | None = None,
             key_mask: Tensor | None = None) -> Tensor:
        """One new token (B, 1, D) through every layer's ``EncoderBlock.step`` (causal, cached),
        then the final norm: the same as ``forward(x, key_mask, is_causal=True, cache=cache)``.
        Returns (B, 1, D)."""
        for layer, layer_cache in zip(self.layers, cache):
            x = layer.step(x, layer_cache, positions=positions, key_mask=key_mask)
        return _norm(self.norm, x)

    def make_cache(self) -> list[KVCache]:
        """An empty key/value cache for each layer (for causal, incremental use); a layer whose
        attention has a sliding window gets a cache that keeps only what the window reads."""
        return [KVCache(window=getattr(layer.self_attn, "window", None)) for layer in self.layers]


class TransformerDecoder(nn.Module):
    """``num_layers`` decoder blocks applied in turn; each attends to the same memory.

    Args:
        num_layers: number of blocks L.
        final_norm: a LayerNorm after the last block (default: only when norm_first).
        **block_args: arguments of ``DecoderBlock``.

    Shape:
        x (B, T, D), memory (B, S, D_mem) -> (B, T, D).

    Examples:
        >>> dec = TransformerDecoder(2, input_dim=16, num_heads=4, dim_feedforward=32)
        >>> dec(torch.randn(1, 3, 16), torch.randn(1, 6, 16)).shape
        torch.Size([1, 3, 16])
    """

    checkpointed = False  # ``checkpoint_activations``

    def __init__(self, num_layers: int, *, final_norm: bool | None = None, rotary: bool = False,
                 max_len: int = 4096, **block_args) -> None:
        super().__init__()
        checked("num_layers", num_layers)
        block_args = _rotary_shorthand(rotary, max_len, block_args)
        self.layers = nn.ModuleList([DecoderBlock(**block_args) for _ in range(num_layers)])
        self.norm = _final_norm(final_norm, block_args)

    def forward(self, x: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, *, is_causal: bool = True,
                cache: list[dict[str, KVCache]] | None = None) -> Tensor:
        tgt_mask, memory_mask = _bool_once(tgt_mask), _bool_once(memory_mask)
        for i, layer in enumerate(self.layers):
            x = _through(self, layer, x, memory, tgt_mask, memory_mask, is_causal=is_causal,
                         cache=None if cache is None else cache[i])
        return self.norm(x)

    def get_attention_maps(self, x: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                           memory_mask: Tensor | None = None, *, is_causal: bool = True
                           ) -> tuple[list[Tensor], list[Tensor]]:
        """(self-attention maps [(B, H, T, T)] × L, cross-attention maps [(B, H, T, S)] × L),
        recorded by ``attnlab.nn.capture`` during one forward pass."""
        n = len(self.layers)
        self_names = [f"layers.{i}.self_attn" for i in range(n)]
        cross_names = [f"layers.{i}.cross_attn" for i in range(n)]
        with capture(self, self_names + cross_names, detach=False) as cache:
            self(x, memory, tgt_mask, memory_mask, is_causal=is_causal)
        return _maps(cache, self_names), _maps(cache, cross_names)

    def step(self, x: Tensor, memory: Tensor, cache: list[dict[str, KVCache]],
             memory_mask: Tensor | None = None) -> Tensor:
        """One new target token (B, 1, D) through every layer's ``DecoderBlock.step``, then the
        final norm: the same as ``forward(x, memory, None, memory_mask, cache=cache)``."""
        memory_mask = _bool_once(memory_mask)
        for layer, layer_cache in zip(self.layers, cache):
            x = layer.step(x, memory, layer_cache, memory_mask)
        return _norm(self.norm, x)

    def make_cache(self) -> list[dict[str, KVCache]]:
        """Per layer: a growing self-attention cache and a once-computed cross-attention one."""
        return [{"self": KVCache(), "cross": KVCache()} for _ in self.layers]


class Transformer(nn.Module):
    """Encoder–decoder stack without embeddings (Vaswani et al., 2017, Fig. 1).

    Args:
        num_encoder_layers: encoder blocks.
        num_decoder_layers: decoder blocks.
        **block_args: shared block arguments (input_dim, num_heads, dim_feedforward, dropout,
            norm_first, activation, ...).

    Shape:
        src (B, S, D), tgt (B, T, D); src_mask: source padding, broadcastable to (B, 1, 1, S),
        True = real token; tgt_mask: extra target mask (causality is always applied) -> (B, T, D).

    Examples:
        >>> model = Transformer(1, 1, input_dim=16, num_heads=4, dim_feedforward=32)
        >>> model(torch.randn(2, 6, 16), torch.randn(2, 3, 16)).shape
        torch.Size([2, 3, 16])
    """

    def __init__(self, num_encoder_layers: int = 6, num_decoder_layers: int = 6, **block_args) -> None:
        super().__init__()
        self.encoder = TransformerEncoder(num_encoder_layers, **block_args)
        self.decoder = TransformerDecoder(num_decoder_layers, **block_args)

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        return self.encoder(src, src_mask)

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None = None,
               tgt_mask: Tensor | None = None, *, cache=None) -> Tensor:
        return self.decoder(tgt, memory, tgt_mask, src_mask, cache=cache)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None) -> Tensor:
        return self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask)
