"""Weight-copy helpers shared by every Hugging Face conversion (``hf.py``, ``marian.py``).

Both conversion modules import from here and never from each other's privates, so the interop
package has no import cycle (``tests/test_imports.py`` checks the whole package).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ..activation_names import ACT_FROM_HF, ACT_TO_HF  # light: the specs read them too

__all__ = ["ACT_FROM_HF", "ACT_TO_HF", "activation", "copy", "copy_linear", "copy_norm"]


def activation(name: str, model_type: str) -> str:
    """attnlab's name for a Hugging Face activation; ValueError naming an unsupported one."""
    if name not in ACT_FROM_HF:
        raise ValueError(f"{model_type}: activation {name!r} has no attnlab equivalent; "
                         f"supported: {', '.join(sorted(ACT_FROM_HF))}")
    return ACT_FROM_HF[name]


@torch.no_grad()
def copy(dst: Tensor, src: Tensor) -> None:
    """``dst.copy_(src)`` after checking the shapes agree (a wrong walk fails loudly)."""
    if dst.shape != src.shape:
        raise ValueError(f"shape mismatch while converting: {tuple(src.shape)} -> {tuple(dst.shape)}")
    dst.copy_(src)


def copy_linear(dst: nn.Linear, weight: Tensor, bias: Tensor | None) -> None:
    copy(dst.weight, weight)
    if bias is not None:
        copy(dst.bias, bias)


def copy_norm(dst: nn.LayerNorm, src: nn.LayerNorm) -> None:
    copy(dst.weight, src.weight)
    copy(dst.bias, src.bias)
