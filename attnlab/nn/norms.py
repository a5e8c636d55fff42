"""Normalisation layers: LayerNorm (torch's) and RMSNorm.

Shapes: any (..., D); the statistics are over the last dimension D.

    LayerNorm(x) = (x − mean(x)) / √(var(x) + ε) · γ + β            (Ba et al., 2016)
    RMSNorm(x)   = x / √(mean(x²) + ε) · γ                          (Zhang & Sennrich, 2019)

RMSNorm drops the centring and the shift: one statistic instead of two, and no bias. Llama,
Qwen, Mistral and Gemma use it in place of LayerNorm.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ..activation_names import NORMS  # torch-free: configs offer them as choices
from .arguments import checked

__all__ = ["RMSNorm", "make_norm", "NORMS"]


class RMSNorm(nn.Module):
    """Root-mean-square normalisation: ``x / √(mean(x²) + eps) · weight``.

    The statistic is computed in float32 and the result cast back to the input's dtype (as
    Llama's implementation does), so bf16 inputs are normalised as accurately as float32 ones.

    Args:
        dim: width D of the last dimension.
        eps: added to the mean square (Llama uses 1e-5 or 1e-6; 0 or more).

    Raises:
        ValueError: when built, for a ``dim`` that is not a positive integer or a negative
            ``eps`` (whose square root of a mean square near 0 is NaN).

    Shape:
        (..., D) -> (..., D).

    Examples:
        >>> norm = RMSNorm(4)
        >>> norm(torch.tensor([[3.0, -3.0, 3.0, -3.0]])).detach()
        tensor([[ 1.0000, -1.0000,  1.0000, -1.0000]])
    """

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.dim, self.eps = checked("dim", dim), checked("eps", eps)
        self.weight = nn.Parameter(torch.ones(dim))  # γ

    def reset_parameters(self) -> None:
        """γ = 1 (after ``to_empty``, a meta-device build's memory), as ``nn.RMSNorm``."""
        nn.init.ones_(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        if (x.dtype in (torch.float32, torch.float64) and x.dtype == self.weight.dtype
                and torch.is_grad_enabled() and not torch.compiler.is_compiling()):
            return _RMSNormFunction.apply(x, self.weight, self.eps)[0]
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)  # x / RMS(x)
        return self.weight * h.to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.dim}, eps={self.eps}"


class _RMSNormFunction(torch.autograd.Function):
    """RMSNorm in float32 or float64 with its gradient written out: with n = x·r and
    r = 1/√(mean(x²) + ε), ∂L/∂x = r·(g·γ − n·mean(g·γ·n)) and ∂L/∂γ = Σ g·n. Why: on a CPU
    autograd's gradients of the five operations above take a fifth longer than these few
    (benchmarks/RESULTS.md, "time_to_loss"); the values are the same to float rounding
    (tests/nn/test_llama_parts.py). Under ``torch.compile`` the plain operations are used,
    which the compiler fuses.

    It is a function as ``torch.func`` takes them (``setup_context``, a generated vmap rule,
    a ``jvp``), and its backward is differentiable: a second derivative (a gradient penalty,
    ``torch.func.hessian``) recomputes r from x. Once-differentiable, as it was, the second
    derivative was silently zero where unused inputs are allowed (``gradgradcheck``) and
    ``torch.func.grad``, ``vmap`` and ``jacfwd`` of any model with an RMSNorm refused to run.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True).add_(eps))  # (..., 1)
        return x * r * weight, r

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        x, weight, ctx.eps = inputs
        r = output[1]
        ctx.mark_non_differentiable(r)
        ctx.save_for_backward(x, r, weight)
        ctx.save_for_forward(x, r, weight)

    @staticmethod
    def backward(ctx, grad: Tensor, _grad_r: Tensor | None):
        x, r, weight = ctx.saved_tensors
        graph = torch.is_grad_enabled()  # create_graph: a second derivative may follow
        if graph:  # r as a function of x, not the saved constant
            r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + ctx.eps)
        n = x * r
        gx = gw = None
        if ctx.needs_input_grad[0]:
            gn = grad * weight
            gx = gn - n * (gn * n).mean(-1, keepdim=True)
            gx = gx * r if graph else gx.mul_(r)
        if ctx.needs_input_grad[1]:
            gw = (grad * n).reshape(-1, n.shape[-1]).sum(0)
        return gx, gw, None

    @staticmethod
    def jvp(ctx, x_t: Tensor | None, weight_t: Tensor | None, _eps_t):
        """Forward mode: dn = r·(dx − n·mean(n·dx)), dy = dn·γ + n·dγ."""
        x, r, weight = ctx.saved_tensors
        n = x * r
        dy = torch.zeros_like(n)
        if x_t is not None:
            dy = dy + r * (x_t - n * (n * x_t).mean(-1, keepdim=True)) * weight
        if weight_t is not None:
            dy = dy + n * weight_t
        return dy, None


def make_norm(kind: str, dim: int, *, eps: float = 1e-5, bias: bool = True) -> nn.Module:
    """The norm ``kind`` ("layer": ``nn.LayerNorm`` with a shift when ``bias``; "rms":
    ``RMSNorm``, which has none) of width ``dim``.

    Examples:
        >>> make_norm("rms", 8)
        RMSNorm(8, eps=1e-05)
    """
    if kind == "layer":
        return nn.LayerNorm(dim, eps=eps, bias=bias)
    if kind == "rms":
        return RMSNorm(dim, eps=eps)
    raise ValueError(f"norm must be one of {', '.join(NORMS)}, got {kind!r}")
