"""``--optimizer muon --precision 64``: Muon's Newton–Schulz steps run in float64 (PyTorch's
``torch.optim.Muon`` rounds them to bfloat16: its update was 7% from float64's here), and
in any other dtype its step stays PyTorch's, bit for bit (test_muon.py's
``test_each_step_is_torch_muons_on_the_matrices_and_adamws_on_the_rest``)."""
import math

import torch

from attnlab.models import CausalLM
from attnlab.models.configs import CausalLMConfig
from attnlab.training.module import make_optimizer, optimizer_groups

from .test_muon import _loss, _newton_schulz5

MUON = {"lr": 1e-2, "warmup": 0, "weight_decay": 0.1, "beta2": 0.99, "optimizer": "muon",
        "schedule": "constant"}
NAMES = ("decoder.layers.0.self_attn.qkv_proj.weight", "decoder.layers.1.linear_net.3.weight")


def _lm(dtype: torch.dtype) -> CausalLM:
    torch.manual_seed(0)
    return CausalLM(CausalLMConfig(vocab_size=11, model_dim=16, num_heads=2, num_layers=2,
                                   dim_feedforward=32)).to(dtype)


def _steps(model: CausalLM, n: int) -> list[dict[str, torch.Tensor]]:
    """Each step's change of the matrices NAMES, and the change by hand (float64 NS)."""
    opt, _ = make_optimizer(optimizer_groups(model, MUON), MUON, model_dim=16, max_steps=10)
    params = dict(model.named_parameters())
    momentum = {k: torch.zeros_like(params[k]) for k in NAMES}
    out = []
    for step in range(n):
        _loss(model, step).backward()
        assert [g["lr"] for g in opt.param_groups] == [1e-2] * 3  # constant, no warm-up
        before, by_hand = {k: params[k].detach().clone() for k in NAMES}, {}
        for k in NAMES:
            grad, (rows, cols) = params[k].grad, params[k].shape
            momentum[k] = 0.95 * momentum[k] + 0.05 * grad
            update = _newton_schulz5(0.05 * grad + 0.95 * momentum[k])
            by_hand[k] = -1e-2 * 0.1 * before[k] - 1e-2 * 0.2 * math.sqrt(max(rows, cols)) * update
        opt.step()
        opt.zero_grad()
        out.append({k: (params[k].detach() - before[k], by_hand[k]) for k in NAMES})
    return out


def test_under_float64_muons_step_is_newton_schulz_in_float64():
    """Tolerance: 1e-10 relative (Frobenius) to the update written out in float64; with
    PyTorch's bfloat16 Newton–Schulz it was 7e-2 away."""
    for step in _steps(_lm(torch.float64), 3):
        for name, (moved, by_hand) in step.items():
            assert moved.dtype == torch.float64
            assert (moved - by_hand).norm() < 1e-10 * by_hand.norm(), name


def test_a_float32_matrix_beside_float64_ones_keeps_pytorchs_step():
    """Each matrix takes its own dtype's path: a float32 one in the same optimiser as a
    float64 one moves exactly as ``torch.optim.Muon`` moves it alone (bfloat16 Newton–Schulz),
    not by a float32 Newton–Schulz; the float64 one by float64's. Tolerance: 0 (the same
    operations)."""
    from attnlab.training.muon import Muon, newton_schulz

    g = torch.Generator().manual_seed(0)
    wide = torch.randn(4, 6, generator=g, dtype=torch.float64)
    narrow = torch.randn(5, 3, generator=g)
    ours = [torch.nn.Parameter(wide.clone()), torch.nn.Parameter(narrow.clone())]
    alone = torch.nn.Parameter(narrow.clone())
    kw = {"lr": 1e-2, "weight_decay": 0.1, "adjust_lr_fn": "match_rms_adamw"}
    mixed, reference = Muon(ours, **kw), torch.optim.Muon([alone], **kw)
    for _ in range(3):
        grads = torch.randn(4, 6, generator=g, dtype=torch.float64), torch.randn(5, 3, generator=g)
        ours[0].grad, ours[1].grad, alone.grad = grads[0], grads[1].clone(), grads[1].clone()
        before = ours[0].detach().clone()
        mixed.step()
        reference.step()
        torch.testing.assert_close(ours[1].detach(), alone.detach(), rtol=0, atol=0)
        assert ours[0].dtype == torch.float64 and not torch.equal(ours[0], before)
