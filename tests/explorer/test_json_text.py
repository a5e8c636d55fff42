"""The page's JSON is written from NumPy arrays (``attnlab.explorer.json_text``) and must be the
bytes ``json.dumps`` wrote before, so that every reader of a page (the page's script,
``read_data``, other tools) reads the same numbers: pages of every shape the explorer makes —
masked cells, cross layers with their own tokens, a run's record, a pinned query, tokens that
must be escaped — at every precision a page may have."""
import json

import numpy as np
import pytest

from attnlab.explorer import AttentionView, Layer, attention_data, read_data, render_html
from attnlab.explorer.data import checked_arrays
from attnlab.explorer.json_text import array_json, page_json


def json_dumps_page(data):
    """How the page wrote its data before: ``json.dumps``, then made safe in a <script>."""
    text = json.dumps(data, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def softmax_rows(rng, shape, masked_keys=0):
    w = rng.random(shape) ** 4
    if masked_keys:
        w[..., -masked_keys:] = 0.0  # padded keys: 0 in every head, the page's "masked"
    return w / w.sum(-1, keepdims=True)


def every_kind_of_page(digits):
    rng = np.random.default_rng(digits)
    source, target = ["<s>", "</script>", 'say "hi"', "naïve ☃", "&amp;"], ["a", "b", "c"]
    causal = np.tril(rng.random((2, 3, 3)) + 0.01)
    layers = [
        Layer("encoder.layers.0.self_attn", "self", softmax_rows(rng, (4, 5, 5), 2), "encoder"),
        Layer("decoder.layers.0.self_attn", "causal", causal / causal.sum(-1, keepdims=True),
              "decoder", target, target),
        Layer("decoder.layers.0.cross_attn", "cross", softmax_rows(rng, (2, 3, 5)), "cross",
              target, source),
        Layer("one.head", "self", softmax_rows(rng, (1, 5, 5))),  # no mean
        Layer("uniform", "self", np.full((3, 5, 5), 0.2)),
    ]
    record = {"weights": {"file": "model.safetensors", "step": 20, "steps": 40,
                          "which": "last"}, "metrics": {"test_accuracy": 0.5, "loss": None}}
    return attention_data(layers, source, task="translate", run="runs/<r>", title="t & <u>",
                          digits=digits, focus=1, record=record)


@pytest.mark.parametrize("digits", [0, 1, 2, 3, 4, 6, 8, 15, 17, 20])
def test_the_page_json_is_what_json_dumps_wrote(digits):
    data = every_kind_of_page(digits)
    assert page_json(data, checked_arrays(data)) == json_dumps_page(data)


def test_a_page_read_back_and_made_again_is_the_same_page():
    page = render_html(every_kind_of_page(4))
    data = read_data(page)
    assert render_html(data) == page == AttentionView(data).html()


def test_numbers_a_reader_wrote_are_written_as_json_writes_them():
    """A page's data made by hand: masked as false/true, and weights not rounded."""
    data = {"query_tokens": ["a", "b"], "key_tokens": ["a", "b"], "layers": [
        {"name": "x", "kind": "self", "weights": [[[1 / 3, 2 / 3], [1e-07, 1 - 1e-07]]],
         "masked": [[False, False], [False, True]]},
        {"name": "y", "kind": "causal", "weights": [[[1.0, 0.0], [0.5, 0.5]]],
         "masked": [[0.0, 0.0], [0.0, 0.0]]}]}
    assert page_json(data, checked_arrays(data)) == json_dumps_page(data)


@pytest.mark.parametrize("shape", [(1,), (3,), (1, 1), (2, 3), (1, 1, 1), (2, 3, 4),
                                   (2, 1, 3, 2), (0, 3), (2, 0)])
def test_any_array_is_written_as_json_writes_its_list(shape):
    a = np.random.default_rng(0).random(shape).round(4)
    for array in (a, (a > 0.5).astype(int), a > 0.5, -a):
        assert array_json(array) == json.dumps(array.tolist(), separators=(",", ":"))


def test_an_array_of_many_distinct_numbers_is_written_as_json_writes_it():
    """More distinct numbers than a table of every number with every follower holds."""
    a = np.random.default_rng(1).random((2, 100, 100))  # 20,000 numbers, not rounded
    assert array_json(a, digits=20) == json.dumps(a.tolist(), separators=(",", ":"))
