"""Hugging Face ``MarianMTModel`` -> ``attnlab.models.Seq2SeqTransformer``, weights copied.

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
(tested in tests/interop/test_hf_marian.py).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .hf import _activation, _copy, _copy_linear

__all__ = ["marian_to_seq2seq"]

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
    if bool(hf.final_logits_bias.any()):
        raise ValueError("marian: a non-zero final_logits_bias is not supported "
                         "(Seq2SeqTransformer's output layer has no bias)")


def marian_to_seq2seq(hf) -> nn.Module:
    """The ``Seq2SeqTransformer`` equivalent to a ``MarianMTModel`` (see ``from_hf``).

    Raises:
        ValueError: naming the setting ``Seq2SeqTransformer`` cannot reproduce.
    """
    from ..models.seq2seq import Seq2SeqTransformer
    from ..nn import FeedForward, MultiheadAttention
    from ..nn.positional import sinusoidal_table

    _check_config(hf)
    c, enc, dec = hf.config, hf.model.encoder, hf.model.decoder
    D = c.d_model
    src_emb, tgt_emb = enc.embed_tokens.weight, dec.embed_tokens.weight
    # attnlab always multiplies embeddings by √D; without Marian's scale_embedding the stored
    # embeddings are divided by √D, and the output layer (which must not be) is then untied
    scale = 1.0 if c.scale_embedding else math.sqrt(D)
    tie = c.scale_embedding and hf.lm_head.weight.data_ptr() == tgt_emb.data_ptr()
    start = c.pad_token_id if c.decoder_start_token_id is None else c.decoder_start_token_id
    model = Seq2SeqTransformer(
        src_emb.shape[0], tgt_emb.shape[0], model_dim=D, num_heads=c.encoder_attention_heads,
        num_encoder_layers=c.encoder_layers, num_decoder_layers=c.decoder_layers,
        dim_feedforward=c.encoder_ffn_dim, dropout=c.dropout, norm_first=False,
        activation=_activation(c.activation_function, "marian"),
        max_len=c.max_position_embeddings, positional="sinusoidal", tie_embeddings=tie,
        pad_id=c.pad_token_id, sos_id=start, eos_id=c.eos_token_id)
    for module in model.modules():  # Marian's other two dropout rates (they act in training only)
        if isinstance(module, MultiheadAttention):
            module.dropout = c.attention_dropout
        elif isinstance(module, FeedForward):
            module[1].p = c.activation_dropout

    perm = _halves_to_interleaved(D)
    n = min(_CHECKED_POSITIONS, c.max_position_embeddings)
    if not torch.allclose(enc.embed_positions.weight[:n, perm], sinusoidal_table(n, D),
                          atol=1e-5, rtol=1e-5):
        raise ValueError("marian: the position table is not the sin-halves / cos-halves "
                         "sinusoid this conversion assumes")

    def reads(w: Tensor) -> Tensor:  # (out, D): input columns read the residual stream
        return w[:, perm]

    def linear_in(dst: nn.Linear, src: nn.Linear) -> None:
        _copy_linear(dst, reads(src.weight), src.bias)

    def linear_out(dst: nn.Linear, src: nn.Linear) -> None:  # (D, in): output rows write it
        _copy_linear(dst, src.weight[perm], src.bias[perm])

    def norm(dst: nn.LayerNorm, src: nn.LayerNorm) -> None:
        _copy(dst.weight, src.weight[perm])
        _copy(dst.bias, src.bias[perm])

    def attention(dst: MultiheadAttention, src) -> None:
        dst.set_qkv(reads(src.q_proj.weight), reads(src.k_proj.weight), reads(src.v_proj.weight),
                    src.q_proj.bias, src.k_proj.bias, src.v_proj.bias)
        linear_out(dst.o_proj, src.out_proj)

    def feedforward(dst: FeedForward, src) -> None:
        linear_in(dst[0], src.fc1)
        linear_out(dst[3], src.fc2)

    _copy(model.src_embedding.weight, reads(src_emb) / scale)
    _copy(model.tgt_embedding.weight, reads(tgt_emb) / scale)
    if not tie:
        _copy(model.output.weight, reads(hf.lm_head.weight))
    for ours, theirs in zip(model.transformer.encoder.layers, enc.layers):
        attention(ours.self_attn, theirs.self_attn)
        feedforward(ours.linear_net, theirs)
        norm(ours.norm1, theirs.self_attn_layer_norm)
        norm(ours.norm2, theirs.final_layer_norm)
    for ours, theirs in zip(model.transformer.decoder.layers, dec.layers):
        attention(ours.self_attn, theirs.self_attn)
        attention(ours.cross_attn, theirs.encoder_attn)  # keys/values read the encoder's stream
        feedforward(ours.linear_net, theirs)
        norm(ours.norm1, theirs.self_attn_layer_norm)
        norm(ours.norm2, theirs.encoder_attn_layer_norm)
        norm(ours.norm3, theirs.final_layer_norm)
    return model
