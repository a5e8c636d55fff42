"""``attnlab.nn.quantize`` and dtypes: a bfloat16 or float16 model is refused by name, and a
bf16-valued layer (a ``--precision bf16-true`` run's weights, loaded as float32) quantises to
what per-channel int8 means, computed here by hand.

The hand reference: each output channel c's scale s_W[c] = max|W[c]| / 127.5 (symmetric,
zero point 0), q_W = clamp(round(W / s_W), -128, 127); the input quantised per call from its
own range to 0..127 (the x86 engine's reduced range: s_x = (max(x, 0) - min(x, 0)) / 127,
zero point round(-min / s_x)); y = x' (q_W s_W)ᵀ + b. Tolerance: PyTorch may round a weight
that sits on a half-step the other way (one step of q_W), so the outputs agree within one
weight step times the largest input, plus float32's rounding of the sums.
"""
import pytest
import torch
from torch import nn

from attnlab.nn.quantize import quantize


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_model_is_refused_naming_its_dtype(dtype):
    model = nn.Sequential(nn.Linear(8, 4)).to(dtype)
    with pytest.raises(ValueError, match=rf"float32 model, got parameters of {dtype}.*\.float\(\)"):
        quantize(model)


def test_int8_linear_of_bf16_weights_equals_per_channel_int8_by_hand():
    torch.manual_seed(0)
    lin = nn.Linear(64, 16)
    with torch.no_grad():  # the weights of a bf16-true run, as its model.safetensors holds them
        lin.weight.copy_(lin.weight.to(torch.bfloat16).float())
    q = quantize(nn.Sequential(lin))[0]
    W, b = lin.weight.detach(), lin.bias.detach()
    scale = W.abs().amax(1, keepdim=True) / 127.5  # (out, 1)
    ints = torch.clamp(torch.round(W / scale), -128, 127)
    stored = q.weight()
    assert torch.equal(stored.q_per_channel_scales().float(), scale.squeeze(1))
    assert (ints - stored.int_repr().float()).abs().max() <= 1
    x = torch.randn(5, 64)
    lo, hi = min(x.min().item(), 0.0), max(x.max().item(), 0.0)
    sx = (hi - lo) / 127
    zero = round(-lo / sx)
    xq = (torch.clamp(torch.round(x / sx) + zero, 0, 127) - zero) * sx
    by_hand = xq @ (ints * scale).T + b
    step = scale.max().item() * x.abs().max().item()
    torch.testing.assert_close(q(x), by_hand, atol=step + 1e-5, rtol=0)
    # and the reference is int8's, not float32's: the float layer is further off than that
    assert (q(x) - lin(x)).abs().max() > step + 1e-5
