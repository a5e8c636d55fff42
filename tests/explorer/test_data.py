"""The page's data without a browser: the JSON layout other tools read, its checks (naming the
layer at fault), and the page around it (self-contained: nothing to fetch)."""
import json
import math
import re

import numpy as np
import pytest
import torch

from attnlab.explorer import Layer, attention_data, check_data, read_data, render_html


def test_layout_shapes_and_rounding():
    w = torch.tensor([[[0.123456, 0.876544], [1.0, 0.0]]])  # (1, 2, 2): one head
    data = attention_data([Layer("enc.0", "self", w[None]),  # a batch of one is dropped
                           Layer("dec.0", "causal", w, group="decoder")],
                          ["a", "b"], task="reverse", run="runs/r", title="t", digits=3)
    assert set(data) == {"version", "task", "run", "title", "digits", "query_tokens",
                         "key_tokens", "layers"}
    assert data["digits"] == 3  # what the page shows them to
    assert data["query_tokens"] == data["key_tokens"] == ["a", "b"]
    assert data["layers"][0] == {"name": "enc.0", "kind": "self", "group": "self",
                                 "weights": [[[0.123, 0.877], [1.0, 0.0]]],
                                 "masked": [[0, 0], [0, 1]]}  # exactly 0 in every head
    assert data["layers"][1]["group"] == "decoder"
    json.dumps(data, allow_nan=False)  # plain JSON


def test_each_weight_is_rounded_once_at_the_precision_the_page_shows():
    """Weights were stored to 4 decimals and shown to 3: 0.07849 was stored 0.0785 and shown
    0.079 (the weight to 3 decimals is 0.078). The page now shows what is stored, and what is
    stored is the weight rounded once, as Python's round does (ties to even)."""
    # a tie (to even), one rounding up a digit, and 5e-05, whose binary value is a little over
    # the half: np.round, which scales by 10**4 first, made it 0.0
    w = [0.07849, 0.078449, 0.0625, 0.0009995, 5e-05]
    w.append(1 - sum(w))  # the rest of the row's weight (0.7795115), a softmax's row
    for digits in (3, 4):
        data = attention_data([Layer("attn", "self", [[w]])], ["q"], list("abcdef"),
                              digits=digits)
        assert data["digits"] == digits
        assert data["layers"][0]["weights"] == [[[round(x, digits) for x in w]]]
    data = attention_data([Layer("attn", "self", [[w]])], ["q"], list("abcdef"))
    assert data["layers"][0]["weights"] == [[[0.0785, 0.0784, 0.0625, 0.001, 0.0001, 0.7795]]]


def test_the_mean_of_heads_is_taken_before_rounding():
    """The page averaged the rounded heads: 0.10004, 0.10004 and 0.10014 are stored 0.1, 0.1
    and 0.1001, whose mean shows 0.1000; the heads' mean, 0.100073, is 0.1001."""
    first = np.array([0.10004, 0.10004, 0.10014])
    heads = np.stack([first, 1 - first], axis=-1)[:, None, :]  # (H, 1, 2): rows sum to 1
    layer = attention_data([Layer("attn", "self", heads)], ["q"], ["k", "rest"])["layers"][0]
    assert layer["weights"] == [[[0.1, 0.9]], [[0.1, 0.9]], [[0.1001, 0.8999]]]
    assert layer["mean"] == [[0.1001, 0.8999]]
    one = attention_data([Layer("attn", "self", heads[:1])], ["q"], ["k", "rest"])["layers"][0]
    assert "mean" not in one  # one head: its own weights are the mean


def test_cells_every_head_gives_exactly_0_are_marked_masked_before_rounding():
    """A graph's non-edges (weight exactly 0 in every head, the mask's) reached the page as
    weights of 0, drawn and read out like a key the model chose to ignore. They are marked
    masked now; a weight that rounds to 0, or that only one head makes 0, is not."""
    from attnlab.nn import scaled_dot_product

    torch.manual_seed(0)
    edges = torch.rand(6, 6) < 0.4
    edges[0, 1] = True
    edges |= edges.T | torch.eye(6, dtype=torch.bool)  # (N, N): undirected, with self-loops
    q = k = torch.randn(2, 6, 4)  # (H, N, d)
    _, graph = scaled_dot_product(q, k, k, edges)  # (H, N, N)
    assert (~edges).any()
    graph[0, 0, 0], graph[1, 0, 1] = 1e-7, 0.0  # rounds to 0; only one head's exact 0
    graph /= graph.sum(-1, keepdim=True)  # rows that sum to 1 again, as a softmax's
    data = attention_data([Layer("graph", "self", graph),
                           Layer("plain", "self", torch.full((1, 6, 6), 1 / 6))],
                          list("abcdef"), digits=4)
    got = data["layers"][0]
    assert got["weights"][0][0][0] == 0.0 and got["weights"][1][0][1] == 0.0
    assert np.array(got["masked"]).astype(bool).tolist() == (~edges).tolist()
    assert "masked" not in data["layers"][1]
    check_data(data)


def test_float16_zeros_are_not_taken_for_a_mask():
    """A model run in float16 underflows weights under ~6e-8 to exactly 0: a one-head reversal
    model's page marked 36 of 256 unmasked cells "masked" (review). float32 and bfloat16
    zeros still mark a mask."""
    logits = torch.tensor([[[0.0, 20.0, 0.0], [20.0, 0.0, 20.0], [0.0, 0.0, 20.0]]])  # no mask
    half = logits.half().softmax(-1)
    assert (half == 0).any()  # the underflow this test is about
    masked_bf16 = torch.tensor([[[1.0, 0.0], [0.5, 0.5]]]).bfloat16()
    for weights, masked in ((half, False), (logits.softmax(-1).bfloat16(), False),
                            (masked_bf16, True), (masked_bf16.float(), True)):
        tokens = [str(i) for i in range(weights.shape[-1])]
        data = attention_data([Layer("l", "self", weights)], tokens)
        assert ("masked" in data["layers"][0]) == masked, weights.dtype


def test_a_causal_layers_later_keys_are_left_to_its_kind():
    w = torch.tensor([[[1.0, 0.0, 0.0], [0.4, 0.6, 0.0], [0.5, 0.5, 0.0]]])  # key 2: no weight
    masked = attention_data([Layer("lm", "causal", w)], list("abc"))["layers"][0]["masked"]
    assert masked == [[0, 0, 0], [0, 0, 0], [0, 0, 1]]  # above the diagonal: the kind's


def test_a_layer_with_its_own_tokens_keeps_them():
    cross = np.full((2, 3, 4), 0.25)  # (H, T, S)
    data = attention_data([Layer("enc", "self", np.eye(4)[None]),
                           Layer("cross", "cross", cross, "cross", list("xyz"), list("abcd"))],
                          list("abcd"))
    assert "query_tokens" not in data["layers"][0]
    assert data["layers"][1]["query_tokens"] == ["x", "y", "z"]
    assert np.array(data["layers"][1]["weights"]).shape == (2, 3, 4)


@pytest.mark.parametrize("layer, tokens, named", [
    (Layer("L0", "sideways", np.ones((1, 2, 2))), ["a", "b"], "kind"),
    (Layer("L1", "self", np.ones((2, 2))), ["a", "b", "c"], "3 query"),
    (Layer("L2", "self", np.ones((1, 1, 2, 2, 2))), ["a", "b"], "(H, T_q, T_k)"),
    (Layer("L3", "self", np.array([[[math.nan, 1], [0, 1]]])), ["a", "b"], "finite"),
    (Layer("L4", "self", np.ones((1, 2, 2))), "ab", "not the string"),
])
def test_errors_name_the_layer(layer, tokens, named):
    with pytest.raises(ValueError) as e:
        attention_data([layer], tokens)
    assert named in str(e.value)
    assert layer.name in str(e.value) or isinstance(tokens, str)


def test_no_layers_is_an_error():
    with pytest.raises(ValueError, match="no attention layers"):
        attention_data([], ["a"])


@pytest.mark.parametrize("broken", [
    {"query_tokens": ["a"], "layers": []},  # no key_tokens
    {"query_tokens": ["a"], "key_tokens": ["a"], "layers": [{"name": "x", "kind": "self",
                                                             "weights": [[[0.5, 0.5]]]}]},
    {"query_tokens": ["a"], "key_tokens": ["a"], "layers": [{"name": "x", "kind": "other",
                                                             "weights": [[[1.0]]]}]},
    {"query_tokens": ["a"], "key_tokens": ["a"], "layers": [{"name": "x", "kind": "self",
                                                             "weights": [[[math.inf]]]}]},
    {"query_tokens": ["a"], "key_tokens": ["a"], "layers": [{"name": "x", "kind": "self",
                                                             "weights": [[[1.0]]],
                                                             "masked": [[0, 1]]}]},
    {"query_tokens": ["a"], "key_tokens": ["a"], "layers": [{"name": "x", "kind": "self",
                                                             "weights": [[[1.0]]],
                                                             "mean": [[1.0, 0.0]]}]},
    {"query_tokens": ["a"], "key_tokens": ["a"], "layers": [{"name": "x", "kind": "self",
                                                             "weights": [[[1.0]]],
                                                             "mean": [[math.nan]]}]},
    {"query_tokens": ["a"], "key_tokens": ["a"], "digits": 3.5, "layers": [
        {"name": "x", "kind": "self", "weights": [[[1.0]]]}]},
    # null: the page's script read null[i] and broke (review)
    {"query_tokens": ["a"], "key_tokens": ["a"], "layers": [{"name": "x", "kind": "self",
                                                             "weights": [[[1.0]]],
                                                             "masked": None}]},
])
def test_check_data_refuses_what_a_reader_could_not_use(broken):
    with pytest.raises(ValueError):
        check_data(broken)


def test_the_page_carries_the_data_and_fetches_nothing():
    tokens = ["</script><script>alert(1)</script>", 'say "hi"', "naïve ☃", "&lt;"]
    data = attention_data([Layer("attn", "self", np.full((2, 4, 4), 0.25))], tokens,
                          title="<b>title</b>")
    page = render_html(data)
    assert read_data(page) == data
    assert page.count("</script>") == 2  # the data's own and the code's: a token cannot end one
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"\ssrc\s*=", page)  # no script, image or frame from elsewhere
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "<title>&lt;b&gt;title&lt;/b&gt; · attnlab</title>" in page


def test_non_finite_data_is_refused_by_the_page():
    data = attention_data([Layer("attn", "self", np.ones((1, 1, 1)))], ["a"])
    data["layers"][0]["weights"][0][0][0] = math.nan
    with pytest.raises(ValueError, match="not finite"):
        render_html(data)
