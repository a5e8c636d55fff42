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
                and torch.is_grad_enabled() and not torch.compiler.is_compiling()
                and not _transformed()):
            return _RMSNormFunction.apply(x, self.weight, self.eps)
        h = x.to(torch.promote_types(x.dtype, torch.float32))  # float64 stays float64
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

    Its backward is differentiable: where a graph of it is built (``create_graph=True``, a
    gradient penalty) it recomputes r from x, so a second derivative is right. ``torch.func``
    transforms and forward-mode AD do not run it: :func:`_transformed` sends them to the plain
    operations, whose derivatives of every order torch knows (tests/nn/test_rms_norm_transforms.py).
    """

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, eps: float) -> Tensor:
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True).add_(eps))
        ctx.eps = eps
        ctx.save_for_backward(x, r, weight)
        return x * r * weight

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, r, weight = ctx.saved_tensors
        graph = torch.is_grad_enabled()  # create_graph: a second derivative may follow
        if graph:  # r as a function of x, not the saved constant
            r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + ctx.eps)
        gx = gw = None
        gxx = (grad * x).reshape(-1, x.shape[-1])  # g·x, shared by both gradients
        if ctx.needs_input_grad[0]:  # r·(g·γ − x·r²·mean(g·γ·x)), matrix-vector for the mean
            s = (gxx @ weight).reshape(r.shape) * (r * r / x.shape[-1])
            gx = grad * weight - x * s
            gx = gx * r if graph else gx.mul_(r)
        if ctx.needs_input_grad[1]:  # Σ g·x·r over the rows
            gw = r.reshape(1, -1) @ gxx
            gw = gw.reshape(-1)
        return gx, gw, None


def _transformed() -> bool:
    """Whether a ``torch.func`` transform (grad, vmap, jvp, jacfwd, hessian) or a forward-mode
    AD level (``torch.autograd.forward_ad.dual_level``) is active: an old-style Function's saved
    r would enter them as a constant, so the plain operations are used."""
    return (torch._C._functorch.maybe_current_level() is not None
            or torch.autograd.forward_ad._current_level >= 0)


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
