"""Decoder-only language model (the GPT family): tokens -> causal Transformer -> next-token logits.

Shapes: B batch, T sequence length, T0 prompt length, N new tokens, D model width, V vocabulary,
H heads, hd head width, L layers.

    h_0 = E[x] + P[pos];   h_l = Block_l(h_{l-1}) with causal self-attention;
    logits = Norm(h_L) Wᵀ               (W = E when ``tie_weights``; Press & Wolf, 2017)

Norm is LayerNorm (GPT-2) or RMSNorm, and the blocks' parts are the config's: GPT-2's, or the
Llama family's (RMSNorm, a gated feed-forward network, grouped-query attention, QK-norm, a
sliding window, RoPE with θ and scaling; ``causal_stack``).

A "decoder-only" model is the encoder stack with a causal mask: there is no cross-attention, so
``attnlab.nn.TransformerEncoder(is_causal=True)`` is exactly GPT-2's stack and goes through the
fused attention kernel's causal path. The model calls that stack ``decoder`` (what it is here);
weights stored under the old name ``encoder`` load too (``renamed.accept_old_names``).

Generation keeps a key/value cache per layer, so each new token costs one position's work
(O(T) attention) instead of re-running the whole sequence. Prompts of different lengths are
left-padded; each row's positions count from its own first real token, and padded keys are
masked, so a padded batch gives each row what that row gives alone. The token loop is
``attnlab.generation.decode_stream``; the prompt checks and the step function are in
``lm_generation.py``; the one-token fast path is ``CausalLM.step`` over the stack's own ``step``.

Positions come from ``attnlab.nn.POSITIONAL_KINDS``: the kind named by ``positional`` builds the
module added to the token embeddings (``positional_encoding``, None for rotary and ALiBi) and the
positional parts of every attention (``pos_embeddings``, ``attn_bias``).
"""
from __future__ import annotations

import math
from typing import Any, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..activation_names import GATED
from ..nn import (EncoderBlock, FeedForward, GatedFeedForward, KVCache, MultiheadAttention,
                  PositionalKind, TransformerEncoder, capture, make_norm, positional_kind)
from ..nn.quantize import linear
from ..settings import heads_divide_width
from ..step_protocol import check_token_ids
from .configs import CausalLMConfig
from .lm_generation import prepare, selector, stream_sliding, stream_tokens
from .renamed import accept_old_names

__all__ = ["CausalLM", "CausalLMConfig"]


def causal_stack(config: CausalLMConfig, kind: PositionalKind) -> TransformerEncoder:
    """The decoder stack ``config`` describes, built block by block from its fields: L
    causal-attention blocks (pre-LN GPT-2 blocks with ``norm_first``) sharing the positional
    parts of ``kind`` (rotary, with ``rope_theta`` and ``rope_scaling``, or ALiBi), then the
    final norm when pre-LN. The parts are the config's: LayerNorm or RMSNorm (``norm``), the
    two-layer or a gated feed-forward network (``ff``), attention with ``num_kv_heads``
    key/value heads, ``qkv_bias``, ``qk_norm`` and a ``sliding_window``."""
    D, H = config.model_dim, config.num_heads
    parts = kind.attention_parts(H, head_width(config), config.max_len,
                                 **_rope_options(config, kind))

    def norm(width: int) -> nn.Module:
        return make_norm(config.norm, width, eps=config.layer_norm_eps, bias=config.bias)

    blocks = [EncoderBlock(D, H, config.dim_feedforward, config.dropout,
                           norm_first=config.norm_first, attn=_attention(config, parts),
                           ff=_feed_forward(config), norm=norm)
              for _ in range(config.num_layers)]
    return TransformerEncoder.of_layers(blocks, norm(D) if config.norm_first else None)


def head_width(config: CausalLMConfig) -> int:
    """Each head's width hd: ``head_dim`` where the config declares one (Qwen3-0.6B: 1024
    wide, 16 heads of 128), else model_dim / num_heads."""
    return config.head_dim or config.model_dim // config.num_heads


def _rope_options(config: CausalLMConfig, kind: PositionalKind) -> dict[str, Any]:
    """``RotaryEmbedding``'s keyword options from the config's rope fields (rope only)."""
    if kind.qk is None:
        return {}
    return {"base": config.rope_theta, "scaling": config.rope_scaling,
            "factor": config.rope_factor, "low_freq_factor": config.rope_low_freq_factor,
            "high_freq_factor": config.rope_high_freq_factor,
            "original_max_len": config.rope_original_max_len}


def _attention(config: CausalLMConfig, parts: dict[str, nn.Module]) -> MultiheadAttention:
    # embed_dim = H·hd: the queries' width, which o_proj maps back to D (the course's
    # input_dim/embed_dim split; equal unless the config declares its own head_dim)
    D, H = config.model_dim, config.num_heads
    return MultiheadAttention(D, H * head_width(config), H, bias=config.bias,
                              dropout=config.attention_dropout, num_kv_heads=config.num_kv_heads,
                              qkv_bias=config.qkv_bias, qk_norm=config.qk_norm,
                              norm_eps=config.layer_norm_eps, window=config.sliding_window,
                              pos_embeddings=parts.get("pos_embeddings"),
                              attn_bias=parts.get("attn_bias"))


def _feed_forward(config: CausalLMConfig) -> nn.Module:
    """GPT-2's two-layer network with ``activation``, or the gated one ``ff`` names."""
    ff_dropout = config.dropout if config.ff_dropout is None else config.ff_dropout
    if config.ff in GATED:
        return GatedFeedForward(config.model_dim, config.dim_feedforward, ff_dropout,
                                activation=GATED[config.ff], bias=config.bias)
    return FeedForward(config.model_dim, config.dim_feedforward, ff_dropout,
                       activation=config.activation, bias=config.bias)


def positions_from_mask(attention_mask: Tensor) -> Tensor:
    """Per-row positions (B, T) that count real tokens only: a left-padded row's first real token
    is position 0, as if the row had no padding (padding itself gets position 0)."""
    return (attention_mask.long().cumsum(-1) - 1).clamp_min(0)


class CausalLM(nn.Module):
    """A GPT-style language model built from ``attnlab.nn``.

    ``CausalLM(config)`` builds the model a ``CausalLMConfig`` describes (``model.config`` is
    that object). ``CausalLM(vocab_size, model_dim=..., ...)``, the keyword form, builds the
    config once from the keywords (the config's field names; a keyword that names no field is
    a ``TypeError``) and then the same model. The fields:

    Args:
        vocab_size: number of token ids V.
        model_dim: width D.
        num_heads: attention heads H (D must be divisible by H unless ``head_dim`` is given).
        num_layers: blocks L.
        dim_feedforward: feed-forward width (default 4·D, as in GPT-2).
        max_len: longest sequence (positions 0..max_len-1).
        dropout: dropout on the embeddings and in every block.
        norm_first: pre-LN blocks plus a final LayerNorm (GPT-2); False gives the paper's post-LN.
        tie_weights: share the token embedding with the output projection.
        positional: a name in ``attnlab.nn.POSITIONAL_KINDS``: "learned" (GPT-2), "sinusoidal"
            (Vaswani et al.), "rope" (rotary, inside attention), "alibi" (a distance bias on the
            scores) or "none".
        activation: feed-forward activation ("gelu", "gelu_tanh" = GPT-2's gelu_new, "relu", "silu").
        layer_norm_eps: LayerNorm epsilon.
        bias: biases in the linear layers, attention and LayerNorms (False: none, as
            nanoGPT's ``bias=False``).
        attention_dropout: dropout on the attention weights.
        ff_dropout: dropout inside each feed-forward network, after its first layer; None: the
            same as ``dropout`` (the course's block). GPT-2's block has none there (0.0, what
            ``attnlab train lm`` uses unless told otherwise).
        norm: "layer" (LayerNorm) or "rms" (RMSNorm, Llama's) in the blocks and at the end.
        ff: "mlp" (two layers with ``activation``), "swiglu" or "geglu" (gated, no
            ``activation``).
        num_kv_heads: key/value heads (grouped-query attention; None: ``num_heads``).
        head_dim: each head's width (None: model_dim / num_heads); the attention's queries are
            num_heads · head_dim wide and its output projection maps them back to D.
        qkv_bias: biases on the query/key/value projection (None: ``bias``'s).
        qk_norm: RMSNorm of each head's queries and keys before RoPE (Qwen3).
        sliding_window: each token attends to the last W tokens only (None: all).
        rope_theta, rope_scaling, rope_factor, rope_low_freq_factor, rope_high_freq_factor,
            rope_original_max_len: RoPE's base θ and frequency scaling (``positional="rope"``;
            ``attnlab.nn.positional.rope_frequencies``).

    Raises:
        ValueError: for a field outside its declared range or choices (``CausalLMConfig``
            checks them, naming the field), no ``vocab_size``, or heads that do not divide D.

    Shape:
        input_ids (B, T) int64, attention_mask (B, T) with 1 = real token -> logits (B, T, V).

    Examples:
        >>> lm = CausalLM(CausalLMConfig(vocab_size=100, model_dim=32, num_layers=2, max_len=64))
        >>> lm.generate(torch.tensor([[1, 5, 7]]), 4).shape
        torch.Size([1, 7])
        >>> CausalLM(100, model_dim=32, num_layers=2, max_len=64).config == lm.config
        True
    """

    def __init__(self, config: CausalLMConfig | int | None = None, /, **fields: Any) -> None:
        super().__init__()
        args = () if config is None else (config,)
        config = CausalLMConfig.of_arguments("CausalLM", args, fields, ("vocab_size",))
        config.require("CausalLM", "vocab_size")
        if config.head_dim is None and (broken := heads_divide_width(
                config.model_dim, config.num_heads, names=("model_dim", "num_heads"))):
            raise ValueError(broken)  # before the positional parts, which need the head width
        self.config = config
        self.vocab_size, self.model_dim, self.max_len = (config.vocab_size, config.model_dim,
                                                         config.max_len)
        self.positional = config.positional
        kind = positional_kind(config.positional)
        self.token_embedding = nn.Embedding(config.vocab_size, config.model_dim)
        # None for kinds that act in attention (rope, alibi)
        self.positional_encoding = kind.input_module(config.model_dim, config.max_len)
        self.embed_dropout = nn.Dropout(config.dropout)
        self.decoder = causal_stack(config, kind)
        self.lm_head = nn.Linear(config.model_dim, config.vocab_size, bias=False)
        self._init_weights(config.num_layers)
        if config.tie_weights:
            self.lm_head.weight = self.token_embedding.weight
        # weights under the old names load (models/renamed.py; docs/compatibility.md)
        accept_old_names(self, {"encoder": "decoder", "pos_encoding": "positional_encoding"})

    def _init_weights(self, num_layers: int) -> None:
        """Every weight matrix and embedding from N(0, σ²) with σ = √(2 / 5D) (SmallInit,
        Nguyen & Salazar 2019: 0.023 at GPT-2's D = 768, where GPT-2 draws 0.02), biases zero,
        and the two projections of each block that add into the residual stream (attention's
        output, the feed-forward network's second layer) from N(0, (σ / √(2L))²), GPT-2's
        scaling (Radford et al. 2019, section 2.3), so that the stream's variance does not grow
        with the depth L. The layers' own defaults (attention's Xavier, ``nn.Linear``'s
        uniform) train a language model more slowly, and GPT-2's fixed 0.02 starts a narrow one
        too small to learn in the same steps (benchmarks/RESULTS.md, "lm_quality_probe")."""
        std = math.sqrt(2 / (5 * self.model_dim))
        into_stream = set()
        for block in self.decoder.layers:
            ff = block.linear_net  # its last layer: FeedForward's [-1], the gated one's down_proj
            out = ff.down_proj if isinstance(ff, GatedFeedForward) else ff[-1]
            into_stream |= {id(block.self_attn.o_proj.weight), id(out.weight)}
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                weight = module.weight
                nn.init.normal_(weight, std=std / math.sqrt(2 * num_layers)
                                if id(weight) in into_stream else std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    @classmethod
    def from_config(cls, config: CausalLMConfig) -> "CausalLM":
        """The model a ``CausalLMConfig`` describes (randomly initialised): ``CausalLM(config)``.

        Examples:
            >>> CausalLM.from_config(CausalLMConfig(vocab_size=50, model_dim=16)).config.num_heads
            4
        """
        return cls(config)

    # ---- the forward pass ------------------------------------------------------------------
    def embed(self, input_ids: Tensor, positions: Tensor | None = None) -> Tensor:
        """Token embeddings plus the positional module's term, if any: (B, T) -> (B, T, D).

        ``positions`` is (T,) or (B, T) (default 0..T-1); rotary and ALiBi models use them in
        attention instead.
        """
        x = self.token_embedding(input_ids)  # (B, T, D)
        if self.positional_encoding is not None:
            x = self.positional_encoding(x, positions=positions)
        return self.embed_dropout(x)

    def _check_ids(self, input_ids: Tensor) -> None:
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be (B, T), got shape {tuple(input_ids.shape)}")
        if input_ids.dtype.is_floating_point:
            raise ValueError(f"input_ids must be integer token ids, got dtype {input_ids.dtype}")

    def hidden_states(self, input_ids: Tensor, attention_mask: Tensor | None = None, *,
                      positions: Tensor | None = None, cache: list[KVCache] | None = None) -> Tensor:
        """The last layer's (final-normed) states (B, T, D); see ``forward`` for the arguments."""
        self._check_ids(input_ids)
        B, T = input_ids.shape
        mask = None
        if attention_mask is not None:
            if attention_mask.shape != input_ids.shape:
                raise ValueError(f"attention_mask must have the shape of input_ids {(B, T)}, "
                                 f"got {tuple(attention_mask.shape)}")
            if positions is None:
                positions = positions_from_mask(attention_mask)
            mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T) keys that are real
        # positions None: 0..T-1, made by the positional parts (after the cache, in attention)
        x = self.embed(input_ids, positions)
        return self.decoder(x, mask, is_causal=True, cache=cache, positions=positions)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, *,
                positions: Tensor | None = None) -> Tensor:
        """Next-token logits at every position.

        Args:
            input_ids: (B, T) token ids.
            attention_mask: (B, T), 1 for real tokens and 0 for padding. Padded keys are never
                attended to and positions count real tokens only (left padding is then exact).
            positions: (T,) or (B, T) explicit positions (default 0..T-1, or from the mask),
                each below ``max_len``. Their values are not read here (no host
                synchronisation in the forward pass): one outside the table is an
                ``IndexError`` on the CPU and a device-side assert on a GPU.

        Returns:
            logits (B, T, V); position t scores token t+1 from tokens 0..t.
        """
        return self.lm_head(self.hidden_states(input_ids, attention_mask, positions=positions))

    @torch.no_grad()
    def get_attention_maps(self, input_ids: Tensor) -> list[Tensor]:
        """Every layer's causal attention weights on ``input_ids`` (B, T): L × (B, H, T, T),
        recorded by ``attnlab.nn.capture`` during one forward pass."""
        names = [f"decoder.layers.{i}.self_attn" for i in range(len(self.decoder.layers))]
        with capture(self, names) as cache:
            self.hidden_states(input_ids)
        return [cache[name] for name in names]

    def step(self, input_ids: Tensor, cache: list[KVCache], *, positions: Tensor,
             key_mask: Tensor | None = None) -> Tensor:
        """Next-token logits after one new token per row, from the per-layer caches: the fast
        path of generation (eval mode), equal to the last position of ``forward``.

        Args:
            input_ids: (B, 1) the newest tokens.
            cache: the per-layer caches holding every earlier token (``KVCache.reserve`` them).
            positions: (B, 1) the new tokens' positions (counting real tokens only).
            key_mask: bool (B, 1, 1, T_k), True at real keys (padded prompts), or None.

        Returns:
            logits (B, V).
        """
        m = self._modules  # dict lookups, not nn.Module.__getattr__: a step is call-bound
        x = F.embedding(input_ids, m["token_embedding"]._parameters["weight"])  # (B, 1, D)
        positional_encoding = m.get("positional_encoding")  # None (not a submodule): rope, alibi
        if positional_encoding is not None:
            x = positional_encoding(x, positions=positions)
        h = m["decoder"].step(x, cache, positions=positions, key_mask=key_mask)  # (B, 1, D)
        return linear(m["lm_head"], h[:, 0])  # (B, V)

    # ---- generation ----------------------------------------------------------------------
    def generate(self, input_ids: Tensor, max_new_tokens: int, *, do_sample: bool = False,
                 temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                 eos_token_id: int | None = None, use_cache: bool = True,
                 attention_mask: Tensor | None = None, pad_token_id: int | None = None,
                 generator: torch.Generator | None = None) -> Tensor:
        """Continue each prompt by up to ``max_new_tokens`` tokens (Hugging Face's arguments).

        Args:
            input_ids: (B, T0) prompts; rows of different lengths are padded (any side) and
                described by ``attention_mask``.
            max_new_tokens: how many tokens to add.
            do_sample: sample from softmax(logits / temperature) instead of the argmax.
            temperature, top_k, top_p: sampling controls (see ``attnlab.generation``).
            eos_token_id: a row stops when it emits this (or any id of a list, as in Hugging
                Face); later positions hold ``pad_token_id`` (default: the first EOS id).
                Generation ends early once every row has stopped.
            use_cache: keep keys/values (O(T) per step); False re-runs the whole sequence.
            attention_mask: (B, T0), 1 = real token. Right-padded rows are moved to left padding.
            pad_token_id: filler after EOS (default: ``eos_token_id``).
            generator: a ``torch.Generator`` for reproducible sampling.

        Returns:
            (B, T0 + n) token ids: the (left-aligned) prompts followed by n <= max_new_tokens
            new tokens. Deterministic when ``do_sample=False``.

        Raises:
            ValueError: if the prompt plus ``max_new_tokens`` exceeds ``max_len``, for an id
                outside the vocabulary, or for bad sampling options.
        """
        input_ids, attention_mask = prepare(self, input_ids, max_new_tokens, attention_mask)
        new = list(stream_tokens(self, input_ids, max_new_tokens, attention_mask,
                                 do_sample=do_sample, temperature=temperature, top_k=top_k,
                                 top_p=top_p, eos_token_id=eos_token_id, use_cache=use_cache,
                                 pad_token_id=pad_token_id, generator=generator))
        return torch.cat([input_ids, *new], dim=1)

    def stream(self, input_ids: Tensor, max_new_tokens: int, *,
               attention_mask: Tensor | None = None, slide: bool = False,
               **options) -> Iterator[Tensor]:
        """Like ``generate``, but yields each step's new tokens (B, 1) as soon as they exist
        (the CLI prints them while the next one is computed). Same arguments, and:

        Args:
            slide: for unpadded prompts, continue past ``max_len``: when the context is full,
                keep its last max_len // 2 tokens, re-read them, and continue (each round is
                cached; the model never sees more than max_len tokens). The prompt is cut to
                its last max_len - 1 tokens if longer.
        """
        selector(options.get("do_sample", False), options.get("temperature", 1.0),
                 options.get("top_k"), options.get("top_p"), None)  # bad options fail here
        if slide and attention_mask is None and input_ids.shape[-1] + max_new_tokens > self.max_len:
            prepare(self, input_ids[:, : 1], 0, None)  # validate the ids' shape and dtype
            check_token_ids(input_ids, self.vocab_size)  # and all of their values
            return stream_sliding(self, input_ids[:, -(self.max_len - 1):], max_new_tokens,
                                  options)
        input_ids, attention_mask = prepare(self, input_ids, max_new_tokens, attention_mask)
        return stream_tokens(self, input_ids, max_new_tokens, attention_mask, **options)
