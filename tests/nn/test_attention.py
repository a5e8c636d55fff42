"""Scaled dot-product and multi-head attention: the worked example, masking edge cases, the
fused and reference paths, the scale, parameter counts, the course's API and bad input."""
import math
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

import attnlab.nn as an

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# Fused kernels accumulate in float32; the reference path rounds the logits and weights to the
# dtype. Tolerance: three units of the dtype's eps for O(1) outputs (over 3000 random cases the
# worst error was 0.2e-6, 1.4e-3 and 7.7e-3 for float32, float16 and bfloat16).
TOL = {
    torch.float32: dict(atol=1e-6, rtol=1e-5),
    torch.bfloat16: dict(atol=3 * 2**-7, rtol=3 * 2**-7),
    torch.float16: dict(atol=3 * 2**-10, rtol=3 * 2**-10),
}

# ---- the worked example (docs/attention.md) -------------------------------------------------
K = torch.tensor([[10.0, 0, 0], [0, 10, 0], [0, 0, 10], [0, 0, 10]])
V = torch.tensor([[1.0, 0, 1], [10, 0, 2], [100, 5, 0], [1000, 6, 0]])


@pytest.mark.parametrize("q,expected_values,expected_weights", [
    ([0, 10, 0], [10, 0, 2], [0, 1, 0, 0]),  # matches key 1 only: a look-up
    ([0, 0, 10], [550, 5.5, 0], [0, 0, 0.5, 0.5]),  # keys 2 and 3 tie: the mean of their values
    ([10, 10, 0], [5.5, 0, 1.5], [0.5, 0.5, 0, 0]),  # keys 0 and 1 tie
])
def test_worked_lookup_example(q, expected_values, expected_weights):
    values, weights = an.scaled_dot_product(torch.tensor([q], dtype=torch.float32), K, V)
    # float32 rounding of 550 is 3e-5; the left-over weight e^(-100/√3) ≈ 1e-25 is invisible
    expected_values = torch.tensor([expected_values], dtype=torch.float32)
    expected_weights = torch.tensor([expected_weights], dtype=torch.float32)
    assert_close(values, expected_values, atol=1e-4, rtol=1e-6)
    assert_close(weights, expected_weights, atol=1e-6, rtol=0.0)


def test_worked_example_all_queries_at_once_with_batch_dims():
    q = torch.tensor([[0.0, 10, 0], [0, 0, 10], [10, 10, 0]])
    values, weights = an.scaled_dot_product(q[None, None], K[None, None], V[None, None])
    assert values.shape == (1, 1, 3, 3) and weights.shape == (1, 1, 3, 4)
    assert_close(values[0, 0], torch.tensor([[10.0, 0, 2], [550, 5.5, 0], [5.5, 0, 1.5]]),
                 atol=1e-4, rtol=1e-6)


# ---- query rows that may attend to nothing --------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_reference_empty_row_gives_zeros_not_nan(dtype):
    q, k, v = (torch.randn(2, 3, 4, dtype=dtype, requires_grad=True) for _ in range(3))
    mask = torch.ones(2, 3, 3, dtype=torch.bool)
    mask[0, 1] = False  # query 1 of sample 0 may attend to nothing
    values, weights = an.scaled_dot_product(q, k, v, mask)
    assert_close(values[0, 1], torch.zeros(4, dtype=dtype), atol=0.0, rtol=0.0)
    assert_close(weights[0, 1], torch.zeros(3, dtype=dtype), atol=0.0, rtol=0.0)
    assert_close(weights.float().sum(-1)[1], torch.ones(3), atol=1e-2, rtol=0.0)
    values.float().sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("return_attention", [False, True], ids=["fused", "reference"])
def test_attention_empty_rows_give_zero_output_and_finite_grads(dtype, return_attention):
    mha = an.MultiheadAttention(8, 8, 2).to(dtype)
    assert not mha.o_proj.bias.any()  # zero bias: a zero attention output stays zero after o_proj
    x = torch.randn(3, 4, 8, dtype=dtype, requires_grad=True)
    mask = an.padding_mask(torch.tensor([4, 2, 0]), 4).expand(3, 1, 4, 4).clone()
    mask[0, :, 1] = False  # one empty query row; sample 2 is all padding: every row empty
    out = mha(x, mask, return_attention)
    o = out[0] if return_attention else out
    assert_close(o[0, 1], torch.zeros(8, dtype=dtype), atol=0.0, rtol=0.0)
    assert_close(o[2], torch.zeros(4, 8, dtype=dtype), atol=0.0, rtol=0.0)
    assert torch.isfinite(o).all() and o[1].abs().sum() > 0
    if return_attention:
        weights = out[1]
        assert_close(weights[0, :, 1], torch.zeros(2, 4, dtype=dtype), atol=0.0, rtol=0.0)
        assert_close(weights[2], torch.zeros(2, 4, 4, dtype=dtype), atol=0.0, rtol=0.0)
    o.float().square().sum().backward()
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in mha.parameters())


# ---- fused (F.scaled_dot_product_attention) == reference (scaled_dot_product) -----------------
@st.composite
def attention_cases(draw):
    return dict(
        B=draw(st.integers(1, 3)), T_q=draw(st.integers(1, 6)), T_k=draw(st.integers(1, 6)),
        H=draw(st.sampled_from([1, 2, 4])), hd=draw(st.sampled_from([2, 4, 8])),
        dtype=draw(st.sampled_from(DTYPES)), cross=draw(st.booleans()),
        mask=draw(st.sampled_from(["none", "random", "padding", "per-head", "is_causal"])),
        seed=draw(st.integers(0, 2**16)),
    )


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(case=attention_cases())
def test_fused_path_equals_reference_path(case):
    torch.manual_seed(case["seed"])
    B, T_q, H, E, dtype = case["B"], case["T_q"], case["H"], case["H"] * case["hd"], case["dtype"]
    T_k = case["T_k"] if case["cross"] else T_q
    mha = an.MultiheadAttention(6, E, H, kv_dim=5 if case["cross"] else None).to(dtype).eval()
    x = torch.randn(B, T_q, 6, dtype=dtype)
    memory = torch.randn(B, T_k, 5, dtype=dtype) if case["cross"] else None
    mask, is_causal = None, False
    if case["mask"] == "random":  # may leave rows empty
        mask = torch.rand(B, 1, T_q, T_k) < 0.7
    elif case["mask"] == "per-head":
        mask = torch.rand(B, H, T_q, T_k) < 0.7
    elif case["mask"] == "padding":
        mask = an.padding_mask(torch.randint(0, T_k + 1, (B,)), T_k)
    elif case["mask"] == "is_causal":
        is_causal = True
    fused = mha(x, mask, memory=memory, is_causal=is_causal)
    reference, weights = mha(x, mask, True, memory=memory, is_causal=is_causal)
    assert weights.shape == (B, H, T_q, T_k)
    assert_close(fused, reference, **TOL[dtype])


# ---- the 1/√d_k scale -----------------------------------------------------------------------
def test_scaling_keeps_logit_variance_near_one():
    """With unit-variance q, k, Var(q·k) = d_k; scaled_dot_product divides by √d_k to give ≈ 1.

    The scaled logit is read back from the weights: with a second key of zeros,
    log(w_0 / w_1) = (q·k_0 - 0) / √d_k.
    """
    n, d_k = 20000, 64
    q = torch.randn(n, 1, d_k, dtype=torch.float64)
    k = torch.zeros(n, 2, d_k, dtype=torch.float64)
    k[:, 0] = torch.randn(n, d_k, dtype=torch.float64)
    _, weights = an.scaled_dot_product(q, k, torch.zeros(n, 2, 1, dtype=torch.float64))
    scaled = (weights[:, 0, 0].log() - weights[:, 0, 1].log())
    unscaled = (q[:, 0] * k[:, 0]).sum(-1)
    # sampling error of a variance estimate from 20000 samples is ~1.5%; 10% is safe
    assert unscaled.var().item() == pytest.approx(d_k, rel=0.1)
    assert scaled.var().item() == pytest.approx(1.0, rel=0.1)


# ---- parameters -----------------------------------------------------------------------------
def test_attention_parameter_count_is_4d2_plus_4d():
    d = 32
    mha = an.MultiheadAttention(d, d, 4)
    assert sum(p.numel() for p in mha.parameters()) == 4 * d * d + 4 * d


def test_initialisation_is_xavier_with_zero_bias():
    mha = an.MultiheadAttention(64, 64, 4)
    bound = math.sqrt(6 / (64 + 3 * 64))  # Xavier-uniform bound of the stacked (3E, D) matrix
    assert mha.qkv_proj.weight.abs().max() <= bound
    assert mha.qkv_proj.weight.abs().max() > 0.9 * bound
    assert not mha.qkv_proj.bias.any() and not mha.o_proj.bias.any()


# ---- the course's ("UvA Tutorial 6") usage ----------------------------------------------------
def _course_forward(mha, x, mask):
    """The course's MultiheadAttention.forward, written out, to check our checkpoint layout."""
    B, T, _ = x.shape
    qkv = mha.qkv_proj(x).reshape(B, T, mha.num_heads, 3 * mha.head_dim).permute(0, 2, 1, 3)
    q, k, v = qkv.chunk(3, dim=-1)
    logits = (q @ k.transpose(-2, -1) / math.sqrt(mha.head_dim)).masked_fill(mask == 0, -9e15)
    values = (logits.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(B, T, mha.embed_dim)
    return mha.o_proj(values)


def test_course_style_usage_with_input_dim_not_embed_dim():
    mha = an.MultiheadAttention(8, 16, 4)  # input_dim, embed_dim, num_heads
    x, mask = torch.randn(2, 5, 8), an.causal_mask(5)
    o, attention = mha(x, mask=mask, return_attention=True)
    assert o.shape == (2, 5, 8) and attention.shape == (2, 4, 5, 5)
    assert {k: tuple(v.shape) for k, v in mha.state_dict().items()} == {
        "qkv_proj.weight": (48, 8), "qkv_proj.bias": (48,),
        "o_proj.weight": (8, 16), "o_proj.bias": (8,),
    }
    assert_close(o, _course_forward(mha, x, mask), atol=1e-6, rtol=1e-5)
    assert_close(attention.triu(1), torch.zeros_like(attention), atol=0.0, rtol=0.0)


# ---- bad input: ValueErrors that show the values --------------------------------------------
def test_embed_dim_not_divisible_by_heads():
    with pytest.raises(ValueError, match=r"embed_dim \(10\) must be divisible by num_heads \(4\)"):
        an.MultiheadAttention(8, 10, 4)
    with pytest.raises(ValueError, match=r"\(10\).*\(3\)"):
        an.EncoderBlock(input_dim=10, num_heads=3, dim_feedforward=16)


def test_mask_that_does_not_broadcast():
    """The message shows the shape the caller made (it once showed the 4-D shape it was read
    as, (3, 1, 5, 5) for a (3, 5, 5) mask), and how 2-D and 3-D masks are read."""
    mha = an.MultiheadAttention(16, 16, 4)
    expected = "mask of shape (3, 5, 5) does not broadcast to (B, H, T_q, T_k) = (2, 4, 5, 5)"
    with pytest.raises(ValueError, match=re.escape(expected)):
        mha(torch.randn(2, 5, 16), torch.ones(3, 5, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=re.escape("mask of shape (5, 6) does not")):
        mha(torch.randn(2, 5, 16), torch.ones(5, 6, dtype=torch.bool))


def test_reference_path_refuses_a_mask_that_would_broadcast_the_scores():
    """padding_mask's (B, 1, 1, T_k) with 3-D q, k, v once gave values (B, B, T_q, d) and
    weights (B, B, T_q, T_k), each sample under every sample's mask."""
    q = torch.randn(2, 3, 4)
    mask = an.padding_mask(torch.tensor([3, 1]), 3)  # (B, 1, 1, T_k)
    with pytest.raises(ValueError, match=re.escape(
            "mask of shape (2, 1, 1, 3) does not broadcast to the scores (..., T_q, T_k) = "
            "(2, 3, 3)")):
        an.scaled_dot_product(q, q, q, mask)
    values, weights = an.scaled_dot_product(q, q, q, mask[:, 0, 0, None, :])  # (B, 1, T_k)
    assert values.shape == (2, 3, 4) and weights.shape == (2, 3, 3)
    assert (weights[1, :, 1:] == 0).all()


def test_a_key_padding_mask_of_torchs_shape_is_refused_with_the_shape_to_use():
    """torch.nn.MultiheadAttention's key_padding_mask is (B, T_k); here a 2-D mask is
    (T_q, T_k), so the message says how to pass one, in one line."""
    mha = an.MultiheadAttention(16, 16, 4)
    with pytest.raises(ValueError) as caught:
        mha(torch.randn(2, 5, 16), torch.ones(2, 5, dtype=torch.bool))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("mask of shape (2, 5) does not broadcast")
    assert "a key-padding mask (B, T_k) goes in as mask[:, None, :]" in message


def test_wrong_input_rank_and_widths():
    mha = an.MultiheadAttention(16, 16, 4)
    with pytest.raises(ValueError, match=re.escape("got shape (5, 16)")):
        mha(torch.randn(5, 16))
    with pytest.raises(ValueError, match="width 12 but this attention has input_dim 16"):
        mha(torch.randn(2, 5, 12))
    cross = an.MultiheadAttention(16, 16, 4, kv_dim=10)
    with pytest.raises(ValueError, match=re.escape("kv_dim=10), got shape (2, 3, 8)")):
        cross(torch.randn(2, 5, 16), memory=torch.randn(2, 3, 8))
    with pytest.raises(ValueError, match=re.escape("q has width 4 but k has width 5")):
        an.scaled_dot_product(torch.randn(2, 4), torch.randn(3, 5), torch.randn(3, 5))
    with pytest.raises(ValueError, match=re.escape("k has 3 positions but v has 2")):
        an.scaled_dot_product(torch.randn(2, 4), torch.randn(3, 4), torch.randn(2, 5))


@pytest.mark.parametrize("q,k,v,error,message", [
    ((4,), (3, 4), (3, 5), ValueError, "q must be (..., T, d) with at least 2 dimensions, got "
                                       "shape (4,)"),
    ((2, 2, 4), (3, 3, 4), (3, 3, 5), ValueError, "the batch dimensions of q (2, 2, 4), "
                                                  "k (3, 3, 4) and v (3, 3, 5)"),
])
def test_reference_path_names_the_argument_a_shape_is_wrong_in(q, k, v, error, message):
    """A 1-D query (no T axis) was read as one query, and gave a (d_v,) result, not the
    (..., T, d_v) the signature states (F.scaled_dot_product_attention refuses it too); batches
    of 2 and 3 failed with a RuntimeError from inside the matmul that named neither q, k nor
    v."""
    with pytest.raises(error, match=re.escape(message)):
        an.scaled_dot_product(torch.randn(q), torch.randn(k), torch.randn(v))


def test_reference_path_names_mixed_dtypes_outside_autocast_only():
    """float64 queries against float32 keys failed in the matmul ("expected scalar type Double
    but found Float"); under autocast the matmul casts them itself, as it should."""
    q, k, v = torch.randn(3, 1, 3, 4).unbind(0)
    with pytest.raises(TypeError, match="q, k and v must have one dtype, got torch.float64, "
                                        "torch.float32 and torch.float32"):
        an.scaled_dot_product(q.double(), k, v)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        values, _ = an.scaled_dot_product(q.bfloat16(), k, v)
    assert values.dtype == torch.bfloat16
