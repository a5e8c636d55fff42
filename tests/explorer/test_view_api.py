"""``attnlab.viz.attention_view`` and ``attention_view_of``: the page from maps in every form a
user has them, and from a model and an input (the course's TransformerPredictor with its one-hot
batch, an encoder–decoder, a language model)."""
import numpy as np
import pytest
import torch

from attnlab.explorer import Layer, read_data
from attnlab.models import CausalLM, Seq2SeqTransformer
from attnlab.viz import attention_view, attention_view_of


@pytest.fixture(scope="module")
def course():
    from attnlab.training import TransformerPredictor  # Lightning's Trainer: when used

    torch.manual_seed(0)
    model = TransformerPredictor(input_dim=10, model_dim=16, num_heads=2, num_classes=10,
                                 num_layers=2, lr=1e-3, warmup=10, max_iters=100).eval()
    x = torch.nn.functional.one_hot(torch.tensor([[3, 1, 4, 1, 5]]), 10).float()
    return model, x, model.get_attention_maps(x)


def weights(view, i):
    return torch.tensor(view.data["layers"][i]["weights"])


@pytest.mark.slow
@pytest.mark.parametrize("form", ["list of batches", "list", "stacked", "dict", "one layer"])
def test_every_form_of_maps(course, form):
    _, _, maps = course  # L × (1, H, T, T)
    given = {"list of batches": maps, "list": [m[0] for m in maps],
             "stacked": torch.stack([m[0] for m in maps]),
             "dict": {f"layer{i}": m for i, m in enumerate(maps)}, "one layer": maps[1][0]}[form]
    view = attention_view(given, list("31415"), title="course")
    layers = view.data["layers"]
    assert len(layers) == (1 if form == "one layer" else 2)
    assert repr(view) == (f"AttentionView({len(layers)} layer{'s' * (len(layers) > 1)}, "
                          "5 query x 5 key tokens)")
    torch.testing.assert_close(weights(view, -1), maps[1][0], atol=5e-5, rtol=0)
    assert [layer["kind"] for layer in layers] == ["self"] * len(layers)
    if form == "dict":
        assert [layer["name"] for layer in layers] == ["layer0", "layer1"]


@pytest.mark.slow
def test_kind_and_layers_given(course):
    _, _, maps = course
    causal = torch.tril(torch.ones(2, 4, 4))
    causal /= causal.sum(-1, keepdim=True)
    assert attention_view([causal], list("abcd")).data["layers"][0]["kind"] == "causal"
    view = attention_view([Layer("mine", "cross", np.full((1, 2, 3), 1 / 3))], ["q1", "q2"],
                          ["k1", "k2", "k3"])
    assert view.data["key_tokens"] == ["k1", "k2", "k3"]


@pytest.mark.slow
def test_course_model_with_a_one_hot_batch(course, tmp_path):
    model, x, maps = course
    view = attention_view_of(model, x, tokens=list("31415"), title="reverse")
    for i, expected in enumerate(maps):
        torch.testing.assert_close(weights(view, i), expected[0], atol=5e-5, rtol=0)
    path = view.save(tmp_path / "course.html")
    assert read_data(path.read_text(encoding="utf-8")) == view.data
    assert view._repr_html_().startswith("<iframe srcdoc=")
    assert attention_view_of(model, x).data["query_tokens"] == ["0", "1", "2", "3", "4"]


def test_seq2seq_and_language_model():
    torch.manual_seed(0)
    model = Seq2SeqTransformer(12, 9, model_dim=16, num_heads=2, num_layers=1).eval()
    view = attention_view_of(model, torch.tensor([[5, 6, 7, 2]]), torch.tensor([[1, 4]]),
                             tokens=list("abcd"), target_tokens=["<s>", "x"])
    assert [(l["group"], l.get("query_tokens"), l.get("key_tokens")) for l in view.data["layers"]] \
        == [("encoder", None, None), ("decoder", ["<s>", "x"], ["<s>", "x"]),
            ("cross", ["<s>", "x"], list("abcd"))]
    lm = CausalLM(vocab_size=20, model_dim=16, num_heads=2, num_layers=2, max_len=16).eval()
    view = attention_view_of(lm, torch.tensor([[1, 2, 3]]), tokens=["the", " cat", " sat"])
    assert {l["kind"] for l in view.data["layers"]} == {"causal"}


@pytest.mark.parametrize("given", ["list", "dict"])
def test_maps_of_a_batch_refused_naming_the_batch(given):
    """``get_attention_maps`` of a batch of 3 was "too many values to unpack (expected 3)"."""
    maps = [torch.softmax(torch.randn(3, 2, 4, 4), -1) for _ in range(2)]  # L × (B, H, T, T)
    maps = maps if given == "list" else {f"layer{i}": m for i, m in enumerate(maps)}
    shown = (r"maps: '(layers.|layer)0' is \(3, 2, 4, 4\), not one example's map "
             r"\(H, T_q, T_k\), a batch of 3 examples; pass example b's, m\[b\] of each map")
    with pytest.raises(ValueError, match=shown):
        attention_view(maps, list("abcd"))
    with pytest.raises(ValueError, match=r"maps: 'layers.0' is \(4,\), not one example's map"):
        attention_view([torch.ones(4)], list("abcd"))
    # one example of it is the page, as the message says
    assert len(attention_view([m[1] for m in maps.values()] if given == "dict"
                              else [m[1] for m in maps], list("abcd")).data["layers"]) == 2
