"""``LoRALinear``'s forward, computed as two thin products beside the frozen layer,
against the forward it replaced, which formed W = W₀ + (α/r) B A first: the same outputs and
the same gradients with copied weights."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

from attnlab.nn import LoRALinear

# float32: the two orders of the same sums differ by rounding only
TOL = dict(atol=1e-5, rtol=1e-5)


def _merged_forward(layer: LoRALinear, x):
    """The forward it replaced: the merged weight, then one product."""
    weight = layer.base.weight + layer.scale * (layer.lora_B @ layer.lora_A)
    return F.linear(x, weight, layer.base.bias)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(5, 24), (2, 7, 24)])
def test_the_thin_products_give_the_merged_weights_outputs_and_gradients(bias, shape):
    torch.manual_seed(0)
    layer = LoRALinear(nn.Linear(24, 40, bias=bias), rank=4, alpha=8.0)
    with torch.no_grad():
        layer.lora_B.normal_()  # a trained update (B starts at zero)
    x = torch.randn(*shape, requires_grad=True)
    ours = layer(x)
    expected = _merged_forward(layer, x)
    assert_close(ours, expected, **TOL)
    grad = torch.randn_like(ours)
    got = torch.autograd.grad(ours, (x, layer.lora_A, layer.lora_B), grad)
    want = torch.autograd.grad(expected, (x, layer.lora_A, layer.lora_B), grad)
    for g, w in zip(got, want):
        assert_close(g, w, **TOL)
    assert_close(layer.merged()(x), ours, **TOL)  # merge_lora's layer computes the same


def test_dropout_reaches_the_update_only_and_is_off_in_eval():
    torch.manual_seed(0)
    layer = LoRALinear(nn.Linear(16, 8), rank=2, alpha=2.0, dropout=0.5)
    x = torch.randn(64, 16)
    assert torch.equal(layer(x), layer.base(x))  # B = 0: the frozen layer, whatever dropout does
    with torch.no_grad():
        layer.lora_B.normal_()
    trained = layer(x)
    assert not torch.allclose(trained, _merged_forward(layer, x))  # some inputs were dropped
    assert_close(layer.eval()(x), _merged_forward(layer, x), **TOL)


def test_a_block_forward_never_forms_the_merged_weight(monkeypatch):
    """The blocks' dtype check read ``o_proj.weight``, which for a LoRA layer is W₀ + BA, a
    matrix product: two of them in every block's forward, for a dtype (+55% at width 512)."""
    from attnlab.nn import EncoderBlock
    from attnlab.nn.lora import add_lora

    torch.manual_seed(0)
    block = EncoderBlock(32, 4, 64, dropout=0.0)
    add_lora(block, 2, 4.0, targets="all-linear")
    formed = []
    merged = LoRALinear.weight.fget
    monkeypatch.setattr(LoRALinear, "weight",
                        property(lambda self: formed.append(self) or merged(self)))
    block(torch.randn(2, 5, 32))
    assert formed == []
    with pytest.raises(TypeError, match="x has dtype torch.float64"):
        block(torch.randn(2, 5, 32, dtype=torch.float64))  # the check still holds
