"""Generation's linear layers in bf16/fp16 (``attnlab.nn.quantize.linear``) multiply by the
weight itself: PyTorch's CPU ``mm`` with the (in, out) copy that float32 uses is many times
slower in bf16 (benchmarks/RESULTS.md, "llama_real"), and the copy would double the memory of
a half-precision model."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlab.models import CausalLM
from attnlab.nn.quantize import linear


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_weight_is_used_as_it_is_with_no_second_copy(dtype):
    layer = torch.nn.Linear(24, 40).to(dtype)
    x = torch.randn(1, 1, 24).to(dtype)
    with torch.no_grad():
        assert torch.equal(linear(layer, x), F.linear(x, layer.weight, layer.bias))
    assert "_in_out_weight" not in layer.__dict__


def test_a_bf16_models_generation_keeps_no_copy_of_its_weights():
    torch.manual_seed(0)
    model = CausalLM(vocab_size=30, model_dim=32, num_heads=4, num_layers=2, max_len=64,
                     positional="rope", norm="rms", ff="swiglu", num_kv_heads=2).eval()
    model = model.to(torch.bfloat16)
    model.generate(torch.tensor([[1, 2, 3]]), 5)
    copies = [n for n, m in model.named_modules() if "_in_out_weight" in m.__dict__]
    assert copies == []
