"""ALiBi (Press et al., 2022) and the positional registry; composition of attention parts."""
import math

import pytest
import torch
from torch.testing import assert_close

import attnlab.nn as an


def test_alibi_bias_equals_the_formula_on_a_small_example():
    H, T = 4, 5
    bias = an.ALiBi(H)(T, T)
    assert bias.shape == (H, T, T)
    slopes = [2 ** (-8 * h / H) for h in range(1, H + 1)]  # 1/4, 1/16, 1/64, 1/256
    assert slopes[0] == 0.25
    for h in range(H):
        for i in range(T):
            for j in range(T):
                assert bias[h, i, j].item() == pytest.approx(-slopes[h] * abs(i - j))
    # causal form −m·(i − j) where a causal mask lets i see j
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    expected = -torch.tensor(slopes)[:, None, None] * (i - j)
    assert_close(bias[:, causal], expected[:, causal], atol=0.0, rtol=0.0)
    # queries are the last T_q positions (incremental decoding): row T-1 of the full bias
    assert_close(an.ALiBi(H)(1, T), bias[:, -1:], atol=0.0, rtol=0.0)


def test_attention_with_alibi_adds_the_bias_on_both_paths():
    torch.manual_seed(0)
    mha = an.MultiheadAttention(16, 16, 4, attn_bias=an.ALiBi(4)).eval()
    x = torch.randn(2, 6, 16)
    o_ref, weights = mha(x, is_causal=True, return_attention=True)
    assert_close(mha(x, is_causal=True), o_ref, atol=1e-5, rtol=1e-5)  # fused == reference
    q, k, _ = mha._project(x, None, None)
    scores = q @ k.transpose(-2, -1) / math.sqrt(4) + an.ALiBi(4)(6, 6)
    scores = scores.masked_fill(~torch.ones(6, 6, dtype=torch.bool).tril(), float("-inf"))
    assert_close(weights, scores.softmax(-1), atol=1e-6, rtol=1e-5)


def test_attention_scores_with_alibi_depend_on_relative_position_only():
    """No absolute positions anywhere: explicit positions shifted by 50 change nothing, and a
    sequence after masked padding gives the same outputs as alone."""
    torch.manual_seed(0)
    enc = an.TransformerEncoder(2, input_dim=16, num_heads=4, dim_feedforward=32,
                                attn_bias=an.ALiBi(4)).eval()
    x = torch.randn(1, 6, 16)
    alone = enc(x, is_causal=True)
    assert_close(enc(x, is_causal=True, positions=torch.arange(50, 56)), alone, atol=0, rtol=0)
    padded = torch.cat([torch.randn(1, 3, 16), x], dim=1)  # (1, 9, 16), three masked keys first
    mask = torch.tensor([[0, 0, 0] + [1] * 6], dtype=torch.bool)[:, None, None, :]
    assert_close(enc(padded, mask, is_causal=True)[:, 3:], alone, atol=1e-5, rtol=1e-5)


def test_score_bias_tensor_is_added_in_every_layer():
    """A per-input (B, H, T, T) bias, as a pairwise-feature model (ParT) passes it."""
    torch.manual_seed(0)
    enc = an.TransformerEncoder(2, input_dim=16, num_heads=4, dim_feedforward=32).eval()
    x, bias = torch.randn(2, 5, 16), torch.randn(2, 4, 5, 5)
    maps = enc.get_attention_maps(x, score_bias=bias)
    q, k, _ = enc.layers[0].self_attn._project(x, None, None)
    expected = (q @ k.transpose(-2, -1) / 2 + bias).softmax(-1)
    assert_close(maps[0], expected, atol=1e-6, rtol=1e-5)
    assert_close(enc(x, score_bias=bias), enc(x, score_bias=bias), atol=0, rtol=0)


def test_registry_names_where_each_kind_acts():
    kinds = an.POSITIONAL_KINDS
    assert {"learned", "sinusoidal", "rope", "alibi", "none"} <= set(kinds)
    assert isinstance(kinds["alibi"].attention_parts(4, 8, 32)["attn_bias"], an.ALiBi)
    assert isinstance(kinds["rope"].attention_parts(4, 8, 32)["pos_embeddings"],
                      an.RotaryEmbedding)
    assert kinds["alibi"].input_module(16, 32) is None
    assert isinstance(kinds["sinusoidal"].input_module(16, 32), an.PositionalEncoding)
    with pytest.raises(ValueError, match=r"positional must be one of .*'alibi'.*got 'xpos'"):
        an.positional_kind("xpos")


def test_blocks_take_their_parts():
    torch.manual_seed(0)
    attn = an.MultiheadAttention(16, 16, 4)
    ff = an.FeedForward(16, 8, activation="gelu")
    block = an.EncoderBlock(16, 4, 32, attn=attn, ff=ff, norm=lambda d: torch.nn.RMSNorm(d),
                            norm_first=True).eval()
    assert block.self_attn is attn and block.linear_net is ff
    assert isinstance(block.norm1, torch.nn.RMSNorm) and isinstance(block.norm2, torch.nn.RMSNorm)
    x = torch.randn(2, 5, 16)
    h = x + attn(block.norm1(x))
    assert_close(block(x), h + ff(block.norm2(h)), atol=1e-6, rtol=1e-6)
    cache = an.KVCache()
    block(x[:, :4], is_causal=True, cache=cache)
    assert_close(block.step(x[:, 4:], cache), block(x, is_causal=True)[:, 4:], atol=1e-5,
                 rtol=1e-5)
