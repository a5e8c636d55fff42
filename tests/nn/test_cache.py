"""Incremental decoding with a key/value cache gives the same outputs as the full forward."""
import pytest
import torch
from torch.testing import assert_close

import attnlab.nn as an

ARGS = dict(input_dim=16, num_heads=4, dim_feedforward=32)
TOL = dict(atol=1e-5, rtol=1e-5)  # float32; the same sums, split differently


def _run_in_chunks(model, x, chunks, cache, **kwargs):
    outputs, start = [], 0
    for size in chunks:
        outputs.append(model(x[:, start : start + size], cache=cache, **kwargs))
        start += size
    return torch.cat(outputs, dim=1)


@pytest.mark.parametrize("rotary", [False, True])
@pytest.mark.parametrize("chunks", [[1] * 7, [3, 1, 2, 1]], ids=["token-by-token", "chunks"])
def test_incremental_self_attention_equals_full_causal_forward(rotary, chunks):
    enc = an.TransformerEncoder(2, rotary=rotary, **ARGS).eval()
    x = torch.randn(2, 7, 16)
    full = enc(x, is_causal=True)
    incremental = _run_in_chunks(enc, x, chunks, enc.make_cache(), is_causal=True)
    assert_close(incremental, full, **TOL)


def test_cache_grows_past_its_capacity():
    mha = an.MultiheadAttention(16, 16, 4).eval()
    x = torch.randn(1, 9, 16)
    cache = an.KVCache(capacity=2)
    incremental = _run_in_chunks(mha, x, [1] * 9, cache, is_causal=True)
    assert cache.length == 9 and len(cache) == 9
    assert_close(incremental, mha(x, is_causal=True), **TOL)


def test_incremental_decoder_equals_full_and_computes_memory_keys_once():
    dec = an.TransformerDecoder(2, **ARGS).eval()
    tgt, memory = torch.randn(2, 6, 16), torch.randn(2, 5, 16)
    memory_mask = an.padding_mask(torch.tensor([5, 2]), 5)
    full = dec(tgt, memory, memory_mask=memory_mask)

    calls = []
    for layer in dec.layers:
        layer.cross_attn.kv_proj.register_forward_hook(lambda *_: calls.append(1))
    cache = dec.make_cache()
    incremental = _run_in_chunks(dec, tgt, [1] * 6, cache, memory=memory, memory_mask=memory_mask)
    assert_close(incremental, full, **TOL)
    assert len(calls) == 2  # one key/value projection of the memory per layer, not per step
    assert cache[0]["cross"].length == 5 and cache[0]["self"].length == 6


def test_reorder_selects_batch_rows_for_beam_search():
    mha = an.MultiheadAttention(16, 16, 4).eval()
    x = torch.randn(3, 4, 16)
    cache = an.KVCache()
    mha(x[:, :3], cache=cache, is_causal=True)
    index = torch.tensor([2, 2, 0])
    cache.reorder(index)
    step = mha(x[index, 3:], cache=cache, is_causal=True)
    assert_close(step, mha(x[index], is_causal=True)[:, 3:], **TOL)


@pytest.mark.parametrize("window", [1, 3, 8])
def test_a_windowed_cache_keeps_only_what_the_window_reads_and_gives_the_same_outputs(window):
    """KVCache(window=W) drops keys older than the window: chunks through ``forward`` and
    single steps through ``step`` (a left-padded row's key mask included) equal the whole
    sequence at once, while the cache holds at most 2·W steps after the prompt."""
    B, H_kv, hd, T, T0 = 2, 2, 4, 40, 10
    attn = an.MultiheadAttention(16, 16, 4, num_kv_heads=H_kv, window=window, rotary=True,
                                 max_len=64).eval()
    x = torch.randn(B, T, 16)
    mask = torch.ones(B, 1, 1, T, dtype=torch.bool)
    mask[1, ..., :5] = False  # row 1 left-padded
    with torch.no_grad():
        whole = attn(x, mask, is_causal=True)
        for fast in (False, True):
            cache, parts, held = an.KVCache(window=window), [], []
            parts.append(attn(x[:, :T0], mask[..., :T0], is_causal=True, cache=cache))
            for t in range(T0, T):
                part, m = x[:, t : t + 1], mask[..., : t + 1]  # the mask over every key so far
                parts.append(attn.step(part, cache, key_mask=m) if fast
                             else attn(part, m, is_causal=True, cache=cache))
                held.append((cache.stored, cache.nbytes()))
            assert_close(torch.cat(parts, 1), whole, **TOL)
            assert cache.length == T and cache.start > 0
            assert max(s for s, _ in held) <= 2 * window
            assert max(n for _, n in held) <= 2 * B * H_kv * max(2 * window, T0) * hd * 4
    unbounded = an.KVCache()
    unbounded.update(torch.zeros(B, H_kv, T, hd), torch.zeros(B, H_kv, T, hd))
    assert unbounded.stored == T  # without a window every key stays


def test_a_mask_of_another_length_is_still_refused_by_a_windowed_cache():
    attn = an.MultiheadAttention(16, 16, 4, window=2).eval()
    cache = an.KVCache(window=2)
    x = torch.randn(1, 6, 16)
    for t in range(5):
        attn(x[:, t : t + 1], is_causal=True, cache=cache)
    with pytest.raises(ValueError, match="mask"):
        attn(x[:, 5:], torch.ones(1, 1, 1, 4, dtype=torch.bool), is_causal=True, cache=cache)
