"""Collecting a model's attention for the page: the same weights as ``get_attention_maps``, the
right kind and group for each layer, and the tokens each layer relates."""
import pytest
import torch

from attnlab.explorer.collect import collect_layers, with_tokens
from attnlab.models import CausalLM, ElementPredictor, Seq2SeqTransformer


@pytest.mark.slow
def test_element_predictor_equals_get_attention_maps():
    torch.manual_seed(0)
    model = ElementPredictor(10, 16, 10, num_heads=2, num_layers=3).eval()
    x = torch.randint(10, (1, 7))
    layers = collect_layers(model, x)
    maps = model.get_attention_maps(x)
    assert [layer.kind for layer in layers] == ["self"] * 3
    assert [layer.group for layer in layers] == ["self"] * 3
    for layer, expected in zip(layers, maps, strict=True):
        torch.testing.assert_close(layer.weights, expected[0], rtol=0, atol=0)


def test_causal_lm_layers_are_causal():
    torch.manual_seed(0)
    lm = CausalLM(vocab_size=20, model_dim=16, num_heads=2, num_layers=2, max_len=16).eval()
    ids = torch.randint(20, (1, 6))
    layers = collect_layers(lm, ids)
    assert [layer.kind for layer in layers] == ["causal", "causal"]
    for layer, expected in zip(layers, lm.get_attention_maps(ids), strict=True):
        torch.testing.assert_close(layer.weights, expected[0], rtol=0, atol=0)


def test_a_one_token_prompt_and_a_one_token_target_are_still_causal(seq2seq):
    """A 1x1 map looks like any other: the page named a language model's one-token prompt
    "self-attention". The kind follows the call (is_causal), not the weights."""
    lm = CausalLM(vocab_size=20, model_dim=16, num_heads=2, num_layers=2, max_len=16).eval()
    assert [layer.kind for layer in collect_layers(lm, torch.tensor([[3]]))] == ["causal"] * 2
    model, src, _ = seq2seq
    layers = collect_layers(model, src, torch.tensor([[1]]))
    assert [(layer.group, layer.kind) for layer in layers][2:4] == [
        ("decoder", "causal"), ("cross", "cross")]


@pytest.fixture
def seq2seq():
    torch.manual_seed(0)
    model = Seq2SeqTransformer(12, 9, model_dim=16, num_heads=2, num_layers=2,
                               dim_feedforward=32).eval()
    return model, torch.tensor([[5, 6, 7, 8, 2]]), torch.tensor([[1, 4, 5]])


def test_seq2seq_has_encoder_decoder_and_cross_groups(seq2seq):
    model, src, tgt = seq2seq
    layers = collect_layers(model, src, tgt)
    assert [(layer.group, layer.kind, tuple(layer.weights.shape)) for layer in layers] == [
        ("encoder", "self", (2, 5, 5)), ("encoder", "self", (2, 5, 5)),
        ("decoder", "causal", (2, 3, 3)), ("cross", "cross", (2, 3, 5)),
        ("decoder", "causal", (2, 3, 3)), ("cross", "cross", (2, 3, 5))]
    cross = [layer.weights for layer in layers if layer.kind == "cross"]
    for got, expected in zip(cross, model.cross_attention(src, tgt), strict=True):
        torch.testing.assert_close(got, expected[0], rtol=0, atol=1e-6)  # float32 summation order


def test_with_tokens_gives_each_group_its_tokens(seq2seq):
    model, src, tgt = seq2seq
    source, target = list("abcde"), ["<s>", "x", "y"]
    layers = with_tokens(collect_layers(model, src, tgt), source, target)
    by_group = {layer.group: (layer.query_tokens, layer.key_tokens) for layer in layers}
    assert by_group == {"encoder": (None, None),  # the page's own tokens
                        "decoder": (target, target), "cross": (target, source)}
    plain = with_tokens(layers, source)  # no target: a decoder-only model
    assert all(layer.query_tokens is None for layer in plain)


def test_a_model_without_attention_is_refused():
    with pytest.raises(ValueError, match="no attention"):
        collect_layers(torch.nn.Linear(3, 3), torch.randn(1, 3))
