"""``attnlab train lm --recipe NAME``: named sets of settings, declared once here.

A recipe's settings go over lm's defaults and under ``--config`` and the flags: a flag given
wins over the recipe's value, and ``attnlab train`` says so in one line. ``config.yaml``
records the recipe's name and every setting the run trained with.

``fast`` is the recipe chosen for time-to-loss at nanoGPT's CPU shape (4 layers x 128, block
64): Llama's parts but LayerNorm (RoPE, SwiGLU, no biases), QK-norm, warm-up-stable-decay at
three times nanoGPT's learning rate with its decay over the last 80% of the steps (in a run of
a few hundred steps the loss falls most while the rate decays), a short warm-up, no
dropout, and AdamW's beta1 at 0.8 (modded-nanogpt's): a momentum that forgets faster reached
the target loss in fewer steps. LayerNorm, not RMSNorm: on a CPU ``nn.LayerNorm`` is one
fused kernel where RMSNorm is several operations, and with it the recipe reached the same
loss in the same steps at a cheaper step. What it measured against nanoGPT's recipe, and
each piece's share, is in benchmarks/RESULTS.md ("time_to_loss",
``benchmarks/time_to_loss.py``). It sets no size: give the shape as usual. SwiGLU has three
matrices where GPT-2's feed-forward network has two, so the benchmark gives it
``--dim-feedforward`` 8/3·D (344 at D = 128): GPT-2's parameters and multiply-adds. At 4·D
a step cost 1.24x as much on the benchmark's CPU (benchmarks/RESULTS.md).

``fast-small`` is ``fast`` with a size: 2 layers x 80, 2 heads, SwiGLU 216 (158k parameters,
a fifth of nanoGPT's CPU model). A run of a few hundred steps of 12 x 64 characters sees far
fewer characters than a model of nanoGPT's size could use; the smaller model needs more steps
to nanoGPT's loss (500 against 300) at under a third of the step's cost, and got there in
0.14-0.15x nanoGPT's time (benchmarks/RESULTS.md, "time_to_loss, model shapes").

Examples:
    >>> RECIPES["fast"]["positional"], RECIPES["fast"]["schedule"]
    ('rope', 'wsd')
    >>> recipe_text("fast")[:40]
    'positional rope, norm layer, ff swiglu, '
    >>> recipe_text("fast-small").split(", ")[-4:]
    ['num-layers 2', 'model-dim 80', 'num-heads 2', 'dim-feedforward 216']
"""
from __future__ import annotations

from typing import Any

__all__ = ["RECIPES", "recipe_text"]

_FAST = {
    "positional": "rope", "norm": "layer", "ff": "swiglu", "bias": False, "qk_norm": True,
    "schedule": "wsd", "cooldown": 0.8, "lr": 3e-3, "warmup": 20, "dropout": 0.0, "beta1": 0.8,
}
RECIPES: dict[str, dict[str, Any]] = {
    "fast": _FAST,
    # fast at 2 layers x 80 (SwiGLU of 8/3·D, rounded up to a multiple of 8: 216)
    "fast-small": {**_FAST, "num_layers": 2, "model_dim": 80, "num_heads": 2,
                   "dim_feedforward": 216},
}


def recipe_text(name: str) -> str:
    """What recipe ``name`` sets, as ``--help`` and the docs show it."""
    return ", ".join(f"no {k.replace('_', '-')}" if v is False else k.replace("_", "-")
                     if v is True else f"{k.replace('_', '-')} {v:g}"
                     if isinstance(v, float) else f"{k.replace('_', '-')} {v}"
                     for k, v in RECIPES[name].items())
