"""The page's data as JSON text, its weights written by NumPy in one go.

``json.dumps`` of a 4-layer x 4-head x 512-token page turns each of its 5 million weights into
a Python float and writes each on its own, most of the time writing the page takes. Here a
layer's arrays are written from their distinct values: the weights are rounded to ``digits``
decimals, so a page has at most 10**digits + 1 of them, each written once by ``repr`` (what
``json`` writes for a float) and then gathered by index into the text, row by row
(``benchmarks/explorer_write.py`` measures both; its numbers are in benchmarks/RESULTS.md).

For data made by ``attention_data`` (and a page's data read back by ``read_data``) the text is
the one ``json.dumps(data, ensure_ascii=False, separators=(",", ":"))`` writes, byte for byte
(``tests/explorer/test_json_text.py``). A dict built by hand holds the same values, not always
the same text: its weights are read as floats (an integer weight ``1`` is written ``1.0``,
``-0.0`` as ``0.0``), and a ``masked`` of both booleans and integers is written as one of them.

Shapes: H heads, T_q query tokens, T_k key tokens.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np

__all__ = ["page_json", "array_json"]

_OPTIONS = {"allow_nan": False, "ensure_ascii": False, "separators": (",", ":")}


def _codes(a: np.ndarray, digits: int) -> tuple[np.ndarray, list[str]]:
    """(an index per element, the text of each index) of an array: a page's weights by their
    value times 10**digits (each is a multiple of 10**-digits), 0/1 by themselves, anything
    else by its distinct values."""
    if a.dtype.kind in "iub":  # masked: 0 and 1 (or false and true, as a reader wrote it)
        if a.dtype.kind == "b" or a.size and a.min() >= 0 and a.max() <= 1:
            return a.astype(np.intp), ["false", "true"] if a.dtype.kind == "b" else ["0", "1"]
        values, codes = np.unique(a, return_inverse=True)
        return codes.reshape(a.shape), [json.dumps(v) for v in values.tolist()]
    if digits <= 15 and a.size:
        scale = 10.0 ** digits
        n = np.rint(a * scale)
        if n.min() >= 0 and n.max() <= 10 ** 6:
            n = n.astype(np.intp)  # -0.0 (never below 0, as a weight) is 0 and written "0.0"
            values = np.arange(int(n.max()) + 1) / scale  # what np.round and round give
            if np.array_equal(values[n], a):
                return n, [repr(v) for v in values.tolist()]
    values, codes = np.unique(a + 0.0, return_inverse=True)  # -0.0 -> 0.0
    return codes.reshape(a.shape), [repr(v) for v in values.tolist()]


def _table(texts: list[str]) -> np.ndarray:
    """(K, width) bytes of K texts, padded with NUL bytes (which no JSON number or bracket
    holds, so dropping every NUL byte leaves the texts)."""
    return np.array([t.encode("ascii") for t in texts], dtype=bytes)[:, None].view(np.uint8)


def _closed(shape: tuple[int, ...]) -> np.ndarray:
    """For each element of an array of ``shape``, how many of its trailing axes end with it
    (0: within a row; 1: a row's last; 2: a head's last row's last, ...)."""
    closed = np.zeros(shape, dtype=np.intp)
    ending = np.ones(shape, dtype=bool)
    for axis in reversed(range(len(shape))):
        last = np.arange(shape[axis]) == shape[axis] - 1
        ending = ending & last.reshape((-1,) + (1,) * (len(shape) - axis - 1))
        closed += ending
    return closed


def array_json(a: np.ndarray, digits: int = 4) -> str:
    """The nested JSON list of the array ``a``, as ``json.dumps`` writes ``a.tolist()``:
    floats as ``repr`` writes them, integers as integers.

    Each number is written with what follows it: "," within a row, "],[" after a row's last,
    "]],[[" after a head's last, "]]]" after the last. Both are gathered from small tables by
    index, so no Python object is made per element.

    Examples:
        >>> array_json(np.array([[[0.25, 0.75], [1.0, 0.0]]]))
        '[[[0.25,0.75],[1.0,0.0]]]'
        >>> array_json(np.array([[0, 1], [1, 1]]))
        '[[0,1],[1,1]]'
    """
    if a.size == 0 or a.ndim == 0:
        return json.dumps(a.tolist(), **_OPTIONS)
    codes, texts = _codes(a, digits)
    d = a.ndim
    follows = ["]" * c + "," + "[" * c for c in range(d)] + ["]" * d]
    closed = _closed(a.shape).ravel()
    if len(texts) * len(follows) <= 1 << 16:  # a page's: every number with every follower
        pieces = _table([t + f for t in texts for f in follows])[
            codes.ravel() * len(follows) + closed]  # (N, width)
    else:  # many distinct numbers: the two gathered apart
        pieces = np.concatenate([_table(texts)[codes.ravel()], _table(follows)[closed]], axis=1)
    text = pieces[pieces != 0].tobytes().decode("ascii")
    return "[" * d + text


def _escaped(text: str) -> str:
    """JSON text that cannot end a <script> element early ("</script>" in a token)."""
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _key(key: Any) -> str:
    return json.dumps({key: 0}, **_OPTIONS)[1:-3]  # as json writes a key, non-text ones too


def _dict_json(d: dict, arrays: dict[str, np.ndarray], digits: int) -> str:
    parts = [_escaped(_key(k)) + ":" + (array_json(arrays[k], digits) if k in arrays
                                        else _escaped(json.dumps(v, **_OPTIONS)))
             for k, v in d.items()]
    return "{" + ",".join(parts) + "}"


def page_json(data: dict[str, Any], arrays: list[dict[str, np.ndarray]]) -> str:
    """``data`` as the page embeds it: ``json.dumps``'s text, safe inside a <script>, with each
    layer's ``weights``, ``mean`` and ``masked`` written from ``arrays`` (one dict per layer,
    the arrays ``check_data`` read them into)."""
    digits = data.get("digits", 4)
    parts = []
    for k, v in data.items():
        if k == "layers":
            text = "[" + ",".join(_dict_json(layer, a, digits)
                                  for layer, a in zip(v, arrays)) + "]"
        else:
            text = _escaped(json.dumps(v, **_OPTIONS))
        parts.append(_escaped(_key(k)) + ":" + text)
    return "{" + ",".join(parts) + "}"
