"""The attention page's data: layers of weights and the tokens they relate, as plain JSON.

This is what ``attnlab view`` embeds in its page, in ``<script type="application/json"
id="attnlab-attention">``, so that other tools can read it::

    {"version": 1, "task": "translate", "run": "runs/numbers", "title": "...", "digits": 4,
     "query_tokens": [...], "key_tokens": [...], "focus": {"axis": "q", "index": 33},
     "layers": [{"name": "transformer.encoder.layers.0.self_attn", "kind": "self",
                 "group": "encoder", "weights": [[[...]]],           # [head][query][key]
                 "mean": [[...]]},                                   # [query][key]
                ...]}

``kind`` is "self" (every token sees every token), "causal" (a token sees itself and the
tokens before it) or "cross" (decoder queries over encoder keys). ``group`` names the part of
the model a layer belongs to ("encoder", "decoder", "cross", ...); the page shows one group at a
time and switches between them. A layer whose tokens differ from the page's (the translation's
cross-attention: target queries over source keys) carries its own ``query_tokens`` and
``key_tokens``. ``masked``, where a layer has it, is T_q × T_k of 0 and 1: 1 where every head's
weight is exactly 0, as a mask makes it (a graph's non-edge, a padded key; a causal layer's
later keys are its kind's), drawn grey, not as a weight of 0 the model chose. ``focus``, where
there is one, is the query row the page opens pinned on (a graph node's, which ``--input``
names; absent or null: none). ``record``, on a page of a run (``attnlab view``), is which
weights are shown and what the run reached: ``{"weights": {"file", "step", "steps", "which"},
"metrics": {...} or null, "note", "metrics_of", "shown": {"weights": "...", "metrics":
[[name, text]], "metrics_of": "..." or null}}`` (``attnlab.explorer.record``; ``metrics_of``:
the weights the metrics are of, where they are not those shown). Weights are rounded to ``digits`` decimals (4;
benchmarks/RESULTS.md, "explorer", measures a page's size), each correctly (``rounded``:
0.07849 is 0.0785), and the page shows them at that precision, so each number it shows is the
model's weight rounded once. ``mean``, in a layer of more than one head, is the T_q × T_k
mean over its heads, taken before rounding (a mean of rounded weights can be off in the last
digit).

Weights are checked where they enter, once, by ``check_weights``: each finite and from 0 to 1,
each query's row a softmax's (summing to 1 within ``ROW_SUM_ATOL`` and the page's rounding, or
all 0: a query that may attend to nothing). A map of logits, a transposed map or a NaN is
refused in one line naming the layer, head and query.

Torch is not needed here: weights may be tensors, NumPy arrays or nested lists.

Shapes: H heads, T_q query tokens, T_k key tokens.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .record import check_record, metrics_of_text, shown_metrics, weights_text

__all__ = ["KINDS", "ROW_SUM_ATOL", "Layer", "attention_data", "check_data", "check_weights",
           "checked_arrays", "masked_cells", "row_sum_tolerance", "rounded", "underflows_early",
           "WeightsError"]

KINDS = ("self", "causal", "cross")
VERSION = 1


@dataclass
class Layer:
    """One attention module's weights on one input.

    Args:
        name: the module's name in the model (``"encoder.layers.0.self_attn"``).
        kind: "self", "causal" or "cross".
        weights: (H, T_q, T_k) array-like; a leading batch of one, (1, H, T_q, T_k), is dropped
            and a single (T_q, T_k) map is one head.
        group: the part of the model it belongs to, for the page's switch (default: the kind).
        query_tokens: this layer's own query tokens, when they are not the page's.
        key_tokens: this layer's own key tokens, when they are not the page's.
    """

    name: str
    kind: str
    weights: Any
    group: str | None = None
    query_tokens: Sequence[str] | None = None
    key_tokens: Sequence[str] | None = None


def _as_heads(weights: Any, name: str) -> np.ndarray:
    if hasattr(weights, "detach"):  # a torch tensor, without importing torch
        weights = weights.detach().float().cpu().numpy()
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim == 4 and w.shape[0] == 1:
        w = w[0]
    if w.ndim == 2:
        w = w[None]
    if w.ndim != 3:
        raise ValueError(f"layer {name!r}: weights must be (H, T_q, T_k), got shape {w.shape}")
    return w


# The rule a page's weights keep, declared once and checked where they enter (attention_data's
# arrays, a page's data read back): each weight is finite and from 0 to 1, and each query's row
# is a softmax's, summing to 1 -- or every weight in it is exactly 0, a query that may attend to
# nothing (DESIGN's masks). A sum is taken within ROW_SUM_ATOL of 1: float16 and bfloat16
# weights, each within 0.4% of its float32 value, sum to 1 within 0.004; and a page's weights,
# each rounded to `digits` decimals, within half a unit of the last decimal per key more.
ROW_SUM_ATOL = 0.01


class WeightsError(ValueError):
    """Weights that break the rule above: not finite, not from 0 to 1, or a row that is not a
    softmax's (``check_weights``'s one line names the layer, head and query)."""


def row_sum_tolerance(n_keys: int, digits: int | None = None) -> float:
    """How far from 1 a row of ``n_keys`` weights may sum: ``ROW_SUM_ATOL``, and half a unit
    of the last of ``digits`` decimals per key where each weight was rounded to them.

    Examples:
        >>> row_sum_tolerance(8), row_sum_tolerance(8, digits=4)
        (0.01, 0.0104)
    """
    return ROW_SUM_ATOL + (0.0 if digits is None else n_keys * 0.5 * 10.0 ** -digits)


def _token(tokens: Sequence[str] | None, i: int) -> str:
    if tokens is None or i >= len(tokens):
        return ""
    text = repr(tokens[i])
    return f" ({text[:24] + '...' if len(text) > 27 else text})"


def check_weights(w: np.ndarray, name: str, *, query_tokens: Sequence[str] | None = None,
                  key_tokens: Sequence[str] | None = None, digits: int | None = None,
                  heads: str = "head", rows: bool = True) -> None:
    """Raise ``ValueError`` unless the (H, T_q, T_k) weights ``w`` of the layer ``name`` keep
    the rule above (``ROW_SUM_ATOL``), in one line naming the head, the query (and its token)
    and why: the first weight that is not finite or not from 0 to 1, else the first row whose
    sum is neither 1 nor all 0s. ``digits``: the weights were rounded to so many decimals;
    ``rows``: whether rows must sum to 1 (not for a mean of heads); ``heads``: how a head is
    named ("head", then its index).

    Examples:
        >>> check_weights(np.array([[[0.5, 0.5], [0.0, 0.0]]]), "attn")
        >>> check_weights(np.array([[[0.5, 0.25]]]), "attn", query_tokens=["a"])
        Traceback (most recent call last):
        ...
        attnlab.explorer.data.WeightsError: layer 'attn', head 0, query 0 ('a'): its weights sum to 0.75, not 1 (within 0.01) nor all 0, as a softmax's row does
    """
    def where(h: int, q: int) -> str:
        head = heads if w.shape[0] == 1 and heads != "head" else f"{heads} {h}"
        return f"layer {name!r}, {head}, query {q}{_token(query_tokens, q)}"

    finite = np.isfinite(w)
    bad = ~finite | (np.where(finite, w, 0.0) < 0) | (np.where(finite, w, 0.0) > 1)
    if bad.any():
        h, q, k = np.unravel_index(int(np.flatnonzero(bad)[0]), w.shape)
        value = float(w[h, q, k])
        why = "not finite" if not math.isfinite(value) else "not from 0 to 1"
        raise WeightsError(f"{where(h, q)}: the weight on key {k}{_token(key_tokens, k)} is "
                         f"{value!r}, {why}")
    if not rows:
        return
    sums = w.sum(axis=-1)  # (H, T_q)
    tolerance = row_sum_tolerance(w.shape[-1], digits)
    bad = (np.abs(sums - 1.0) > tolerance) & (w != 0).any(axis=-1)
    if bad.any():
        h, q = np.unravel_index(int(np.flatnonzero(bad)[0]), bad.shape)
        raise WeightsError(f"{where(h, q)}: its weights sum to {float(sums[h, q]):.4g}, not 1 "
                         f"(within {tolerance:.3g}) nor all 0, as a softmax's row does")


def underflows_early(weights: Any) -> bool:
    """Whether ``weights`` (a tensor, an array, a list of them) hold float16 numbers, where a
    softmax weight under about 6e-8 is exactly 0: there a 0 need not be a mask's. (float32's
    and bfloat16's reach 1e-45, logits about 100 apart.)"""
    if isinstance(weights, (list, tuple)):
        return any(underflows_early(w) for w in weights)
    kind = str(getattr(weights, "dtype", ""))
    return kind.endswith("float16") and "bfloat" not in kind


def masked_cells(w: np.ndarray, kind: str, *, half: bool = False) -> np.ndarray:
    """(T_q, T_k) bool of one layer's (H, T_q, T_k) weights: where every head's weight is
    exactly 0, as a mask makes it (softmax of -inf: a graph's non-edge, a padded key), taken
    before rounding (a weight the model made small is not 0 in every head); a causal layer's
    later keys are left to its kind. None for weights that were float16 (``half``,
    ``underflows_early``), whose small weights are 0 too. The page and the PNG figures grey
    these cells."""
    if half:
        return np.zeros(w.shape[1:], dtype=bool)
    masked = (w == 0).all(axis=0)
    if kind == "causal":
        masked &= np.tril(np.ones(masked.shape, dtype=bool))
    return masked


def rounded(w: np.ndarray, digits: int) -> np.ndarray:
    """``w`` rounded to ``digits`` decimals as Python's ``round`` does: the number's exact
    binary value, ties to even. ``np.round`` scales by 10**digits first, which can carry a
    weight just under a half over it, so the cells within reach of a half are redone here.

    Examples:
        >>> rounded(np.array([0.07849, 0.0625, 1.0]), 3).tolist()
        [0.078, 0.062, 1.0]
    """
    out = np.round(w, digits)
    scaled = np.abs(w) * 10.0 ** digits
    near = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6
    out[near] = [round(float(x), digits) for x in w[near]]
    return out


def _shown_weights(w: np.ndarray, digits: int) -> dict[str, list]:
    """A layer's (H, T_q, T_k) weights rounded for the page, and the mean of its heads where it
    has more than one: taken before rounding, as the mean of the rounded heads can be off in
    the last digit shown (0.10004, 0.10004, 0.10014: 0.1000 from the rounded, 0.1001 true)."""
    shown = {"weights": rounded(w, digits).tolist()}
    if len(w) > 1:
        shown["mean"] = rounded(w.mean(axis=0), digits).tolist()  # (T_q, T_k)
    return shown


def _tokens(tokens: Sequence[Any], what: str) -> list[str]:
    if isinstance(tokens, str):
        raise ValueError(f"{what} must be a list of tokens, not the string {tokens!r}")
    return [str(t) for t in tokens]


def _layer_entry(layer: Layer, queries: list[str], keys: list[str], digits: int) -> dict:
    """One layer as the page's JSON holds it (over the page's tokens unless it has its own)."""
    if layer.kind not in KINDS:
        raise ValueError(f"layer {layer.name!r}: kind must be one of {KINDS}, "
                         f"got {layer.kind!r}")
    w = _as_heads(layer.weights, layer.name)
    q = queries if layer.query_tokens is None else _tokens(layer.query_tokens, "query_tokens")
    k = keys if layer.key_tokens is None else _tokens(layer.key_tokens, "key_tokens")
    if w.shape[1:] != (len(q), len(k)):
        raise ValueError(f"layer {layer.name!r}: weights are {w.shape[1]} x {w.shape[2]} "
                         f"(T_q x T_k) but there are {len(q)} query and {len(k)} key tokens")
    check_weights(w, layer.name, query_tokens=q, key_tokens=k)
    entry = {"name": layer.name, "kind": layer.kind, "group": layer.group or layer.kind,
             **_shown_weights(w, digits)}
    masked = masked_cells(w, layer.kind, half=underflows_early(layer.weights))
    if masked.any():
        entry["masked"] = masked.astype(int).tolist()
    if layer.query_tokens is not None or layer.key_tokens is not None:
        entry.update(query_tokens=q, key_tokens=k)
    return entry


def attention_data(layers: Sequence[Layer], query_tokens: Sequence[Any],
                   key_tokens: Sequence[Any] | None = None, *, task: str | None = None,
                   run: str | None = None, title: str | None = None,
                   digits: int = 4, focus: int | None = None,
                   record: dict[str, Any] | None = None) -> dict[str, Any]:
    """The page's JSON-ready dict for ``layers`` over these tokens.

    Args:
        layers: the attention layers, in model order.
        query_tokens: the T_q query tokens (rows) of the layers without tokens of their own.
        key_tokens: the T_k key tokens (columns); default ``query_tokens``.
        task: the task the maps come from (None in Python use).
        run: the run directory the maps come from (None in Python use).
        title: a line over the page.
        digits: decimals kept of each weight and shown on the page.
        focus: a query row the page opens pinned on (its weights read out), or None.
        record: what the run reached and which of its weights these are
            (``attnlab.explorer.record.run_record``), shown over the page; None in Python use.

    Returns:
        ``{"version", "task", "run", "title", "query_tokens", "key_tokens", "layers"}``, and
        ``"focus"`` and ``"record"`` (with the texts the page shows, under ``"shown"``) when
        given.

    Raises:
        ValueError: no layers, an unknown kind, weights not (H, T_q, T_k), or tokens that do
            not match a layer's size (naming the layer).
        WeightsError: (a ``ValueError``) weights that are not attention, in one line naming
            the layer, head, query and why: a weight not finite or not from 0 to 1, or a
            query's row that is not a softmax's (summing to 1 within
            ``row_sum_tolerance``, or all 0 where the query may attend to nothing): logits,
            a transposed map. Weights read back from a page (``read_data``) are already
            rounded to its ``digits``, which this rule does not know: a long row of small
            weights can lose more than 0.01 (a 512-key row of 0.98 and 511 weights of 3.9e-5
            reads back as 0.98 and 0s) and is refused here. Give the model's own maps, or the
            page's data as read to ``render_html``/``AttentionView``, which allow for it.

    Examples:
        >>> data = attention_data([Layer("attn", "self", [[[0.25, 0.75], [1.0, 0.0]]])],
        ...                       ["a", "b"])
        >>> data["layers"][0]["weights"], data["key_tokens"]
        ([[[0.25, 0.75], [1.0, 0.0]]], ['a', 'b'])
    """
    if not layers:
        raise ValueError("no attention layers to show")
    queries = _tokens(query_tokens, "query_tokens")
    keys = queries if key_tokens is None else _tokens(key_tokens, "key_tokens")
    out = [_layer_entry(layer, queries, keys, digits) for layer in layers]
    data = {"version": VERSION, "task": task, "run": run, "title": title or "",
            "digits": digits, "query_tokens": queries, "key_tokens": keys, "layers": out}
    if focus is not None:
        if not 0 <= focus < len(queries):
            raise ValueError(f"focus must be a query row, 0 to {len(queries) - 1}, got {focus}")
        data["focus"] = {"axis": "q", "index": int(focus)}
    if record is not None:
        check_record(record)
        data["record"] = {**record, "shown": {"weights": weights_text(record),
                                              "metrics": shown_metrics(record),
                                              "metrics_of": metrics_of_text(record)}}
    return data


def check_data(data: dict[str, Any]) -> None:
    """Raise ``ValueError`` unless ``data`` has the page's layout (what a reader may rely on),
    in one line naming the layer, and the head and query where a weight breaks the rule
    (``check_weights``)."""
    checked_arrays(data)


def _grid(value: Any, name: str, what: str, dtype: Any = None) -> np.ndarray:
    try:
        return np.asarray(value, dtype=dtype)
    except (TypeError, ValueError):  # ragged rows, text
        raise ValueError(f"layer {name!r}: {what} is not a grid of numbers") from None


def checked_arrays(data: dict[str, Any]) -> list[dict[str, np.ndarray]]:
    """``check_data``, returning each layer's ``weights`` (H, T_q, T_k), ``mean`` (T_q, T_k)
    and ``masked`` (T_q, T_k), where it has them, as arrays: read once, checked by NumPy, and
    written to the page from them (``attnlab.explorer.json_text``)."""
    for key in ("query_tokens", "key_tokens", "layers"):
        if key not in data:
            raise ValueError(f"attention data has no {key!r}")
    digits = data.get("digits", 4)
    if type(digits) is not int or not 0 <= digits <= 20:  # toFixed's range is 0 to 100
        raise ValueError(f"digits {digits!r} is not a number of decimals, 0 to 20")
    arrays = [_layer_arrays(layer, data, digits) for layer in data["layers"]]
    if data.get("record") is not None:
        _check_shown_record(data["record"])
    focus = data.get("focus")
    if focus is not None and not (focus.get("axis") == "q" and isinstance(focus.get("index"), int)
                                  and 0 <= focus["index"] < len(data["query_tokens"])):
        raise ValueError(f"focus {focus!r} is not a query row of the page")
    return arrays


def _layer_arrays(layer: Any, data: dict[str, Any], digits: int) -> dict[str, np.ndarray]:
    """One layer of a page's data as arrays, checked (``checked_arrays``)."""
    name = layer.get("name") if isinstance(layer, dict) else None
    if not isinstance(layer, dict) or layer.get("kind") not in KINDS or "weights" not in layer:
        raise ValueError(f"layer {name!r} has no weights or no kind of {KINDS}")
    q = layer.get("query_tokens", data["query_tokens"])
    k = layer.get("key_tokens", data["key_tokens"])
    w = _grid(layer["weights"], name, "weights", np.float64)
    if w.ndim != 3 or w.shape[0] == 0 or w.shape[1:] != (len(q), len(k)):
        raise ValueError(f"layer {name!r}: weights are {w.shape}, not (H, T_q, T_k) with "
                         f"{len(q)} query and {len(k)} key tokens")
    check_weights(w, name, query_tokens=q, key_tokens=k, digits=digits)
    out = {"weights": w}
    if "mean" in layer:  # absent: one head, or the page's own
        mean = _grid(layer["mean"], name, "mean", np.float64)
        if mean.shape != (len(q), len(k)):
            raise ValueError(f"layer {name!r}: mean is {mean.shape}, not T_q x T_k "
                             f"({len(q)} x {len(k)})")
        check_weights(mean[None], name, query_tokens=q, key_tokens=k, heads="mean of heads",
                      rows=False)
        out["mean"] = mean
    if "masked" in layer:  # absent: none; null is bad
        masked = _grid(layer["masked"], name, "masked")
        if masked.shape != (len(q), len(k)) or masked.dtype.kind not in "iubf" or not np.isin(
                masked, (0, 1)).all():
            raise ValueError(f"layer {name!r}: masked is not T_q x T_k of 0 and 1")
        out["masked"] = masked
    return out


def _check_shown_record(record: Any) -> None:
    """A page's run record: ``run_record``'s layout and the texts the page shows of it."""
    check_record(record)
    shown = record.get("shown")
    if not (isinstance(shown, dict) and isinstance(shown.get("weights"), str)
            and isinstance(shown.get("metrics"), list)
            and all(isinstance(pair, list) and len(pair) == 2
                    and all(isinstance(x, str) for x in pair) for pair in shown["metrics"])
            and isinstance(shown.get("metrics_of"), (str, type(None)))):
        raise ValueError("the run record's shown texts are not a weights line, "
                         "[name, value] pairs and whose the metrics are (text or null)")
