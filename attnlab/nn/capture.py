"""Capture activations by module name, without changing what any layer returns.

Shapes: B batch, H heads, T_q query length, T_k key length.

Like TransformerLens' hook points (``hook_pattern``): inside ``with capture(model) as cache``
every selected attention module computes its weights on the reference path and hands them to
the cache under its module name, ``cache["encoder.layers.0.self_attn"]`` -> (B, H, T_q, T_k).
Module outputs can be captured too (forward hooks), under ``"<name>:output"``. Outside a
capture, attention keeps the fused kernel and pays one attribute check per call.

A module's attention weights are captured when it has a tuple attribute ``_attention_sinks``
and calls each sink with its weights; ``MultiheadAttention`` does (so would any attention variant).
"""
from __future__ import annotations

import fnmatch
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

from torch import Tensor, nn

__all__ = ["capture", "ActivationCache"]

Names = None | str | Iterable[str] | Callable[[str], bool]


class ActivationCache(dict):
    """What a ``capture`` recorded: module name -> tensor (or a list of tensors, one per call,
    with ``accumulate=True``). Attention weights are keyed by the attention module's name,
    outputs by ``"<name>:output"``."""

    def __missing__(self, key: str):
        # a bare KeyError('self_attn') left the reader to guess why nothing was recorded
        raise KeyError(f"nothing was recorded under {key!r} (recorded: {sorted(self)}): a "
                       f"module's attention weights are recorded when it has "
                       f"`_attention_sinks`, as MultiheadAttention has, and runs inside the "
                       f"capture")

    def record(self, key: str, value, accumulate: bool, detach: bool) -> None:
        if detach and isinstance(value, Tensor):
            value = value.detach()
        if accumulate:
            self.setdefault(key, []).append(value)
        else:
            self[key] = value


def _matcher(names: Names) -> Callable[[str], bool]:
    if names is None:
        return lambda name: True
    if callable(names):
        return names
    patterns = [names] if isinstance(names, str) else list(names)
    return lambda name: any(fnmatch.fnmatchcase(name, p) for p in patterns)


class _Sink:
    """Called by an attention module with its weights (B, H, T_q, T_k)."""

    def __init__(self, cache: ActivationCache, key: str, accumulate: bool, detach: bool) -> None:
        self.cache, self.key, self.accumulate, self.detach = cache, key, accumulate, detach

    def __call__(self, weights: Tensor) -> None:
        self.cache.record(self.key, weights, self.accumulate, self.detach)


def _attach_sink(module: nn.Module, sink: _Sink) -> Callable[[], None]:
    module._attention_sinks = module._attention_sinks + (sink,)

    def remove() -> None:
        module._attention_sinks = tuple(s for s in module._attention_sinks if s is not sink)
    return remove


def _output_hook(cache: ActivationCache, key: str, accumulate: bool, detach: bool):
    def hook(module, args, output):
        cache.record(key, output, accumulate, detach)
    return hook


@contextmanager
def capture(model: nn.Module, names: Names = None, *, attention: bool = True,
            outputs: bool = False, accumulate: bool = False,
            detach: bool = True) -> Iterator[ActivationCache]:
    """Record attention weights (and, optionally, module outputs) by module name.

    Args:
        model: any module; its submodules are named as in ``model.named_modules()``.
        names: which modules: None (all), a name or ``fnmatch`` pattern
            (``"encoder.layers.*.self_attn"``), a list of them, or a predicate on the name.
        attention: record the weights of the selected attention modules (reference path).
        outputs: record the outputs of the selected modules under ``"<name>:output"``.
        accumulate: keep a list of every call's value (incremental decoding) instead of the
            last one.
        detach: store detached tensors (False keeps them in the autograd graph).

    Returns:
        A context manager giving an ``ActivationCache`` (a dict) that fills while the model runs.

    Raises:
        ValueError: if ``names`` selects no module.

    Shape:
        attention weights (B, H, T_q, T_k), True-masked keys at 0; outputs as the module returns.

    Examples:
        >>> from attnlab.nn import TransformerEncoder
        >>> enc = TransformerEncoder(2, input_dim=8, num_heads=2, dim_feedforward=16)
        >>> with capture(enc) as cache:
        ...     _ = enc(torch.randn(1, 5, 8))
        >>> cache["layers.1.self_attn"].shape
        torch.Size([1, 2, 5, 5])
    """
    match = _matcher(names)
    selected = [(name, m) for name, m in model.named_modules() if match(name)]
    if not selected:
        known = [name for name, _ in model.named_modules()][:8]
        raise ValueError(f"capture: names {names!r} select no module of "
                         f"{type(model).__name__}; its modules include {known}")
    cache = ActivationCache()
    removers: list[Callable[[], None]] = []
    try:
        for name, module in selected:
            if attention and hasattr(module, "_attention_sinks"):
                removers.append(_attach_sink(module, _Sink(cache, name, accumulate, detach)))
            if outputs:
                hook = _output_hook(cache, f"{name}:output", accumulate, detach)
                removers.append(module.register_forward_hook(hook).remove)
        yield cache
    finally:
        for remove in reversed(removers):
            remove()
