"""Encoder and decoder stacks: symmetry, padding, and attention maps."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

import attnlab.nn as an

ARGS = dict(input_dim=16, num_heads=4, dim_feedforward=32)


def test_course_style_encoder_construction():
    enc = an.TransformerEncoder(num_layers=2, input_dim=16, dim_feedforward=32, num_heads=4,
                                dropout=0.1)
    assert len(enc.layers) == 2
    assert enc(torch.randn(3, 5, 16), mask=an.causal_mask(5)).shape == (3, 5, 16)


def test_num_layers_must_be_positive():
    with pytest.raises(ValueError, match="num_layers must be a positive integer, got 0"):
        an.TransformerEncoder(0, **ARGS)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_without_positions_is_permutation_equivariant(norm_first):
    """Self-attention has no notion of order: permuting the input permutes the output."""
    enc = an.TransformerEncoder(2, norm_first=norm_first, **ARGS).eval()
    x = torch.randn(2, 7, 16)
    perm = torch.randperm(7)
    assert_close(enc(x[:, perm]), enc(x)[:, perm], atol=1e-5, rtol=1e-5)


@settings(max_examples=15, deadline=None)
@given(lengths=st.lists(st.integers(1, 8), min_size=1, max_size=4),
       seed=st.integers(0, 2**16), norm_first=st.booleans())
def test_padding_does_not_change_real_positions(lengths, seed, norm_first):
    """Whatever sits at padded positions, outputs at real positions stay the same."""
    torch.manual_seed(seed)
    enc = an.TransformerEncoder(2, norm_first=norm_first, **ARGS).eval()
    lengths = torch.tensor(lengths)
    mask = an.padding_mask(lengths, 8)
    real = mask[:, 0, 0]  # (B, T)
    x = torch.randn(len(lengths), 8, 16)
    other = torch.where(real[..., None], x, 100 * torch.randn_like(x))
    assert_close(enc(other, mask)[real], enc(x, mask)[real], atol=1e-5, rtol=1e-5)
    # and each sequence gives what it gives alone, unpadded
    n = int(lengths[0])
    assert_close(enc(x, mask)[0, :n], enc(x[:1, :n])[0], atol=1e-5, rtol=1e-5)


def test_encoder_attention_maps_one_per_layer_with_mask_in_every_layer():
    enc = an.TransformerEncoder(3, **ARGS).eval()
    x = torch.randn(2, 6, 16)
    mask = an.padding_mask(torch.tensor([6, 4]), 6)
    maps = enc.get_attention_maps(x, mask)
    assert len(maps) == 3
    for weights in maps:
        assert weights.shape == (2, 4, 6, 6)
        assert_close(weights[1, :, :, 4:], torch.zeros(4, 6, 2), atol=0.0, rtol=0.0)
        assert_close(weights.sum(-1), torch.ones(2, 4, 6), atol=1e-5, rtol=0.0)
    # the maps are those of the forward pass: the last layer's input is the second layer's output
    h = enc.layers[1](enc.layers[0](x, mask), mask)
    _, last = enc.layers[2](h, mask, return_attention=True)
    assert_close(maps[2], last, atol=1e-6, rtol=1e-6)


def test_decoder_attention_maps_self_and_cross():
    dec = an.TransformerDecoder(2, **ARGS).eval()
    tgt, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    memory_mask = an.padding_mask(torch.tensor([7, 3]), 7)
    self_maps, cross_maps = dec.get_attention_maps(tgt, memory, memory_mask=memory_mask)
    assert len(self_maps) == len(cross_maps) == 2
    for s, c in zip(self_maps, cross_maps):
        assert s.shape == (2, 4, 5, 5) and c.shape == (2, 4, 5, 7)
        assert_close(s.triu(1), torch.zeros_like(s), atol=0.0, rtol=0.0)  # causal
        assert_close(c[1, :, :, 3:], torch.zeros(4, 5, 4), atol=0.0, rtol=0.0)  # padded source


def test_pre_ln_stack_ends_with_layer_norm():
    post, pre = an.TransformerEncoder(2, **ARGS), an.TransformerEncoder(2, norm_first=True, **ARGS)
    assert isinstance(post.norm, torch.nn.Identity) and isinstance(pre.norm, torch.nn.LayerNorm)
    out = pre.eval()(torch.randn(2, 5, 16))
    assert_close(out.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0.0)


def test_encoder_decoder_source_padding_is_ignored():
    model = an.Transformer(1, 1, **ARGS).eval()
    src, tgt = torch.randn(2, 6, 16), torch.randn(2, 4, 16)
    src_mask = an.padding_mask(torch.tensor([6, 3]), 6)
    changed = src.clone()
    changed[1, 3:] = 50.0
    assert_close(model(changed, tgt, src_mask), model(src, tgt, src_mask), atol=1e-5, rtol=1e-5)
