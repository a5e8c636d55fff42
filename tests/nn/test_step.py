"""The one-token ``step`` of attention, blocks and stacks (generation's fast path) computes what
the ordinary forward pass with a cache computes. fp32, atol 1e-5 (the same sums, fused
differently)."""
import pytest
import torch
from torch.testing import assert_close

import attnlab.nn as an

ARGS = dict(input_dim=16, num_heads=4, dim_feedforward=32)
TOL = dict(atol=1e-5, rtol=1e-5)
PARTS = {
    "none": lambda: {},
    "rope": lambda: {"pos_embeddings": an.RotaryEmbedding(4, 64)},
    "alibi": lambda: {"attn_bias": an.ALiBi(4)},
}


def _prefill_then_steps(model, x, T0, step):
    """Forward the first T0 positions with a cache, then the rest one ``step`` at a time."""
    cache = model.make_cache() if hasattr(model, "make_cache") else an.KVCache()
    first = model(x[:, :T0], is_causal=True, cache=cache)
    if isinstance(cache, list):
        for c in cache:
            c.reserve(x.shape[1])
    else:
        cache.reserve(x.shape[1])
    rest = [step(x[:, t : t + 1], cache) for t in range(T0, x.shape[1])]
    return torch.cat([first, *rest], dim=1)


@pytest.mark.parametrize("parts", list(PARTS))
def test_attention_step_equals_full_causal_forward(parts):
    mha = an.MultiheadAttention(16, 16, 4, **PARTS[parts]()).eval()
    x = torch.randn(2, 7, 16)
    out = _prefill_then_steps(mha, x, 3, lambda h, c: mha.step(h, c))
    assert_close(out, mha(x, is_causal=True), **TOL)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("parts", list(PARTS))
def test_encoder_stack_step_equals_full_causal_forward(parts, norm_first):
    enc = an.TransformerEncoder(2, norm_first=norm_first, **PARTS[parts](), **ARGS).eval()
    x = torch.randn(2, 7, 16)
    out = _prefill_then_steps(enc, x, 3, lambda h, c: enc.step(h, c))
    assert_close(out, enc(x, is_causal=True), **TOL)


def test_block_step_with_padded_keys_and_per_row_positions():
    """Left-padded rows: padded keys masked, rotary positions counted per row from the first
    real token; each row gives what it gives alone."""
    block = an.EncoderBlock(**ARGS, pos_embeddings=an.RotaryEmbedding(4, 64)).eval()
    x = torch.randn(2, 6, 16)
    real = torch.tensor([[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1]], dtype=torch.bool)
    positions = (real.long().cumsum(1) - 1).clamp_min(0)  # (B, T)
    cache = an.KVCache()
    block(x[:, :4], real[:, None, None, :4], is_causal=True, cache=cache,
          positions=positions[:, :4])
    cache.reserve(6)
    steps = [block.step(x[:, t : t + 1], cache, positions=positions[:, t : t + 1],
                        key_mask=real[:, None, None, : t + 1]) for t in (4, 5)]
    alone = block(x[1:, 2:], is_causal=True)  # row 1 without its padding
    assert_close(torch.cat(steps, 1)[1], alone[0, 2:], **TOL)
    full = block(x[:1], is_causal=True)
    assert_close(torch.cat(steps, 1)[0], full[0, 4:], **TOL)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_decoder_stack_step_equals_full_forward(norm_first):
    dec = an.TransformerDecoder(2, norm_first=norm_first, **ARGS).eval()
    tgt, memory = torch.randn(2, 6, 16), torch.randn(2, 5, 16)
    memory_mask = an.padding_mask(torch.tensor([5, 2]), 5)
    cache = dec.make_cache()
    steps = [dec.step(tgt[:, t : t + 1], memory, cache, memory_mask) for t in range(6)]
    assert_close(torch.cat(steps, 1), dec(tgt, memory, memory_mask=memory_mask), **TOL)


def test_step_in_training_mode_takes_the_general_path():
    block = an.EncoderBlock(**ARGS, dropout=0.5).train()
    cache = an.KVCache()
    torch.manual_seed(1)
    a = block.step(torch.randn(1, 1, 16), cache)
    assert cache.length == 1 and a.shape == (1, 1, 16)
