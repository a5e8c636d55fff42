"""Hugging Face ``MarianMTModel`` <-> ``attnlab.models.Seq2SeqTransformer``, weights copied.

Shapes: D model width, F feed-forward width, V_s / V_t source / target vocabulary sizes.

Marian is the paper's post-LN encoder–decoder with sinusoidal positions, so every weight has a
place in ``Seq2SeqTransformer``. One layout differs: Marian's position table puts all sines in
features [0, ⌈D/2⌉) and all cosines after them, while ``attnlab.nn.PositionalEncoding``
interleaves them (sin in even features, cos in odd ones, the same frequencies). Rather than add
a second table layout, the conversion renames the residual features: with ``perm`` such that
``ours[..., j] = marian[..., perm[j]]``, every tensor that reads the residual stream has its
input columns permuted, every tensor that writes it its output rows, and LayerNorm its
weight and bias. LayerNorm (a mean and variance over features), attention and the feed-forward
network commute with a permutation applied alike to their inputs and parameters, so every
hidden state of ours is Marian's with its features permuted, and the logits are the same
(tested in tests/interop/test_hf_marian.py). The export applies the inverse permutation with
the same code (``_copy_weights``; tested in tests/interop/test_hf_marian_export.py).

Marian adds a fixed buffer to its logits, ``final_logits_bias`` (the trained output bias of the
original Marian model: non-zero in opus-mt checkpoints, zero in a model built from a config).
A non-zero one becomes ``Seq2SeqTransformer(final_logits_bias=True)``'s buffer of the same name,
indexed by token (nothing to permute), and is exported back.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .weights import ACT_TO_HF as _ACT_TO_HF
from .weights import activation as _activation
from .weights import copy as _copy
from .weights import copy_linear as _copy_linear

__all__ = ["marian_to_seq2seq", "seq2seq_to_marian", "residual_index"]

# positions compared with Marian's own table: the tables are computed in float64 (Marian) and
# float32 (attnlab) and drift apart by ~pos·1e-8, so only a prefix is held to 1e-5
_CHECKED_POSITIONS = 64


def _halves_to_interleaved(D: int) -> Tensor:
    """perm (D,) with ``interleaved[..., j] = halves[..., perm[j]]``: sin_i at 2i, cos_i at 2i+1."""
    n_sin = (D + 1) // 2  # Marian's "sentinel": ⌈D/2⌉ sines, then ⌊D/2⌋ cosines
    perm = torch.empty(D, dtype=torch.long)
    perm[0::2] = torch.arange(n_sin)
    perm[1::2] = n_sin + torch.arange(D // 2)
    return perm


def residual_index(D: int, *, to_marian: bool) -> Tensor:
    """idx (D,) with ``out[..., j] = in[..., idx[j]]`` from attnlab's residual features to
    Marian's (``to_marian``) or back: ``perm`` on import, ``perm⁻¹`` on export."""
    perm = _halves_to_interleaved(D)
    return torch.argsort(perm) if to_marian else perm


def _check_position_table(hf) -> None:
    from ..nn.positional import sinusoidal_table

    table = hf.model.encoder.embed_positions.weight  # (max_len, D)
    n, D = min(_CHECKED_POSITIONS, table.shape[0]), table.shape[1]
    if not torch.allclose(table[:n, _halves_to_interleaved(D)], sinusoidal_table(n, D),
                          atol=1e-5, rtol=1e-5):
        raise ValueError("marian: the position table is not the sin-halves / cos-halves "
                         "sinusoid this conversion assumes")


def _check_config(hf) -> None:
    c = hf.config
    pairs = (("encoder_attention_heads", "decoder_attention_heads"),
             ("encoder_ffn_dim", "decoder_ffn_dim"))
    for enc, dec in pairs:
        if getattr(c, enc) != getattr(c, dec):
            raise ValueError(f"marian: {enc} ({getattr(c, enc)}) != {dec} ({getattr(c, dec)}); "
                             f"Seq2SeqTransformer uses one value for both stacks")
    for name in ("encoder_layerdrop", "decoder_layerdrop"):
        if getattr(c, name, 0.0):
            raise ValueError(f"marian: {name}={getattr(c, name)} (skipping layers while "
                             f"training) is not supported; expected 0.0")
    if isinstance(c.eos_token_id, (list, tuple)):
        raise ValueError(f"marian: eos_token_id {c.eos_token_id!r} is a list; "
                         f"Seq2SeqTransformer stops at one id")
    if c.pad_token_id is None:
        raise ValueError("marian: pad_token_id is None; the source mask and the start token need it")


class _FeatureWalk:
    """Copies weights between our modules and Marian's in one direction, renaming the residual
    features: ``out[..., j] = in[..., idx[j]]`` with ``idx = perm`` on import and ``perm⁻¹`` on
    export (the same walk with the inverse index)."""

    def __init__(self, D: int, *, to_marian: bool):
        self.to_marian = to_marian
        self.idx = residual_index(D, to_marian=to_marian)

    def reads(self, w: Tensor) -> Tensor:  # (out, D): input columns read the residual stream
        return w[:, self.idx]

    def writes(self, w: Tensor) -> Tensor:  # (D, in) or (D,): output rows write it
        return w[self.idx]

    @staticmethod
    def keep(w: Tensor) -> Tensor:
        return w

    def move(self, ours: Tensor, theirs: Tensor, f) -> None:
        if self.to_marian:
            _copy(theirs, f(ours))
        else:
            _copy(ours, f(theirs))

    def linear(self, ours: nn.Linear, theirs: nn.Linear, weight, bias) -> None:
        self.move(ours.weight, theirs.weight, weight)
        self.move(ours.bias, theirs.bias, bias)

    def norm(self, ours: nn.LayerNorm, theirs: nn.LayerNorm) -> None:
        self.linear(ours, theirs, self.writes, self.writes)

    def attention(self, ours, theirs) -> None:  # cross-attention K/V read the encoder's stream
        projs = (theirs.q_proj, theirs.k_proj, theirs.v_proj)
        if self.to_marian:
            wq, wk, wv, bq, bk, bv = ours.get_qkv()  # each (D, D) / (D,)
            for proj, w, b in zip(projs, (wq, wk, wv), (bq, bk, bv)):
                _copy_linear(proj, self.reads(w), b)
        else:
            ours.set_qkv(*(self.reads(p.weight) for p in projs), *(p.bias for p in projs))
        self.linear(ours.o_proj, theirs.out_proj, self.writes, self.writes)

    def feedforward(self, ours, theirs) -> None:
        self.linear(ours[0], theirs.fc1, self.reads, self.keep)
        self.linear(ours[3], theirs.fc2, self.writes, self.writes)

    def encoder_layer(self, ours, theirs) -> None:
        self.attention(ours.self_attn, theirs.self_attn)
        self.feedforward(ours.linear_net, theirs)
        self.norm(ours.norm1, theirs.self_attn_layer_norm)
        self.norm(ours.norm2, theirs.final_layer_norm)

    def decoder_layer(self, ours, theirs) -> None:
        self.attention(ours.self_attn, theirs.self_attn)
        self.attention(ours.cross_attn, theirs.encoder_attn)
        self.feedforward(ours.linear_net, theirs)
        self.norm(ours.norm1, theirs.self_attn_layer_norm)
        self.norm(ours.norm2, theirs.encoder_attn_layer_norm)
        self.norm(ours.norm3, theirs.final_layer_norm)


@torch.no_grad()
def _copy_weights(model: nn.Module, hf, *, to_marian: bool, embed_scale: float = 1.0) -> None:
    """Copy every weight between ``model`` and ``hf``, renaming the residual features.

    ``to_marian=False`` (import): ``ours[..., j] = marian[..., perm[j]]``; ``to_marian=True``
    (export): ``marian[..., i] = ours[..., perm⁻¹[i]]`` — the same walk with the inverse index.
    ``embed_scale`` divides Marian's token embeddings on import (√D when Marian does not scale).
    """
    walk = _FeatureWalk(model.model_dim, to_marian=to_marian)
    enc, dec = hf.model.encoder, hf.model.decoder

    def embedding(w: Tensor) -> Tensor:
        return walk.reads(w) / embed_scale

    walk.move(model.src_embedding.weight, enc.embed_tokens.weight, embedding)
    walk.move(model.tgt_embedding.weight, dec.embed_tokens.weight, embedding)
    if model.output.weight is not model.tgt_embedding.weight:  # untied on our side
        walk.move(model.output.weight, hf.lm_head.weight, walk.reads)
    for ours, theirs in zip(model.transformer.encoder.layers, enc.layers, strict=True):
        walk.encoder_layer(ours, theirs)
    for ours, theirs in zip(model.transformer.decoder.layers, dec.layers, strict=True):
        walk.decoder_layer(ours, theirs)
    if model.config.final_logits_bias:  # indexed by token, not by feature: no renaming
        walk.move(model.final_logits_bias, hf.final_logits_bias[0], walk.keep)


def marian_to_seq2seq(hf) -> nn.Module:
    """The ``Seq2SeqTransformer`` equivalent to a ``MarianMTModel`` (see ``from_hf``).

    Raises:
        ValueError: naming the setting ``Seq2SeqTransformer`` cannot reproduce.
    """
    from ..models.seq2seq import Seq2SeqConfig, Seq2SeqTransformer
    from ..nn import FeedForward, MultiheadAttention

    _check_config(hf)
    c, enc, dec = hf.config, hf.model.encoder, hf.model.decoder
    D = c.d_model
    # attnlab always multiplies embeddings by √D; without Marian's scale_embedding the stored
    # embeddings are divided by √D, and the output layer (which must not be) is then untied
    scale = 1.0 if c.scale_embedding else math.sqrt(D)
    tie = c.scale_embedding and hf.lm_head.weight.data_ptr() == dec.embed_tokens.weight.data_ptr()
    start = c.pad_token_id if c.decoder_start_token_id is None else c.decoder_start_token_id
    model = Seq2SeqTransformer(Seq2SeqConfig(
        src_vocab_size=enc.embed_tokens.num_embeddings,
        tgt_vocab_size=dec.embed_tokens.num_embeddings, model_dim=D,
        # num_layers as ``attnlab train translate`` records it (``marian_settings``): the
        # decoder's, which --freeze all-but-last-N counts
        num_heads=c.encoder_attention_heads, num_layers=c.decoder_layers,
        num_encoder_layers=c.encoder_layers,
        num_decoder_layers=c.decoder_layers, dim_feedforward=c.encoder_ffn_dim,
        dropout=c.dropout, norm_first=False,
        activation=_activation(c.activation_function, "marian"),
        max_len=c.max_position_embeddings, positional="sinusoidal", tie_embeddings=tie,
        final_logits_bias=bool(hf.final_logits_bias.any()),  # opus-mt's are non-zero
        pad_id=c.pad_token_id, sos_id=start, eos_id=c.eos_token_id))
    for module in model.modules():  # Marian's other two dropout rates (they act in training only)
        if isinstance(module, MultiheadAttention):
            module.dropout = c.attention_dropout
        elif isinstance(module, FeedForward):
            module[1].p = c.activation_dropout
    _check_position_table(hf)
    _copy_weights(model, hf, to_marian=False, embed_scale=scale)
    return model


# ---- export ---------------------------------------------------------------------------------
def _activation_name(module: nn.Module) -> str | None:
    from ..nn.feedforward import ACTIVATIONS, make_activation

    return next((n for n in ACTIVATIONS if repr(make_activation(n)) == repr(module)), None)


def _check_exportable(model: nn.Module) -> str:
    """The Hugging Face name of the model's one activation; ValueError for what Marian lacks."""
    from ..nn import PositionalEncoding

    if not isinstance(model.positional_encoding, PositionalEncoding):
        raise ValueError(f"to_hf: Marian needs positional='sinusoidal', this Seq2SeqTransformer "
                         f"has {type(model.positional_encoding).__name__} (positional='learned')")
    layers = [*model.transformer.encoder.layers, *model.transformer.decoder.layers]
    if any(layer.norm_first for layer in layers):
        raise ValueError("to_hf: Marian is post-LN and needs norm_first=False, this "
                         "Seq2SeqTransformer has norm_first=True")
    names = {_activation_name(layer.linear_net[2]) for layer in layers}
    name = names.pop() if len(names) == 1 else None
    if name not in _ACT_TO_HF:
        acts = sorted({repr(layer.linear_net[2]) for layer in layers})
        raise ValueError(f"to_hf: activation {', '.join(acts)} has no Marian equivalent (one "
                         f"activation for every layer, of: {', '.join(_ACT_TO_HF)})")
    return _ACT_TO_HF[name]


def seq2seq_to_marian(model: nn.Module):
    """The ``MarianMTModel`` equivalent to a ``Seq2SeqTransformer`` (see ``to_hf``).

    Raises:
        ValueError: naming the setting Marian cannot represent.
    """
    from transformers import MarianConfig, MarianMTModel

    activation = _check_exportable(model)
    enc_layer, src, tgt = model.transformer.encoder.layers[0], model.src_embedding, model.tgt_embedding
    tied = model.output.weight is tgt.weight
    # one matrix for encoder, decoder and head (the opus-mt layout) only when that is what we
    # hold; with an untied head transformers 5 unties all three anyway
    share = (tied and src.num_embeddings == tgt.num_embeddings
             and torch.equal(src.weight, tgt.weight))
    config = MarianConfig(
        vocab_size=src.num_embeddings, decoder_vocab_size=tgt.num_embeddings,
        share_encoder_decoder_embeddings=share, tie_word_embeddings=tied,
        d_model=model.model_dim, encoder_layers=len(model.transformer.encoder.layers),
        decoder_layers=len(model.transformer.decoder.layers),
        encoder_attention_heads=enc_layer.self_attn.num_heads,
        decoder_attention_heads=enc_layer.self_attn.num_heads,
        encoder_ffn_dim=enc_layer.linear_net[0].out_features,
        decoder_ffn_dim=enc_layer.linear_net[0].out_features, activation_function=activation,
        dropout=model.dropout.p, attention_dropout=enc_layer.self_attn.dropout,
        activation_dropout=enc_layer.linear_net[1].p,
        max_position_embeddings=model.positional_encoding.max_len,
        scale_embedding=True,  # attnlab always multiplies by √D
        pad_token_id=model.pad_id, decoder_start_token_id=model.sos_id,
        eos_token_id=model.eos_id, forced_eos_token_id=None)
    hf = MarianMTModel(config)  # final_logits_bias starts at zero (ours, if any, is copied)
    _check_position_table(hf)
    _copy_weights(model, hf, to_marian=True)
    return hf.train(model.training)
