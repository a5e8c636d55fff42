"""The Llama-family parts of attnlab.nn against references: RMSNorm against torch.nn.RMSNorm;
the gated feed-forward network against its formula and transformers' LlamaMLP; grouped-query
attention, QKV biases and QK-norm against transformers' Llama, Qwen2 and Qwen3 attention with
the same weights; the sliding window against an explicit formula; RoPE's frequencies against
transformers' rope init functions; cached decoding equal to the whole sequence at once.

transformers' modules are built here from tiny configs (nothing downloads). Tolerances are
float32's: a few ulps of O(1) values (1e-6 where the arithmetic is the same, 1e-5 where the
reductions are ordered differently)."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import attnlab.nn as an
from attnlab.nn.positional import rope_frequencies

transformers = pytest.importorskip("transformers")

D, H, T = 32, 4, 7


# ---- RMSNorm --------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [1e-6, 1e-5])
def test_rms_norm_and_its_gradients_equal_torch_rms_norms(eps):
    """The output, and the written-out gradient (float32) against autograd's of
    torch.nn.RMSNorm."""
    ours, theirs = an.RMSNorm(D, eps=eps), torch.nn.RMSNorm(D, eps=eps)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(D))
        theirs.weight.copy_(ours.weight)
    x = (3 * torch.randn(2, T, D) + 1).requires_grad_()
    x2 = x.detach().clone().requires_grad_()
    out = ours(x)
    assert_close(out, theirs(x2), atol=1e-6, rtol=1e-6)
    with torch.no_grad():  # the plain operations
        assert_close(ours(x), out.detach(), atol=1e-6, rtol=1e-6)
    assert sum(p.numel() for p in ours.parameters()) == D  # a scale, no shift
    g = torch.randn(2, T, D)
    out.backward(g)
    theirs(x2).backward(g)
    assert_close(x.grad, x2.grad, atol=1e-5, rtol=1e-5)
    assert_close(ours.weight.grad, theirs.weight.grad, atol=1e-5, rtol=1e-5)
    # float64: the first and second derivatives against finite differences (the second
    # derivative under torch.func: tests/nn/test_rms_norm_transforms.py)
    norm = an.RMSNorm(D, eps=eps).double()
    with torch.no_grad():
        norm.weight.copy_(torch.randn(D))
    x = torch.randn(2, 3, D, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(norm, (x,))
    assert torch.autograd.gradgradcheck(norm, (x,))


def test_rms_norm_keeps_a_low_precision_dtype():
    x = torch.randn(2, T, D, dtype=torch.bfloat16)
    out = an.RMSNorm(D).to(torch.bfloat16)(x)  # the statistic in float32, the output bf16
    assert out.dtype == torch.bfloat16
    assert_close(out.float(), an.RMSNorm(D)(x.float()), atol=2e-2, rtol=2e-2)


# ---- the gated feed-forward network ---------------------------------------------------------
@pytest.mark.parametrize("activation,act", [("silu", F.silu), ("gelu", F.gelu)])
@pytest.mark.parametrize("bias", [False, True])
def test_gated_feed_forward_is_its_formula(activation, act, bias):
    ff = an.GatedFeedForward(D, 48, activation=activation, bias=bias)
    x = torch.randn(2, T, D)
    g, u, d = ff.gate_proj, ff.up_proj, ff.down_proj
    expected = F.linear(act(F.linear(x, g.weight, g.bias)) * F.linear(x, u.weight, u.bias),
                        d.weight, d.bias)
    assert_close(ff(x), expected, atol=1e-6, rtol=1e-6)
    assert sum(p.numel() for p in ff.parameters()) == 3 * D * 48 + (2 * 48 + D) * bias
    ff.eval()
    assert_close(ff.step(x[:, :1]), expected[:, :1], atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("bias", [False, True])
def test_swiglu_equals_transformers_llama_mlp(bias):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaMLP

    theirs = LlamaMLP(LlamaConfig(hidden_size=D, intermediate_size=48, mlp_bias=bias,
                                  hidden_act="silu"))
    ours = an.GatedFeedForward(D, 48, activation="silu", bias=bias)
    ours.load_state_dict({k: v for k, v in theirs.state_dict().items()})  # Llama's names
    x = torch.randn(2, T, D)
    assert_close(ours(x), theirs(x), atol=1e-6, rtol=1e-6)


# ---- RoPE: θ and scaling --------------------------------------------------------------------
ROPE_CASES = [
    ({"rope_type": "default", "rope_theta": 10000.0}, {}),
    ({"rope_type": "default", "rope_theta": 500000.0}, {}),
    ({"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
     dict(scaling="linear", factor=4.0)),
    ({"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
     dict(scaling="llama3", factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
          original_max_len=8192)),
    ({"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 2.0,
      "high_freq_factor": 8.0, "original_max_position_embeddings": 256},
     dict(scaling="llama3", factor=8.0, low_freq_factor=2.0, high_freq_factor=8.0,
          original_max_len=256)),
]


@pytest.mark.parametrize("hf,ours", ROPE_CASES, ids=lambda c: str(c.get("rope_type", c)))
@pytest.mark.parametrize("head_dim", [16, 64])
def test_rope_frequencies_equal_transformers(hf, ours, head_dim):
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = LlamaConfig(hidden_size=head_dim * 2, num_attention_heads=2,
                         max_position_embeddings=1024)
    config.rope_parameters = dict(hf)
    kind = hf["rope_type"]
    if kind == "default":
        expected = 1.0 / hf["rope_theta"] ** (torch.arange(0, head_dim, 2).float() / head_dim)
    else:
        expected, attention_factor = ROPE_INIT_FUNCTIONS[kind](config, "cpu")
        assert attention_factor == 1.0  # the cos and sin are not rescaled for these kinds
    found = rope_frequencies(head_dim, hf["rope_theta"], **ours)
    assert_close(found, expected.float(), atol=0, rtol=1e-6)
    if kind == "llama3":  # the three bands are all there: unscaled, scaled and smoothed
        unscaled = rope_frequencies(head_dim, hf["rope_theta"])
        ratio = found / unscaled
        assert ratio.max() == 1 and ratio.min() == pytest.approx(1 / ours["factor"])
        assert ((ratio < 1) & (ratio > 1 / ours["factor"])).any()


def test_rotary_embedding_uses_its_theta_and_scaling():
    rope = an.RotaryEmbedding(8, 16, 500000.0, scaling="linear", factor=2.0)
    inv_freq = rope_frequencies(8, 500000.0) / 2
    assert_close(rope.cos, (torch.arange(16.0)[:, None] * inv_freq).cos())


def test_an_unknown_rope_scaling_is_refused():
    with pytest.raises(ValueError, match="rope scaling must be one of none, linear, llama3, "
                                         "got 'yarn'"):
        an.RotaryEmbedding(8, 16, scaling="yarn")


# ---- attention: grouped-query, QKV bias, QK-norm against transformers ------------------------
def _reference(family: str, num_kv_heads: int, theta: float, head_dim: int = D // H):
    import importlib

    name = {"llama": "Llama", "qwen2": "Qwen2", "qwen3": "Qwen3"}[family]
    config = getattr(transformers, f"{name}Config")(
        hidden_size=D, num_attention_heads=H, num_key_value_heads=num_kv_heads,
        intermediate_size=64, num_hidden_layers=1, vocab_size=50, rope_theta=theta,
        max_position_embeddings=64, head_dim=head_dim, rms_norm_eps=1e-6)
    config._attn_implementation = "eager"
    module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    attention = getattr(module, f"{name}Attention")(config, layer_idx=0).eval()
    rotary = getattr(module, f"{name}RotaryEmbedding")(config)
    with torch.no_grad():  # random biases and norm scales, so that copying them is tested
        for p in attention.parameters():
            p.copy_(torch.randn_like(p) * (0.2 if p.ndim == 2 else 1.0))
    return attention, rotary


def _ours_like(family: str, theirs, num_kv_heads: int, theta: float,
               head_dim: int = D // H) -> an.MultiheadAttention:
    ours = an.MultiheadAttention(  # embed_dim H·hd: the queries' width, o_proj's input
        D, H * head_dim, H, num_kv_heads=num_kv_heads, bias=False, qkv_bias=family == "qwen2",
        qk_norm=family == "qwen3", norm_eps=1e-6,
        pos_embeddings=an.RotaryEmbedding(head_dim, 64, theta)).eval()
    ours.set_qkv(theirs.q_proj.weight, theirs.k_proj.weight, theirs.v_proj.weight,
                 theirs.q_proj.bias, theirs.k_proj.bias, theirs.v_proj.bias)
    with torch.no_grad():
        ours.o_proj.weight.copy_(theirs.o_proj.weight)
        if family == "qwen3":
            ours.q_norm.weight.copy_(theirs.q_norm.weight)
            ours.k_norm.weight.copy_(theirs.k_norm.weight)
    return ours


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3"])
@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
def test_attention_equals_transformers(family, num_kv_heads):
    theta = 500000.0 if family == "llama" else 10000.0
    theirs, rotary = _reference(family, num_kv_heads, theta)
    ours = _ours_like(family, theirs, num_kv_heads, theta)
    x = torch.randn(2, T, D)
    positions = torch.arange(T)[None].expand(2, T)
    mask = torch.full((T, T), torch.finfo(torch.float32).min).triu(1)[None, None]
    with torch.no_grad():
        expected, _ = theirs(x, rotary(x, positions), mask)
        fused = ours(x, is_causal=True)  # the SDPA kernel (GQA through enable_gqa)
        explicit, weights = ours(x, is_causal=True, return_attention=True)  # reference path
    assert_close(fused, expected, atol=1e-5, rtol=1e-5)
    assert_close(explicit, expected, atol=1e-5, rtol=1e-5)
    assert weights.shape == (2, H, T, T)
    # the projection holds H_kv key and value heads: E + 2·H_kv·hd rows
    assert ours.qkv_proj.weight.shape == (D + 2 * num_kv_heads * (D // H), D)
    assert_close(torch.cat(ours.get_qkv()[:3]),
                 torch.cat([theirs.q_proj.weight, theirs.k_proj.weight, theirs.v_proj.weight]))


@pytest.mark.parametrize("family,head_dim", [("qwen3", 16), ("llama", 12), ("qwen2", 4)])
def test_a_head_width_of_its_own_equals_transformers(family, head_dim):
    """head_dim != D / H (Qwen3-0.6B: 1024 wide, 16 heads of 128): embed_dim = H·head_dim, so
    q is D -> H·hd, k and v D -> H_kv·hd, o H·hd -> D; fused, reference and stepped paths."""
    theirs, rotary = _reference(family, 2, 10000.0, head_dim)
    ours = _ours_like(family, theirs, 2, 10000.0, head_dim)
    x = torch.randn(2, T, D)
    positions = torch.arange(T)[None].expand(2, T)
    mask = torch.full((T, T), torch.finfo(torch.float32).min).triu(1)[None, None]
    with torch.no_grad():
        expected, _ = theirs(x, rotary(x, positions), mask)
        fused = ours(x, is_causal=True)
        explicit, _ = ours(x, is_causal=True, return_attention=True)
        cache = an.KVCache()
        stepped = torch.cat([ours.step(x[:, t:t + 1], cache) for t in range(T)], 1)
    for got in (fused, explicit, stepped):
        assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert ours.o_proj.weight.shape == (D, H * head_dim)
    assert cache.k.shape == (2, 2, T, head_dim)


@pytest.mark.parametrize("num_kv_heads,qk_norm,window", [(2, False, None), (1, True, None),
                                                         (2, False, 3), (4, True, 2)])
def test_cached_decoding_equals_the_whole_sequence(num_kv_heads, qk_norm, window):
    attn = an.MultiheadAttention(D, D, H, num_kv_heads=num_kv_heads, qk_norm=qk_norm,
                                 window=window, rotary=True, max_len=32).eval()
    x = torch.randn(2, T, D)
    with torch.no_grad():
        whole = attn(x, is_causal=True)
        prefill, stepped = an.KVCache(), an.KVCache()
        parts = [attn(x[:, :3], is_causal=True, cache=prefill)]  # a prompt, then one at a time
        parts += [attn(x[:, t:t + 1], is_causal=True, cache=prefill) for t in range(3, T)]
        steps = [attn.step(x[:, t:t + 1], stepped) for t in range(T)]  # the fast path
    assert_close(torch.cat(parts, 1), whole, atol=1e-5, rtol=1e-5)
    assert_close(torch.cat(steps, 1), whole, atol=1e-5, rtol=1e-5)
    assert prefill.k.shape == (2, num_kv_heads, T, D // H)  # the cache holds H_kv heads


@pytest.mark.parametrize("window", [1, 3, T])
def test_sliding_window_is_its_formula(window):
    attn = an.MultiheadAttention(D, D, H, num_kv_heads=2, window=window)
    x = torch.randn(2, T, D)
    wq, wk, wv, bq, bk, bv = attn.get_qkv()
    hd = D // H
    q = F.linear(x, wq, bq).view(2, T, H, hd).transpose(1, 2)
    k = F.linear(x, wk, bk).view(2, T, 2, hd).transpose(1, 2).repeat_interleave(2, dim=1)
    v = F.linear(x, wv, bv).view(2, T, 2, hd).transpose(1, 2).repeat_interleave(2, dim=1)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    allowed = (j <= i) & (i - j < window)  # query i sees keys i - W + 1..i
    scores = (q @ k.transpose(-1, -2) / math.sqrt(hd)).masked_fill(~allowed, float("-inf"))
    expected = attn.o_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(2, T, D))
    assert_close(attn(x, is_causal=True), expected, atol=1e-6, rtol=1e-5)
    _, weights = attn(x, is_causal=True, return_attention=True)
    assert (weights[..., ~allowed] == 0).all()


def test_defaults_keep_the_course_layout():
    """No new option given: the same parameters, names and shapes as before (state dicts of
    earlier runs load)."""
    attn = an.MultiheadAttention(D, D, H)
    assert {k: tuple(v.shape) for k, v in attn.state_dict().items()} == {
        "qkv_proj.weight": (3 * D, D), "qkv_proj.bias": (3 * D,),
        "o_proj.weight": (D, D), "o_proj.bias": (D,)}
    qwen2 = an.MultiheadAttention(D, D, H, bias=False, qkv_bias=True)
    assert qwen2.qkv_proj.bias is not None and qwen2.o_proj.bias is None


@pytest.mark.parametrize("kwargs,message", [
    (dict(num_kv_heads=3), r"num_heads \(4\) must be divisible by num_kv_heads \(3\)"),
    (dict(num_kv_heads=0), "num_kv_heads must be a positive integer, got 0"),
    (dict(window=0), "window must be a positive integer, got 0"),
    (dict(num_kv_heads=2, cross=True), "options of self-attention"),
])
def test_bad_attention_options_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        an.MultiheadAttention(D, D, H, **kwargs)


def test_a_window_without_causality_is_refused():
    with pytest.raises(ValueError, match="is_causal=True"):
        an.MultiheadAttention(D, D, H, window=2)(torch.randn(1, 3, D))
