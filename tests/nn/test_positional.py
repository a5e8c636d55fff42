"""Positional encodings: the sinusoid's rotation property, rotary's relative positions,
buffers and length limits."""
import math
import re

import pytest
import torch
from torch.testing import assert_close

import attnlab.nn as an
from attnlab.nn.positional import position_range


def test_sinusoid_values_follow_the_formula():
    d_model = 8
    pe = an.PositionalEncoding(d_model, max_len=50).pe[0]  # (max_len, D)
    pos, i = 7, 2
    angle = pos / 10000 ** (2 * i / d_model)
    assert_close(pe[pos, 2 * i], torch.tensor(math.sin(angle)), atol=1e-6, rtol=0.0)
    assert_close(pe[pos, 2 * i + 1], torch.tensor(math.cos(angle)), atol=1e-6, rtol=0.0)


@pytest.mark.parametrize("k", [1, 5, 17])
def test_pe_of_pos_plus_k_is_a_fixed_rotation_of_pe_of_pos(k):
    """For every pair (2i, 2i+1) one 2x2 matrix R(k, i) maps PE(pos) to PE(pos + k) for all pos,
    and it is a rotation. It is fitted by least squares over 100 positions, then checked."""
    d_model, n = 16, 100
    pe = an.PositionalEncoding(d_model, max_len=n + k).pe[0]  # (n + k, D)
    for i in range(d_model // 2):
        now, later = pe[:n, 2 * i : 2 * i + 2], pe[k : n + k, 2 * i : 2 * i + 2]  # (n, 2)
        R = torch.linalg.lstsq(now.double(), later.double()).solution.T  # later ≈ now @ Rᵀ
        # one matrix for all positions (float32 sin/cos of angles up to ~100 rad: 1e-5)
        assert_close((now.double() @ R.T).float(), later, atol=1e-4, rtol=0.0)
        assert_close(R @ R.T, torch.eye(2, dtype=torch.float64), atol=1e-4, rtol=0.0)
        assert torch.linalg.det(R).item() == pytest.approx(1.0, abs=1e-4)
        # and it is the rotation by k·ω_i
        w = k / 10000 ** (2 * i / d_model)
        expected = torch.tensor([[math.cos(w), math.sin(w)], [-math.sin(w), math.cos(w)]],
                                dtype=torch.float64)
        assert_close(R, expected, atol=1e-4, rtol=0.0)


def test_pe_buffer_shape_and_not_in_state_dict():
    module = an.PositionalEncoding(d_model=12, max_len=30)
    assert module.pe.shape == (1, 30, 12)
    assert "pe" not in module.state_dict()
    x = torch.randn(2, 9, 12)
    assert_close(module(x), x + module.pe[:, :9], atol=0.0, rtol=0.0)


@pytest.mark.parametrize("make", [
    lambda: an.PositionalEncoding(d_model=8, max_len=10),
    lambda: an.LearnedPositionalEncoding(d_model=8, max_len=10),
], ids=["sinusoidal", "learned"])
def test_sequence_longer_than_max_len_names_both_lengths(make):
    module = make()
    assert module(torch.zeros(1, 10, 8)).shape == (1, 10, 8)
    with pytest.raises(ValueError, match=re.escape("length (12) exceeds") + r".*max_len \(10\)"):
        module(torch.zeros(1, 12, 8))


@pytest.mark.parametrize("make", [
    lambda: an.PositionalEncoding(d_model=8, max_len=10),
    lambda: an.LearnedPositionalEncoding(d_model=8, max_len=10),
], ids=["sinusoidal", "learned"])
@pytest.mark.parametrize("positions", [None, torch.arange(5)], ids=["default", "given"])
def test_an_input_of_another_width_is_refused_not_broadcast(make, positions):
    """One feature per position (B, T, 1) plus a table of width 8 broadcast to (B, T, 8)."""
    with pytest.raises(ValueError, match=re.escape("x must be (B, T, d_model=8), got shape "
                                                   "(2, 5, 1)")):
        make()(torch.zeros(2, 5, 1), positions=positions)


@pytest.mark.parametrize("num_heads", [4, 2], ids=["heads-2-wide", "heads-4-wide"])
def test_a_rotary_embedding_of_another_head_width_is_refused(num_heads):
    """RotaryEmbedding(8) given to an attention whose heads are 2 wide broadcast q and k to 8
    wide and attended without a word; 4 wide was a bare broadcasting RuntimeError."""
    mha = an.MultiheadAttention(8, 8, num_heads, pos_embeddings=an.RotaryEmbedding(8))
    width = 8 // num_heads
    with pytest.raises(ValueError, match=re.escape(
            f"a rotary embedding of head_dim 8 was given heads of width {width} "
            f"(shape (1, {num_heads}, 3, {width}))")):
        mha(torch.randn(1, 3, 8))


def test_positions_after_a_cache_are_checked_as_integers_without_reading_a_tensor():
    """A forward pass reads no position values (no host synchronisation); positions that
    continue a cache are checked where they are made, from the cache's length (a Python int)."""
    assert position_range(3, 2, max_len=5).tolist() == [3, 4]
    with pytest.raises(ValueError, match=re.escape("length (6) exceeds") + r".*max_len \(5\)"):
        position_range(3, 3, max_len=5)
    mha = an.MultiheadAttention(8, 8, 2, rotary=True, max_len=5)
    cache = an.KVCache()
    mha(torch.randn(1, 4, 8), is_causal=True, cache=cache)
    mha(torch.randn(1, 1, 8), is_causal=True, cache=cache)  # position 4: the last one
    with pytest.raises(ValueError, match=r"length \(6\) exceeds.*max_len \(5\)"):
        mha(torch.randn(1, 1, 8), is_causal=True, cache=cache)


def test_learned_encoding_is_trained_and_saved():
    module = an.LearnedPositionalEncoding(8, 10)  # (d_model, max_len), as PositionalEncoding
    assert "embedding.weight" in module.state_dict()
    x = torch.zeros(2, 4, 8)
    assert_close(module(x)[1], module.embedding.weight[:4], atol=0.0, rtol=0.0)


def test_rotary_scores_depend_only_on_relative_position():
    rope = an.RotaryEmbedding(head_dim=8, max_len=64)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)

    def score(m, n):
        return (rope(q, torch.tensor([m])) * rope(k, torch.tensor([n]))).sum()

    for m, n in [(3, 1), (10, 10), (0, 7)]:
        for shift in (1, 20, 40):
            assert_close(score(m + shift, n + shift), score(m, n), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(score(3, 1), score(1, 3))  # but it does see the offset


def test_rotary_attention_maps_are_shift_invariant():
    """Attention with rotary embeddings and no absolute encoding: moving the whole sequence to
    later positions leaves every attention weight unchanged."""
    mha = an.MultiheadAttention(16, 16, 2, rotary=True, max_len=128)
    x = torch.randn(2, 6, 16)
    _, at_zero = mha(x, return_attention=True, positions=torch.arange(6))
    _, at_fifty = mha(x, return_attention=True, positions=torch.arange(50, 56))
    assert_close(at_fifty, at_zero, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("build, message", [
    (lambda: an.LearnedPositionalEncoding(0), "d_model must be a positive integer, got 0"),
    (lambda: an.LearnedPositionalEncoding(16, max_len=0),
     "max_len must be a positive integer, got 0"),
    (lambda: an.RotaryEmbedding(0), "head_dim must be a positive integer, got 0"),
    (lambda: an.RotaryEmbedding(8, max_len=-1), "max_len must be a positive integer, got -1"),
    (lambda: an.PositionalEncoding(16.0), "d_model must be a positive integer, got 16.0"),
    (lambda: an.PositionalEncoding(16, max_len=0), "max_len must be a positive integer, got 0"),
])
def test_position_tables_refuse_an_empty_or_fractional_size_when_built(build, message):
    """A learned or rotary table of width or length 0 was built without a word (the error, if
    any, came in forward), and a float width failed inside torch.zeros: a ValueError naming
    the argument, as the sinusoidal table's."""
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        build()


def test_numpy_integers_are_sizes_as_python_integers_are():
    """A size worked out with NumPy (``np.int64``) built every table before the sizes were
    checked; one rule (``attnlab.nn.arguments``) reads it as a Python integer."""
    import numpy as np

    from attnlab.nn import MultiheadAttention, RMSNorm

    n = np.int64(16)
    assert an.PositionalEncoding(n, max_len=np.int64(8)).pe.shape == (1, 8, 16)
    assert an.LearnedPositionalEncoding(n, max_len=np.int64(8)).max_len == 8
    assert MultiheadAttention(n, n, np.int64(2)).num_heads == 2
    assert RMSNorm(n, eps=np.float64(1e-5)).weight.shape == (16,)


@pytest.mark.parametrize("args, message", [((0,), "dim must be a positive integer, got 0"),
                                           ((4, -1.0), r"eps must be >= 0, got -1\.0")])
def test_rms_norm_sizes_and_eps_are_checked_when_built(args, message):
    from attnlab.nn import RMSNorm

    with pytest.raises(ValueError, match=message):
        RMSNorm(*args)
