"""``attention_view``: the attention page from maps you have, or from a model and an input.

    from attnlab.viz import attention_view
    view = attention_view(model.get_attention_maps(x), tokens)   # L × (1, H, T, T)
    view                # the last line of a Jupyter cell: the page, inline
    view.save("attention.html")

Shapes: L layers, H heads, T_q queries, T_k keys.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from .collect import collect_layers, layer_kind, with_tokens
from .data import Layer, attention_data
from .page import AttentionView

__all__ = ["attention_view", "attention_view_of", "layers_of"]


def _as_torch(weights: Any):
    import torch

    w = torch.as_tensor(weights).detach().float().cpu()
    return w[0] if w.ndim == 4 and w.shape[0] == 1 else w


def layers_of(maps: Any, kind: str | None = None, group: str | None = None) -> list[Layer]:
    """``maps`` in any form ``attention_view`` accepts -> Layers (each layer's kind read from
    its weights when ``kind`` is None; the group is the kind unless given)."""
    if isinstance(maps, Mapping):
        items = list(maps.items())
    elif hasattr(maps, "shape"):
        w = _as_torch(maps)
        items = [("layers.0", w)] if w.ndim <= 3 else [(f"layers.{i}", m) for i, m in enumerate(w)]
    else:
        maps = list(maps)
        if maps and all(isinstance(m, Layer) for m in maps):
            return maps
        items = [(f"layers.{i}", m) for i, m in enumerate(maps)]
    layers = []
    for name, weights in items:
        w = _as_torch(weights)
        w = w[None] if w.ndim == 2 else w
        if w.ndim != 3:  # a batch's maps, (B, H, T_q, T_k): the page shows one example's
            batch = (f", a batch of {w.shape[0]} examples; pass example b's, m[b] of each "
                     f"map" if w.ndim == 4 else "")
            raise ValueError(f"maps: {name!r} is {tuple(w.shape)}, not one example's map "
                             f"(H, T_q, T_k){batch}")
        k = kind or layer_kind(name, w)
        layers.append(Layer(name, k, w, group or k))
    return layers


def attention_view(maps: Any, query_tokens: Sequence[Any],
                   key_tokens: Sequence[Any] | None = None, *, kind: str | None = None,
                   group: str | None = None, title: str | None = None, task: str | None = None,
                   run: str | None = None) -> AttentionView:
    """An interactive page of attention maps: every layer and head, tokens on both axes.

    Args:
        maps: one layer's (H, T_q, T_k) map, a list of them (one per layer, as
            ``get_attention_maps`` returns: a leading batch of one is dropped; a larger batch
            is refused), an (L, H, T_q, T_k) tensor, a dict of module name -> map, or a list
            of ``attnlab.explorer.Layer``.
        query_tokens: the T_q tokens of the rows.
        key_tokens: the T_k tokens of the columns (default ``query_tokens``).
        kind: "self", "causal" or "cross" for every layer (default: "causal" where every
            weight above the diagonal is 0, else "self").
        group: the name the page shows for these layers (default: the kind).
        title: shown over the page and kept in its data.
        task: the task name, shown over the page and kept in its data.
        run: the run directory, shown over the page and kept in its data.

    Returns:
        An ``AttentionView``: shown inline by Jupyter, written by ``.save(path)``.

    Raises:
        attnlab.explorer.data.WeightsError: (a ``ValueError``) maps that are not attention
            weights: a weight not finite or not from 0 to 1, or a query's row that is not a
            softmax's (logits, a transposed map), naming the layer, head and query
            (``attention_data``).

    Examples:
        >>> from attnlab.models import ElementPredictor
        >>> model = ElementPredictor(10, 16, 10, num_heads=2, num_layers=2).eval()
        >>> x = torch.randint(10, (1, 5))
        >>> view = attention_view(model.get_attention_maps(x), [str(t) for t in x[0].tolist()])
        >>> view
        AttentionView(2 layers, 5 query x 5 key tokens)
        >>> view.save("attention.html")
        PosixPath('attention.html')
    """
    layers = layers_of(maps, kind, group)
    return AttentionView(attention_data(layers, query_tokens, key_tokens, title=title,
                                        task=task, run=run))


def attention_view_of(model, *inputs, tokens: Sequence[Any] | None = None,
                      target_tokens: Sequence[Any] | None = None, title: str | None = None,
                      **kwargs) -> AttentionView:
    """The page of ``model``'s attention on one input: ``model(*inputs, **kwargs)`` runs once
    (batch row 0 is shown) and every attention module's weights are collected.

    Works for any model built on attnlab's attention: the course's ``TransformerPredictor``
    (with its one-hot input), ``ElementPredictor``, the classifiers, ``CausalLM``,
    ``Seq2SeqTransformer`` (``src, tgt``: three groups — encoder, decoder, cross) and
    ``JetTagger``.

    Args:
        model: the model (put it in eval mode to see it without dropout).
        *inputs: what ``model`` takes, positionally.
        **kwargs: what ``model`` takes by name (other than the arguments below).
        tokens: the input's tokens (the source's, for an encoder–decoder model); default
            their positions "0", "1", ...
        target_tokens: the decoder's input tokens of an encoder–decoder model; default their
            positions.
        title: a line over the page.

    Raises:
        attnlab.explorer.data.WeightsError: (a ``ValueError``) where a collected map is not
            attention weights (a diverged model's NaN), naming the layer, head and query
            (``attention_data``).

    Examples:
        >>> from attnlab.training import TransformerPredictor
        >>> model = TransformerPredictor(input_dim=10, model_dim=16, num_heads=2, num_classes=10,
        ...                              num_layers=2, lr=1e-3, warmup=10, max_iters=100).eval()
        >>> x = torch.nn.functional.one_hot(torch.tensor([[3, 1, 4, 1, 5]]), 10).float()
        >>> attention_view_of(model, x, tokens=["3", "1", "4", "1", "5"])
        AttentionView(2 layers, 5 query x 5 key tokens)
    """
    layers = collect_layers(model, *inputs, **kwargs)
    if tokens is None:
        source = next((layer for layer in layers if layer.group in ("self", "causal", "encoder")),
                      layers[0])
        tokens = [str(i) for i in range(source.weights.shape[-1])]
    decoder = [layer for layer in layers if layer.group in ("decoder", "cross")]
    if decoder and target_tokens is None:
        target_tokens = [str(i) for i in range(decoder[0].weights.shape[1])]
    return AttentionView(attention_data(with_tokens(layers, tokens, target_tokens if decoder
                                                    else None), tokens, title=title))
