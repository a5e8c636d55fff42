"""Initialisation that survives a meta-device build: each part's ``reset_parameters``.

Built under ``torch.device("meta")`` a model allocates nothing; ``model.to_empty(device=...)``
then gives every parameter and buffer uninitialised memory, and each module's
``reset_parameters()`` is what fills it again (as torch's ``nn.Linear``, ``nn.LayerNorm`` do).
Callers reach those methods in different orders: ``nn.Module.apply`` children first, a loop over
``model.modules()`` parents first, FSDP only the modules that hold tensors themselves. So an
initialisation other than torch's default is carried by the submodule holding the tensor: an
attention projection's own ``reset_parameters`` is Xavier-uniform, whichever order calls it,
and a module with computed buffers (sinusoidal tables, RoPE's cos/sin, ALiBi's slopes)
recomputes them in its ``reset_parameters``.

This covers the parts in ``attnlab.nn``. The models in ``attnlab.models`` (CausalLM, Seq2Seq,
the classifier, jets) initialise some weights in their own constructors (CausalLM draws every
matrix from N(0, 2/5D) and scales the projections into the residual stream by 1/√(2L)); a
meta build of one, reset, does not get those: build them normally.

Before this, a meta build then ``to_empty`` and ``reset_parameters`` gave attention
projections torch's Kaiming weights and random biases instead of Xavier and zeros, a learned
position table N(0, 1) instead of N(0, 0.02²), and left the sinusoidal and rotary tables as
whatever memory held, without a word.
"""
from __future__ import annotations

import copy
import weakref
from typing import Callable, TypeVar

import torch
from torch import nn

__all__ = ["init_with", "xavier_zero", "normal_002"]

M = TypeVar("M", bound=nn.Module)


def init_with(module: M, init: Callable[[M], None]) -> M:
    """Initialise ``module`` by ``init(module)`` now and on every later
    ``module.reset_parameters()`` (the method a meta-device build calls after ``to_empty``).

    The module keeps its class (``type(m) is nn.Linear`` still holds, its repr and state dict
    are unchanged); ``init`` is a module-level function, so the module still pickles and
    deep-copies (the copy resets itself, not the original). The method holds the module by a
    weak reference, so ``del model`` frees its memory at once, not at the next garbage
    collection (a reference cycle kept a third of a CausalLM's parameters allocated).

    Examples:
        >>> layer = init_with(nn.Linear(4, 4), xavier_zero)
        >>> with torch.no_grad():
        ...     _ = layer.bias.fill_(1.0)
        >>> layer.reset_parameters(); layer.bias.tolist()
        [0.0, 0.0, 0.0, 0.0]
    """
    module.reset_parameters = _Reset(module, init)
    init(module)
    return module


class _Reset:
    """``init(module)`` as the module's ``reset_parameters``, holding the module weakly: a
    strong reference from the module's own attribute would be a reference cycle."""

    def __init__(self, module: nn.Module, init: Callable) -> None:
        self.module, self.init = weakref.ref(module), init

    def __call__(self) -> None:
        self.init(self.module())

    def __reduce__(self):  # pickled with its module (pickle's memo resolves the loop)
        return _Reset, (self.module(), self.init)

    def __deepcopy__(self, memo: dict) -> _Reset:  # the copy resets the copied module
        return _Reset(copy.deepcopy(self.module(), memo), self.init)


def xavier_zero(linear: nn.Linear) -> None:
    """The Transformer's projection init (as in the course): Xavier-uniform weight, zero bias."""
    nn.init.xavier_uniform_(linear.weight)
    if linear.bias is not None:
        nn.init.zeros_(linear.bias)


def normal_002(embedding: nn.Embedding) -> None:
    """BERT's and GPT-2's table init: N(0, 0.02²)."""
    nn.init.normal_(embedding.weight, std=0.02)
