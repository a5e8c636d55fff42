"""attnlab.nn against torch.nn with copied weights: attention, blocks and stacks.

Both sides in eval mode with dropout 0, float32. The same arithmetic in a different order
differs by rounding only, so the tolerance is atol = rtol = 1e-5 for one layer and 1e-4 for a
stack of layers (errors compound through LayerNorms).
"""
import pytest
import torch
from torch import nn
from torch.testing import assert_close

import attnlab.nn as an

from .torch_reference import causal, copy_from_torch, padding

D, H, FF, L = 16, 4, 32, 2
LAYER_TOL = dict(atol=1e-5, rtol=1e-5)
STACK_TOL = dict(atol=1e-4, rtol=1e-4)
LENGTHS = torch.tensor([7, 4, 1])  # a full, a half-padded and a one-token sequence


def test_qkv_layout_round_trips():
    """set_qkv stores separate Q, K, V in the course's per-head layout; get_qkv undoes it."""
    ours = an.MultiheadAttention(D, D, H)
    w = [torch.randn(D, D) for _ in range(3)]
    b = [torch.randn(D) for _ in range(3)]
    ours.set_qkv(*w, *b)
    for got, expected in zip(ours.get_qkv(), w + b):
        assert_close(got, expected, atol=0.0, rtol=0.0)
    # per-head, as the course's reshape(B, T, H, 3·hd) expects: rows [q_0; k_0; v_0; q_1; ...]
    hd = D // H
    assert_close(ours.qkv_proj.weight[hd : 2 * hd], w[1][:hd], atol=0.0, rtol=0.0)


@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_set_qkv_refuses_biases_the_module_would_drop_or_lacks(cross):
    """torch's attention has q, k, v biases by default: copied into a MultiheadAttention built
    with bias=False, they were dropped without a word (and the outputs differed); the other
    way round was an AttributeError on None."""
    kw = {"kv_dim": D} if cross else {}
    w = [torch.randn(D, D) for _ in range(3)]
    b = [torch.randn(D) for _ in range(3)]
    with pytest.raises(ValueError, match=r"set_qkv: biases were given, but this attention's "
                                         r"q, k, v projections have none"):
        an.MultiheadAttention(D, D, H, bias=False, **kw).set_qkv(*w, *b)
    with pytest.raises(ValueError, match=r"set_qkv: this attention's q, k, v projections have "
                                         r"biases \(qkv_bias=True\): pass bq, bk and bv"):
        an.MultiheadAttention(D, D, H, **kw).set_qkv(*w)
    unbiased = an.MultiheadAttention(D, D, H, bias=False, **kw)
    unbiased.set_qkv(*w)
    for got, expected in zip(unbiased.get_qkv()[:3], w):
        assert_close(got, expected, atol=0.0, rtol=0.0)


@pytest.mark.parametrize("masks", ["none", "padding", "causal", "padding+causal"])
def test_self_attention_matches_torch(masks):
    theirs = nn.MultiheadAttention(D, H, batch_first=True).eval()
    ours = an.MultiheadAttention(D, D, H).eval()
    copy_from_torch(ours, theirs)
    x = torch.randn(3, 7, D)
    our_pad, their_pad = padding(LENGTHS, 7)
    our_causal, their_causal = causal(7)
    our_mask, kwargs = None, {}
    if "padding" in masks:
        our_mask, kwargs["key_padding_mask"] = our_pad, their_pad
    if "causal" in masks:
        our_mask = our_causal if our_mask is None else our_mask & our_causal
        kwargs["attn_mask"] = their_causal

    o, weights = ours(x, our_mask, return_attention=True)
    o_fused = ours(x, our_mask)
    o_t, weights_t = theirs(x, x, x, average_attn_weights=False, **kwargs)
    assert_close(o, o_t, **LAYER_TOL)
    assert_close(o_fused, o_t, **LAYER_TOL)
    assert_close(weights, weights_t, **LAYER_TOL)


def test_cross_attention_with_other_width_matches_torch():
    kv_dim, S = 10, 5
    theirs = nn.MultiheadAttention(D, H, kdim=kv_dim, vdim=kv_dim, batch_first=True).eval()
    ours = an.MultiheadAttention(D, D, H, kv_dim=kv_dim).eval()
    copy_from_torch(ours, theirs)
    x, memory = torch.randn(3, 6, D), torch.randn(3, S, kv_dim)
    our_pad, their_pad = padding(torch.tensor([5, 2, 1]), S)

    o, weights = ours(x, our_pad, return_attention=True, memory=memory)
    o_t, weights_t = theirs(x, memory, memory, key_padding_mask=their_pad,
                            average_attn_weights=False)
    assert weights.shape == (3, H, 6, S)
    assert_close(o, o_t, **LAYER_TOL)
    assert_close(ours(x, our_pad, memory=memory), o_t, **LAYER_TOL)
    assert_close(weights, weights_t, **LAYER_TOL)


BLOCK_OPTIONS = [(False, "relu"), (False, "gelu"), (True, "relu"), (True, "gelu")]


def _block_args(norm_first, activation):
    return dict(input_dim=D, num_heads=H, dim_feedforward=FF, norm_first=norm_first,
                activation=activation)


def _torch_args(norm_first, activation):
    return dict(d_model=D, nhead=H, dim_feedforward=FF, dropout=0.0, activation=activation,
                batch_first=True, norm_first=norm_first)


@pytest.mark.parametrize("norm_first,activation", BLOCK_OPTIONS)
def test_encoder_block_matches_torch_layer(norm_first, activation):
    theirs = nn.TransformerEncoderLayer(**_torch_args(norm_first, activation)).eval()
    ours = an.EncoderBlock(**_block_args(norm_first, activation)).eval()
    copy_from_torch(ours, theirs)
    x = torch.randn(3, 7, D)
    our_pad, their_pad = padding(LENGTHS, 7)
    real = our_pad[:, 0, 0]  # (B, T): compare real positions; padded ones are undefined

    assert_close(ours(x), theirs(x), **LAYER_TOL)
    assert_close(ours(x, our_pad)[real], theirs(x, src_key_padding_mask=their_pad)[real],
                 **LAYER_TOL)


@pytest.mark.parametrize("norm_first,activation", BLOCK_OPTIONS)
def test_decoder_block_matches_torch_layer(norm_first, activation):
    theirs = nn.TransformerDecoderLayer(**_torch_args(norm_first, activation)).eval()
    ours = an.DecoderBlock(**_block_args(norm_first, activation)).eval()
    copy_from_torch(ours, theirs)
    tgt, memory = torch.randn(3, 6, D), torch.randn(3, 7, D)
    our_pad, their_pad = padding(LENGTHS, 7)
    _, their_causal = causal(6)

    o = ours(tgt, memory, memory_mask=our_pad)  # causal by default
    o_t = theirs(tgt, memory, tgt_mask=their_causal, memory_key_padding_mask=their_pad)
    assert_close(o, o_t, **LAYER_TOL)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")
@pytest.mark.parametrize("norm_first,activation", BLOCK_OPTIONS)
def test_encoder_stack_matches_torch_fast_path(norm_first, activation):
    """Under no_grad, torch.nn.TransformerEncoder takes its nested-tensor fast path, which zeroes
    padded positions; real positions must agree."""
    final_norm = nn.LayerNorm(D) if norm_first else None
    layer = nn.TransformerEncoderLayer(**_torch_args(norm_first, activation))
    theirs = nn.TransformerEncoder(layer, L, norm=final_norm,
                                   enable_nested_tensor=not norm_first).eval()
    ours = an.TransformerEncoder(L, **_block_args(norm_first, activation)).eval()
    copy_from_torch(ours, theirs)
    x = torch.randn(3, 7, D)
    our_pad, their_pad = padding(LENGTHS, 7)
    real = our_pad[:, 0, 0]
    with torch.no_grad():
        o, o_t = ours(x, our_pad), theirs(x, src_key_padding_mask=their_pad)
    assert_close(o[real], o_t[real], **STACK_TOL)


@pytest.mark.parametrize("norm_first,activation", BLOCK_OPTIONS)
def test_decoder_stack_matches_torch(norm_first, activation):
    final_norm = nn.LayerNorm(D) if norm_first else None
    layer = nn.TransformerDecoderLayer(**_torch_args(norm_first, activation))
    theirs = nn.TransformerDecoder(layer, L, norm=final_norm).eval()
    ours = an.TransformerDecoder(L, **_block_args(norm_first, activation)).eval()
    copy_from_torch(ours, theirs)
    tgt, memory = torch.randn(3, 6, D), torch.randn(3, 7, D)
    our_pad, their_pad = padding(LENGTHS, 7)
    _, their_causal = causal(6)

    o = ours(tgt, memory, memory_mask=our_pad)
    o_t = theirs(tgt, memory, tgt_mask=their_causal, memory_key_padding_mask=their_pad)
    assert_close(o, o_t, **STACK_TOL)


def test_encoder_decoder_matches_torch_transformer():
    """torch.nn.Transformer ends both stacks with a LayerNorm; ``final_norm=True`` asks for that."""
    theirs = nn.Transformer(D, H, L, L, FF, dropout=0.0, batch_first=True).eval()
    ours = an.Transformer(L, L, input_dim=D, num_heads=H, dim_feedforward=FF,
                          final_norm=True).eval()
    copy_from_torch(ours, theirs)
    src, tgt = torch.randn(3, 7, D), torch.randn(3, 6, D)
    our_pad, their_pad = padding(LENGTHS, 7)
    _, their_causal = causal(6)

    o = ours(src, tgt, src_mask=our_pad)
    o_t = theirs(src, tgt, tgt_mask=their_causal, src_key_padding_mask=their_pad,
                 memory_key_padding_mask=their_pad)
    assert_close(o, o_t, **STACK_TOL)


def test_torchs_layers_drop_attention_weights_and_ours_only_with_attention_dropout():
    """What docs/blocks.md says to a reader matching torch's training: torch's `dropout` also
    drops attention weights; a block does so only with attention_dropout."""
    p = 0.1
    torch_layers = (nn.TransformerEncoderLayer(D, H, FF, dropout=p, batch_first=True),
                    nn.TransformerDecoderLayer(D, H, FF, dropout=p, batch_first=True))
    assert [m.dropout for layer in torch_layers for m in layer.modules()
            if isinstance(m, nn.MultiheadAttention)] == [p, p, p]
    for make in (an.EncoderBlock, an.DecoderBlock):
        plain, matched = make(D, H, FF, p), make(D, H, FF, p, attention_dropout=p)
        assert [m.dropout for m in plain.modules() if isinstance(m, an.MultiheadAttention)] \
            == [0.0] * (1 if make is an.EncoderBlock else 2)
        assert [m.dropout for m in matched.modules() if isinstance(m, an.MultiheadAttention)] \
            == [p] * (1 if make is an.EncoderBlock else 2)
