"""Collect the attention of any attnlab model on one input, as the page's layers.

``collect_layers(model, *inputs)`` runs the model once inside ``attnlab.nn.capture`` and
returns one ``Layer`` per attention module that computed weights, in the model's order, named
as in ``model.named_modules()``. ``with_tokens`` then says which tokens each layer relates.

Kinds and groups:
    - a module named ``...cross_attn`` is "cross" (decoder queries over encoder keys), group
      "cross";
    - a module called with ``is_causal=True`` (attnlab's language models and decoders) is
      "causal", and so is a square map whose every weight above the diagonal is exactly 0
      (a mask passed as a tensor; masked keys get weight 0 exactly, so a map that merely looks
      causal cannot be taken for one); a one-token map is causal only by the first rule;
    - anything else is "self".
    In an encoder–decoder model (module names with ``encoder.`` and ``decoder.``) the groups
    are "encoder", "decoder" and "cross"; otherwise a layer's group is its kind.

Shapes: H heads, T_q queries, T_k keys; weights are taken from batch row 0.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from ..nn.attention import MultiheadAttention
from ..nn.capture import capture
from .data import Layer

__all__ = ["collect_layers", "layer_kind", "with_tokens"]


def layer_kind(name: str, weights: torch.Tensor) -> str:
    """"cross", "causal" or "self" for the weights (H, T_q, T_k) of the module ``name``."""
    if name.rsplit(".", 1)[-1].startswith("cross"):
        return "cross"
    H, T_q, T_k = weights.shape
    if T_q == T_k > 1 and not torch.triu(weights, diagonal=1).any():
        return "causal"
    return "self"


def _group(name: str, kind: str, encoder_decoder: bool) -> str:
    if not encoder_decoder or kind == "cross":
        return kind
    return "decoder" if ".decoder." in f".{name}" or name.startswith("decoder") else "encoder"


@torch.no_grad()
def collect_layers(model: nn.Module, *inputs, names=None, **kwargs) -> list[Layer]:
    """Every attention layer's weights while ``model(*inputs, **kwargs)`` runs once.

    Args:
        model: any module whose attention is attnlab's (``MultiheadAttention`` and the
            blocks, stacks and models built on it).
        *inputs, **kwargs: what ``model`` takes; the first row of the batch is kept.
        names: which modules (see ``attnlab.nn.capture``); default every attention module.

    Returns:
        One ``Layer`` per attention module that ran, in module order, without tokens.

    Raises:
        ValueError: if no attention module ran.

    Examples:
        >>> from attnlab.models import ElementPredictor
        >>> model = ElementPredictor(10, 16, 10, num_heads=2, num_layers=2).eval()
        >>> layers = collect_layers(model, torch.randint(10, (1, 5)))
        >>> [(layer.name, layer.kind, tuple(layer.weights.shape)) for layer in layers]
        [('transformer.layers.0.self_attn', 'self', (2, 5, 5)), ('transformer.layers.1.self_attn', 'self', (2, 5, 5))]
    """
    causal: set[str] = set()
    hooks = [m.register_forward_pre_hook(
        lambda _m, _args, kw, name=name: causal.add(name) if kw.get("is_causal") else None,
        with_kwargs=True) for name, m in model.named_modules() if isinstance(m, MultiheadAttention)]
    try:
        with capture(model, names) as cache:
            model(*inputs, **kwargs)
    finally:
        for hook in hooks:
            hook.remove()
    order = [name for name, _ in model.named_modules() if name in cache]
    if not order:
        raise ValueError(f"{type(model).__name__} computed no attention weights on this input")
    encoder_decoder = any(".encoder." in f".{n}." for n in order) and any(
        ".decoder." in f".{n}." for n in order)
    layers = []
    for name in order:
        weights = cache[name][0].float()  # (H, T_q, T_k), batch row 0
        kind = "causal" if name in causal else layer_kind(name, weights)
        layers.append(Layer(name, kind, weights, group=_group(name, kind, encoder_decoder)))
    return layers


def with_tokens(layers: Sequence[Layer], tokens: Sequence[str],
                target_tokens: Sequence[str] | None = None) -> list[Layer]:
    """The layers with the tokens each relates: encoder and self layers ``tokens`` over
    ``tokens``; decoder layers ``target_tokens`` over themselves; cross layers
    ``target_tokens`` (queries) over ``tokens`` (keys). Without ``target_tokens`` every layer
    gets ``tokens`` (a decoder-only model). Layers over ``tokens`` alone carry no tokens of
    their own: they are the page's (``attention_data(layers, tokens)``)."""
    out = []
    for layer in layers:
        if target_tokens is None or layer.group not in ("decoder", "cross"):
            q = k = None
        elif layer.group == "decoder":
            q, k = list(target_tokens), list(target_tokens)
        else:
            q, k = list(target_tokens), list(tokens)
        out.append(Layer(layer.name, layer.kind, layer.weights, layer.group, q, k))
    return out
