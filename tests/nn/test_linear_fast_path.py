"""Generation's linear layers at small batch multiply by an (in, out) copy of each weight
(``attnlab.nn.quantize.linear``; faster products at batch 1 on the CPU: benchmarks/RESULTS.md,
"generate_lm — the step's products with weights laid out (in, out)"). The copy must
never be stale: after the weights change in place, are loaded, or change dtype, the next token
comes from the new weights; and with gradients on, the step uses the weights themselves."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from attnlab.models import CausalLM
from attnlab.nn.quantize import linear


def lm() -> CausalLM:
    torch.manual_seed(0)
    return CausalLM(vocab_size=30, model_dim=32, num_heads=4, num_layers=2, max_len=64).eval()


def next_logits(model, ids):
    """The last position's logits through the cached step (prefill, then one step)."""
    with torch.no_grad():
        cache = model.decoder.make_cache()
        model.hidden_states(ids[:, :-1], cache=cache)
        return model.step(ids[:, -1:], cache, positions=torch.full((ids.shape[0], 1),
                                                                   ids.shape[1] - 1))


def test_the_small_batch_product_equals_f_linear():
    layer = torch.nn.Linear(24, 40)
    for shape in [(1, 1, 24), (8, 1, 24), (3, 24)]:
        x = torch.randn(shape)
        with torch.no_grad():
            torch.testing.assert_close(linear(layer, x), F.linear(x, layer.weight, layer.bias),
                                       rtol=1e-5, atol=1e-6)


def test_the_step_follows_weights_changed_in_place_and_loaded():
    model, ids = lm(), torch.randint(0, 30, (1, 9))
    torch.testing.assert_close(next_logits(model, ids), model(ids)[:, -1].detach(), rtol=1e-4,
                               atol=1e-5)
    with torch.no_grad():  # an optimiser step, as far as the weights know
        for p in model.parameters():
            p.mul_(1.5)
    after = next_logits(model, ids)
    torch.testing.assert_close(after, model(ids)[:, -1].detach(), rtol=1e-4, atol=1e-5)
    other = lm()
    with torch.no_grad():
        other.lm_head.weight.add_(0.3)  # the tied embedding too
    model.load_state_dict(other.state_dict())
    torch.testing.assert_close(next_logits(model, ids), other(ids)[:, -1].detach(), rtol=1e-4,
                               atol=1e-5)


def test_the_step_follows_a_change_of_dtype():
    model, ids = lm(), torch.randint(0, 30, (2, 7))
    next_logits(model, ids)  # the float32 copies are made
    model = model.double()
    out = next_logits(model, ids)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, model(ids)[:, -1].detach(), rtol=1e-9, atol=1e-10)


def test_with_gradients_on_the_step_trains_the_weights_themselves():
    model, ids = lm(), torch.randint(0, 30, (1, 6))
    cache = model.decoder.make_cache()
    with torch.no_grad():
        model.hidden_states(ids[:, :-1], cache=cache)
    model.step(ids[:, -1:], cache, positions=torch.full((1, 1), 5)).sum().backward()
    qkv = model.decoder.layers[0].self_attn.qkv_proj.weight
    assert qkv.grad is not None and qkv.grad.abs().sum() > 0
