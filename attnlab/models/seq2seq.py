"""The encoder–decoder Transformer for translation (Vaswani et al., 2017, Fig. 1).

Shapes: B batch, S source length, T target length, D model width, V_s / V_t vocabulary sizes,
L decoder layers.

    memory = Encoder(PE(√D · E_src[src]))                               (B, S, D)
    logits = Decoder(PE(√D · E_tgt[tgt]), memory) · Wᵀ                  (B, T, V_t)

The decoder's self-attention is causal; its cross-attention takes queries from the target side
and keys/values from the last encoder layer (a T×S map). Training feeds the whole target with
SOS prepended (teacher forcing); ``generate`` starts from SOS and appends the predicted token
until EOS. Token ids default to attnlab's tokenisers' (pad 0, sos 1, eos 2); a model converted
from Marian has Marian's (its decoder starts from the pad id).
"""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from ..generation import translate_from_start
from ..nn import Transformer, capture, positional_kind
from ..nn.positional import input_kinds, position_range
from ..nn.cache import KVCache
from ..step_protocol import check_token_ids
from .configs import Seq2SeqConfig
from .renamed import accept_old_names

__all__ = ["Seq2SeqTransformer", "Seq2SeqConfig"]

# the registered kinds this model takes: both halves add them to their embeddings
ADDITIVE = input_kinds(with_none=False)


class Seq2SeqTransformer(nn.Module):
    """Token embeddings, positional encoding, ``attnlab.nn.Transformer`` and an output layer.

    ``Seq2SeqTransformer(config)`` builds the model a ``Seq2SeqConfig`` describes
    (``model.config`` is that object); the keyword form ``Seq2SeqTransformer(src_vocab_size,
    tgt_vocab_size, **fields)`` builds the config once from its arguments (a name that is no
    field is a ``TypeError``) and then the same model.

    Embeddings are multiplied by √D (§3.4 of the paper) so that they are not drowned by the
    positional encoding; with ``tie_embeddings`` the output layer reuses the target embedding
    matrix (Press & Wolf, 2017), which is then initialised with std D^-1/2 so that √D·E has unit
    scale.

    Args:
        src_vocab_size: source vocabulary size V_s.
        tgt_vocab_size: target vocabulary size V_t.
        model_dim: width D.
        num_heads: attention heads (D must be divisible by it).
        num_layers: encoder layers and decoder layers (each; see the two overrides below).
        dim_feedforward: hidden width of the feed-forward networks.
        dropout: dropout on embeddings and every sub-layer.
        num_encoder_layers: override ``num_layers`` for the encoder.
        num_decoder_layers: override ``num_layers`` for the decoder.
        norm_first: pre-LN blocks instead of the paper's post-LN.
        activation: feed-forward activation.
        max_len: longest source or target sequence.
        positional: "sinusoidal" (the paper) or "learned".
        tie_embeddings: share the target embedding with the output projection.
        final_logits_bias: add a fixed bias buffer (V_t,) to the logits, saved in the state
            dict and never trained (Marian's; zero until weights are copied in).
        pad_id, sos_id, eos_id: special token ids (0, 1, 2 in attnlab's tokenisers).

    Raises:
        ValueError: for non-positive vocabulary sizes or an unknown ``positional``.

    Shape:
        src (B, S), tgt (B, T) int64; src_mask (B, S) bool, True = real token (default:
        ``src != pad_id``) -> logits (B, T, V_t).

    Examples:
        >>> model = Seq2SeqTransformer(20, 30, model_dim=16, num_heads=2, num_layers=1,
        ...                            dim_feedforward=32, dropout=0.0)
        >>> model(torch.tensor([[5, 6, 2]]), torch.tensor([[1, 7]])).shape
        torch.Size([1, 2, 30])
    """

    def __init__(self, config: Seq2SeqConfig | int | None = None, /, *args: Any,
                 **fields: Any) -> None:
        super().__init__()
        args = args if config is None else (config, *args)
        config = Seq2SeqConfig.of_arguments("Seq2SeqTransformer", args, fields,
                                            ("src_vocab_size", "tgt_vocab_size"))
        config.require("Seq2SeqTransformer", "src_vocab_size", "tgt_vocab_size")
        kind = positional_kind(config.positional, ADDITIVE)
        self.config = config
        D, V_t = config.model_dim, config.tgt_vocab_size
        self.model_dim, self.pad_id, self.sos_id, self.eos_id = (D, config.pad_id, config.sos_id,
                                                                 config.eos_id)
        self.src_embedding = nn.Embedding(config.src_vocab_size, D)
        self.tgt_embedding = nn.Embedding(V_t, D)
        for emb in (self.src_embedding, self.tgt_embedding):
            nn.init.normal_(emb.weight, std=D**-0.5)
        self.positional_encoding = kind.input_module(D, config.max_len)
        self.dropout = nn.Dropout(config.dropout)
        self.transformer = Transformer(
            config.num_encoder_layers or config.num_layers,
            config.num_decoder_layers or config.num_layers,
            input_dim=D, num_heads=config.num_heads, dim_feedforward=config.dim_feedforward,
            dropout=config.dropout, norm_first=config.norm_first, activation=config.activation)
        self.output = nn.Linear(D, V_t, bias=False)
        if config.tie_embeddings:
            self.output.weight = self.tgt_embedding.weight
        if config.final_logits_bias:  # a buffer, as in Marian: saved with the weights, never trained
            self.register_buffer("final_logits_bias", torch.zeros(V_t))  # (V_t,)
        # weights under the old name "positional" load (docs/compatibility.md)
        accept_old_names(self, {"positional": "positional_encoding"})

    @classmethod
    def from_config(cls, config: Seq2SeqConfig) -> "Seq2SeqTransformer":
        """The model a ``Seq2SeqConfig`` describes (randomly initialised).

        Examples:
            >>> Seq2SeqTransformer.from_config(Seq2SeqConfig(src_vocab_size=20, tgt_vocab_size=30)).config.positional
            'sinusoidal'
        """
        return cls(config)

    # ---- the two halves ----------------------------------------------------------------
    def _embed(self, ids: Tensor, embedding: nn.Embedding, offset: int = 0) -> Tensor:
        x = embedding(ids) * math.sqrt(self.model_dim)  # (B, T, D)
        # after a cache of ``offset`` tokens: checked as integers, no tensor read
        positions = None if offset == 0 else position_range(
            offset, ids.shape[1], max_len=self.positional_encoding.max_len, device=ids.device)
        return self.dropout(self.positional_encoding(x, positions=positions))

    def source_mask(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """The (B, 1, 1, S) key mask of the source: ``src_mask`` if given, else ``src != pad_id``.

        Raises:
            ValueError: if src is not (B, S) or src_mask is not (B, S).
        """
        if src.ndim != 2:
            raise ValueError(f"src must be (B, S) token ids, got shape {tuple(src.shape)}")
        if src_mask is None:
            return (src != self.pad_id)[:, None, None, :]  # (B, 1, 1, S)
        if src_mask.shape != src.shape:
            raise ValueError(f"src_mask must have the shape of src {tuple(src.shape)}, "
                             f"got {tuple(src_mask.shape)}")
        return src_mask.bool()[:, None, None, :]

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Run the encoder once: returns (memory (B, S, D), key mask (B, 1, 1, S))."""
        mask = self.source_mask(src, src_mask)
        return self.transformer.encode(self._embed(src, self.src_embedding), mask), mask

    def decode(self, tgt: Tensor, memory: Tensor, memory_mask: Tensor | None = None, *,
               cache: list[dict[str, KVCache]] | None = None, last_only: bool = False) -> Tensor:
        """Target logits given the encoder memory.

        Args:
            tgt: (B, T) target ids; with a cache, only the tokens the cache has not seen.
            memory: (B, S, D) from ``encode``.
            memory_mask: (B, 1, 1, S) from ``encode``.
            cache: from ``make_cache``; positions continue after the cached length.
            last_only: project only the last position (generation needs nothing else).

        Returns:
            logits (B, T, V_t), or (B, 1, V_t) with ``last_only``.
        """
        offset = 0 if cache is None else cache[0]["self"].length
        x = self._embed(tgt, self.tgt_embedding, offset)  # (B, T, D)
        h = self.transformer.decode(x, memory, memory_mask, cache=cache)  # (B, T, D)
        return self._logits(h[:, -1:] if last_only else h)

    def _logits(self, h: Tensor) -> Tensor:  # (..., D) -> (..., V_t)
        logits = self.output(h)
        if self.config.final_logits_bias:
            logits = logits + self.final_logits_bias
        return logits

    def make_cache(self) -> list[dict[str, KVCache]]:
        """Per decoder layer: a growing self-attention cache and a once-computed cross one."""
        return self.transformer.decoder.make_cache()

    def step(self, token: Tensor, memory: Tensor, memory_mask: Tensor | None,
             cache: list[dict[str, KVCache]]) -> Tensor:
        """Next-token logits (B, V_t) after one new target token (B, 1), from the caches: the fast
        path of generation (eval mode), equal to ``decode(..., cache=cache)[:, -1]``."""
        x = self._embed(token, self.tgt_embedding, cache[0]["self"].length)  # (B, 1, D)
        h = self.transformer.decoder.step(x, memory, cache, memory_mask)  # (B, 1, D)
        return self._logits(h[:, 0])  # (B, V_t)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Teacher forcing: logits (B, T, V_t) for every target position at once."""
        memory, mask = self.encode(src, src_mask)
        return self.decode(tgt, memory, mask)

    @torch.no_grad()
    def cross_attention(self, src: Tensor, tgt: Tensor,
                        src_mask: Tensor | None = None) -> list[Tensor]:
        """Every decoder layer's cross-attention weights for a given target: L × (B, H, T, S),
        recorded by ``attnlab.nn.capture`` during one forward pass."""
        layers = self.transformer.decoder.layers
        names = [f"transformer.decoder.layers.{i}.cross_attn" for i in range(len(layers))]
        with capture(self, names) as cache:
            self(src, tgt, src_mask)
        return [cache[name] for name in names]

    # ---- generation --------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, src: Tensor, max_new_tokens: int, *, num_beams: int = 1,
                 length_penalty: float = 1.0, src_mask: Tensor | None = None,
                 eos_token_id: int | None = None, use_cache: bool = True,
                 finite: list[bool] | None = None) -> Tensor:
        """Translate: start from SOS and append tokens until EOS (greedy or beam search).

        The encoder runs once. With ``use_cache`` each step feeds the decoder only the newest
        token: self-attention keys/values of earlier tokens come from a KV cache and the
        cross-attention keys/values of the memory are computed once. Deterministic.

        Args:
            src: (B, S) source ids, padded with ``pad_id``.
            max_new_tokens: at most this many tokens after SOS.
            num_beams: 1 = greedy; more = beam search.
            length_penalty: beam search's exponent on the length (see ``attnlab.generation``).
            src_mask: (B, S) True = real token (default: ``src != pad_id``).
            eos_token_id: stop token (default: the model's ``eos_id``).
            use_cache: use the KV cache (same tokens, faster).
            finite: when given, gets per row whether every step's logits were finite (a
                model finite at the first step may overflow to NaN at a later one).

        Returns:
            (B, 1 + N) ids: SOS, the generated tokens (EOS included), then padding — the
            Hugging Face layout.

        Raises:
            ValueError: for a source id outside the vocabulary, or a target longer than
                ``max_len``.

        Examples:
            >>> model = Seq2SeqTransformer(20, 30, model_dim=16, num_heads=2, num_layers=1)
            >>> model.generate(torch.tensor([[5, 6, 2]]), 20, num_beams=4).shape[0]
            1
        """
        # checked once, here: the forward passes read no values
        check_token_ids(src, self.src_embedding.num_embeddings, "src")

        def encoded():  # the step function over the encoded source, made in eval mode
            return _Seq2SeqStep(self, *self.encode(src, src_mask), use_cache)

        return translate_from_start(self, encoded, src.shape[0], max_new_tokens,
                                    num_beams=num_beams, length_penalty=length_penalty,
                                    eos_token_id=eos_token_id, device=src.device,
                                    finite=finite)


class _Seq2SeqStep:
    """The ``attnlab.generation`` step function of a ``Seq2SeqTransformer`` and one memory."""

    def __init__(self, model: Seq2SeqTransformer, memory: Tensor, mask: Tensor,
                 use_cache: bool) -> None:
        self.model, self.memory, self.mask = model, memory, mask
        self.cache = model.make_cache() if use_cache else None

    def __call__(self, tokens: Tensor) -> Tensor:  # (B, T) -> (B, V_t)
        if self.cache is None:
            return self.model.decode(tokens, self.memory, self.mask, last_only=True)[:, -1]
        tokens = tokens[:, self.cache[0]["self"].length:]  # only what the cache has not seen
        if tokens.shape[1] == 1:  # the fast path: one new token through every layer's step
            return self.model.step(tokens, self.memory, self.mask, self.cache)
        return self.model.decode(tokens, self.memory, self.mask, cache=self.cache,
                                 last_only=True)[:, -1]

    def reorder(self, index: Tensor) -> None:
        self.memory = self.memory.index_select(0, index)  # (B', S, D)
        self.mask = self.mask.index_select(0, index)
        for layer in self.cache or ():
            for cache in layer.values():
                cache.reorder(index)
