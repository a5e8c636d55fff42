"""int8 weights: ``attnlab.nn.quantize`` turns every linear layer into
PyTorch's dynamic int8 linear, leaves the float model alone, and the int8 model's numbers stay
close to float32's on both of generation's paths (the full forward and the cached step).

Tolerances: per-channel int8 weights and per-call int8 activations give a relative error of
about 1% per matrix product (|y_int8 - y_fp32| / max|y_fp32|, measured 0.6-1.1% on random
384-wide products). Through this random 48-wide, 2-layer model it measured 3.2% of the logits'
range (int8 vs float32) and 4.8% (the int8 step vs the int8 forward, whose activations are
quantised over other ranges); we allow 10%. A model that forgot its int8 layers (float
weights) fails by raising, and a wrong cache or position is off by far more. What int8 costs
a trained model is measured as perplexity (tests/cli/test_quantize_cli.py, benchmarks)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from attnlab.models import CausalLM, Seq2SeqTransformer
from attnlab.nn import KVCache, quantize


def lm(**kw) -> CausalLM:
    torch.manual_seed(0)
    args = dict(vocab_size=40, model_dim=48, num_heads=4, num_layers=2, max_len=64)
    return CausalLM(**{**args, **kw}).eval()


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


def test_every_linear_holds_int8_weights_and_the_float_model_is_untouched():
    model = lm()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    q = quantize(model)
    assert not any(type(m) is nn.Linear for m in q.modules())
    linears = [m for m in q.modules() if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)]
    assert len(linears) == 2 * 4 + 1  # qkv, o, two feed-forward per layer, and the head
    assert all(m.weight().dtype == torch.qint8 for m in linears)
    assert linears[0].weight().qscheme() == torch.per_channel_affine  # a scale per row
    assert all(type(m) is nn.Linear for m in (model.lm_head, model.decoder.layers[0].self_attn.o_proj))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_inplace_converts_the_model_itself():
    model = lm()
    assert quantize(model, inplace=True) is model
    assert type(model.lm_head) is not nn.Linear


def test_int8_logits_are_close_to_float32():
    model = lm()
    x = torch.randint(0, 40, (3, 20))
    with torch.no_grad():
        assert rel_err(quantize(model)(x), model(x)) < 0.10


def test_the_cached_step_of_the_int8_model_matches_its_forward():
    # generation's fast path (MultiheadAttention.step, FeedForward.step, the head) calls the int8
    # layers, not float weights that are no longer there
    q = quantize(lm())
    x = torch.randint(0, 40, (2, 12))
    with torch.no_grad():
        full = q(x)[:, -1]  # (B, V): the last position of the whole sequence
        cache = q.decoder.make_cache()
        q.hidden_states(x[:, :-1], cache=cache)  # the first 11 tokens into the cache
        stepped = q.step(x[:, -1:], cache, positions=torch.full((2, 1), 11))  # (B, V)
        cache = q.decoder.make_cache()
        q.hidden_states(x[:, :-1], cache=cache)
        misplaced = q.step(x[:, -1:], cache, positions=torch.full((2, 1), 5))
    # the step quantises its activations over one token, the forward over all twelve: close,
    # not equal
    assert stepped.shape == full.shape == (2, 40)
    assert rel_err(stepped, full) < 0.10 < rel_err(misplaced, full)  # the tolerance tells them apart


def test_greedy_generation_of_the_int8_model_follows_float32_on_a_peaked_model():
    # a model whose next token is clear (weights scaled up): int8 picks the same tokens
    model = lm()
    with torch.no_grad():
        model.lm_head.weight.mul_(8)
    x = torch.randint(0, 40, (2, 5))
    out32, out8 = model.generate(x, 20), quantize(model).generate(x, 20)
    assert (out32 == out8).float().mean() > 0.9


def test_seq2seq_translates_with_int8_weights_greedy_and_beam():
    torch.manual_seed(0)
    model = Seq2SeqTransformer(30, 30, model_dim=32, num_heads=2, num_layers=1,
                               dim_feedforward=64).eval()
    q = quantize(model)
    src = torch.randint(3, 30, (2, 7))
    for beams in (1, 3):
        out = q.generate(src, 6, num_beams=beams)
        assert out.shape[0] == 2 and out.dtype == torch.long


def test_bad_kind_and_non_cpu_models_are_refused():
    with pytest.raises(ValueError, match="kind must be 'int8', got 'int4'"):
        quantize(lm(), "int4")
    with pytest.raises(ValueError, match="runs on the CPU"):
        quantize(lm().to("meta"))
