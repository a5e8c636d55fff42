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
