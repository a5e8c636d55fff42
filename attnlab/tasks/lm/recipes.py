"""``attnlab train lm --recipe NAME``: named sets of settings, declared once here.

A recipe's settings go over lm's defaults and under ``--config`` and the flags: a flag given
wins over the recipe's value, and ``attnlab train`` says so in one line. ``config.yaml``
records the recipe's name and every setting the run trained with.

``fast`` is the recipe that reached nanoGPT's held-out loss soonest on a CPU at nanoGPT's
CPU shape (4 layers x 128, block 64; ``benchmarks/time_to_loss.py``, benchmarks/RESULTS.md):
Llama's parts (RoPE, RMSNorm, SwiGLU, no biases), QK-norm, warm-up-stable-decay at a higher
learning rate, a short warm-up, and no dropout. It sets no size: give the shape as usual.

Examples:
    >>> RECIPES["fast"]["positional"], RECIPES["fast"]["schedule"]
    ('rope', 'wsd')
    >>> recipe_text("fast")[:40]
    'positional rope, norm rms, ff swiglu, no'
"""
from __future__ import annotations

from typing import Any

__all__ = ["RECIPES", "recipe_text"]

RECIPES: dict[str, dict[str, Any]] = {
    "fast": {
        "positional": "rope", "norm": "rms", "ff": "swiglu", "bias": False, "qk_norm": True,
        "schedule": "wsd", "lr": 3e-3, "warmup": 20, "dropout": 0.0,
    },
}


def recipe_text(name: str) -> str:
    """What recipe ``name`` sets, as ``--help`` and the docs show it."""
    return ", ".join(f"no {k.replace('_', '-')}" if v is False else k.replace("_", "-")
                     if v is True else f"{k.replace('_', '-')} {v:g}"
                     if isinstance(v, float) else f"{k.replace('_', '-')} {v}"
                     for k, v in RECIPES[name].items())
