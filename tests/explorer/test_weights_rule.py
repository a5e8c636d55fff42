"""The rule a page's weights keep (``attnlab.explorer.data.check_weights``): finite, from 0 to
1, each query's row a softmax's (summing to 1, or all 0 where the query may attend to
nothing). A map that breaks it is refused where it enters — ``attention_data``'s arrays, a
page's data read back — in one line naming the layer, head, query and why, before any page is
written."""
import math

import numpy as np
import pytest
import torch

from attnlab.explorer import AttentionView, Layer, attention_data, check_data, render_html
from attnlab.explorer.data import ROW_SUM_ATOL, WeightsError


def softmax(logits, axis=-1):
    e = np.exp(logits - logits.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def refused(layer, tokens=("a", "b", "c")):
    with pytest.raises(WeightsError) as e:
        attention_data([layer], list(tokens))
    message = str(e.value)
    assert "\n" not in message  # one line
    return message


def test_a_map_of_logits_is_refused_naming_its_head_and_query():
    logits = np.random.default_rng(0).normal(size=(2, 3, 3))  # (H, T_q, T_k)
    w = softmax(logits)
    w[1, 2] = logits[1, 2]  # the logits, not the weights, in one row
    assert refused(Layer("enc.0", "self", w)).startswith("layer 'enc.0', head 1, query 2 ('c'):")


def test_a_transposed_map_is_refused():
    """keys on the rows: each column sums to 1, a row does not."""
    w = softmax(np.random.default_rng(1).normal(size=(1, 3, 3)), axis=1)
    assert "sum to" in refused(Layer("attn", "self", w))


@pytest.mark.parametrize("value, why", [(math.nan, "nan, not finite"),
                                        (math.inf, "inf, not finite"),
                                        (-0.25, "-0.25, not from 0 to 1"),
                                        (1.25, "1.25, not from 0 to 1")])
def test_a_weight_that_is_no_weight_is_named_with_its_key(value, why):
    w = np.full((2, 3, 3), 1 / 3)
    w[1, 0, 2] = value
    assert refused(Layer("attn", "self", w)) == (
        f"layer 'attn', head 1, query 0 ('a'): the weight on key 2 ('c') is {why}")


def test_a_page_read_back_with_a_bad_weight_is_refused_before_it_is_written(tmp_path):
    data = attention_data([Layer("attn", "self", np.full((2, 3, 3), 1 / 3))], list("abc"))
    data["layers"][0]["weights"][1][2][0] = math.nan
    for make in (check_data, render_html, AttentionView):
        with pytest.raises(WeightsError, match=r"^layer 'attn', head 1, query 2 \('c'\): "
                                               r"the weight on key 0 \('a'\) is nan"):
            make(data)
    data["layers"][0]["weights"][1][2] = [0.5, 0.5, 0.5]
    with pytest.raises(WeightsError, match=r"head 1, query 2 \('c'\): its weights sum to 1.5"):
        AttentionView(data).save(tmp_path / "page.html")
    assert not (tmp_path / "page.html").exists()


def test_a_view_shows_its_data_as_it_is_when_written(tmp_path):
    """A view kept the page of its data as it was made: a title changed since was not shown,
    and NaN weights set since were written without a word. Now the page is written from
    ``view.data`` as it is, checked again; a dict set as ``view.data`` is checked at once."""
    view = AttentionView(attention_data([Layer("attn", "self", np.full((1, 2, 2), 0.5))],
                                        list("ab"), title="before"))
    view.data["title"] = "after"
    assert "<title>after · attnlab</title>" in view.html()
    view.data["layers"][0]["weights"][0][1][0] = math.nan
    with pytest.raises(WeightsError, match=r"^layer 'attn', head 0, query 1 \('b'\): "):
        view.save(tmp_path / "page.html")
    assert not (tmp_path / "page.html").exists()
    with pytest.raises(WeightsError, match=r"head 0, query 1 \('b'\)"):
        view._repr_html_()
    nan = attention_data([Layer("attn", "self", np.full((1, 2, 2), 0.5))], list("ab"))
    nan["layers"][0]["weights"][0][0][1] = math.nan
    with pytest.raises(WeightsError, match=r"head 0, query 0 \('a'\)"):
        view.data = nan


def test_what_attention_makes_is_kept():
    """Rows of a query that may attend to nothing (all 0), float16 and bfloat16 softmaxes,
    and long rows each of whose weights the page rounds."""
    logits = torch.randn(2, 4, 512)
    masked = torch.softmax(logits, -1)
    masked[:, 3] = 0.0  # a query that may attend to nothing: zero weights (DESIGN)
    attention_data([Layer("masked", "self", masked)], [str(i) for i in range(4)],
                   [str(i) for i in range(512)])
    for dtype in (torch.float16, torch.bfloat16):
        w = torch.softmax(logits.to(dtype), -1)
        assert (w.float().sum(-1) - 1).abs().max() < ROW_SUM_ATOL
        data = attention_data([Layer(str(dtype), "self", w)], [str(i) for i in range(4)],
                              [str(i) for i in range(512)], digits=2)
        check_data(data)  # 512 weights each rounded to 2 decimals: far from summing to 1
