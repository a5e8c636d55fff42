"""SequenceClassifier: padding, permutation invariance/equivariance, pooling, errors.

Tolerances: float32 on CPU; a padded batch and a single sequence take different kernel paths
(different T), so outputs agree to ~1e-6; we assert atol=1e-5, rtol=1e-4.
"""
from functools import lru_cache

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from attnlab.models import SequenceClassifier

TOL = dict(atol=1e-5, rtol=1e-4)


def tokens_model(**kw):
    torch.manual_seed(0)
    args = dict(vocab_size=30, model_dim=16, num_heads=4, num_layers=2, max_len=32)
    return SequenceClassifier(3, **{**args, **kw}).eval()


def set_model(head="sequence", **kw):
    torch.manual_seed(0)
    args = dict(input_dim=5, model_dim=16, num_heads=2, num_layers=2, positional="none", head=head)
    return SequenceClassifier(None if head == "element" else 4, **{**args, **kw}).eval()


def pad(seqs, value=0):
    T = max(len(s) for s in seqs)
    return torch.tensor([s + [value] * (T - len(s)) for s in seqs])


@pytest.mark.parametrize("pooling", ["cls", "mean"])
@pytest.mark.parametrize("positional", ["sinusoidal", "learned", "none"])
def test_padded_batch_predicts_what_each_sequence_does_alone(pooling, positional):
    model = tokens_model(pooling=pooling, positional=positional)
    seqs = [[5, 6, 7, 8, 9, 10], [11, 12], [13, 14, 15, 16]]
    batch = model(pad(seqs))  # pad id 0 masks the tail
    for i, s in enumerate(seqs):
        assert_close(batch[i], model(torch.tensor([s]))[0], **TOL)


def test_token_head_gives_each_real_token_what_its_sequence_alone_gives():
    """The token head (``attnlab train tag``): logits (B, T, C), a class for every token; the
    real tokens of a padded batch get what their sequence alone gets."""
    model = tokens_model(head="token")
    seqs = [[5, 6, 7, 8, 9, 10], [11, 12], [13, 14, 15, 16]]
    batch = model(pad(seqs))
    assert batch.shape == (3, 6, 3) and model.predict(pad(seqs)).shape == (3, 6)
    for i, s in enumerate(seqs):
        assert_close(batch[i, : len(s)], model(torch.tensor([s]))[0], **TOL)


def test_padded_feature_sets_with_explicit_mask_match_each_set_alone():
    for head in ("sequence", "element"):
        model = set_model(head, pooling="mean")
        torch.manual_seed(1)
        x = torch.randn(3, 7, 5)
        lengths = [7, 3, 5]
        mask = torch.arange(7)[None] < torch.tensor(lengths)[:, None]  # (B, T), True = real
        x = x.masked_fill(~mask[..., None], 123.0)  # padding content must not matter
        out = model(x, mask)
        for i, n in enumerate(lengths):
            alone = model(x[i : i + 1, :n])[0]
            assert_close(out[i, :n] if head == "element" else out[i], alone, **TOL)
            if head == "element":  # padding can never be chosen
                assert (out[i, n:] == torch.finfo(out.dtype).min).all()


@lru_cache(maxsize=None)
def cached_set_model(head="sequence", pooling="cls"):  # built once for all hypothesis examples
    return set_model(head, pooling=pooling)


@settings(max_examples=20, deadline=None)
@given(st.permutations(list(range(6))), st.sampled_from(["cls", "mean"]))
def test_without_positional_encoding_the_set_prediction_is_permutation_invariant(perm, pooling):
    model = cached_set_model(pooling=pooling)
    x = torch.randn(2, 6, 5, generator=torch.Generator().manual_seed(2))
    assert_close(model(x[:, perm]), model(x), **TOL)


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(st.permutations(list(range(6))))
def test_element_head_is_permutation_equivariant(perm):
    model = cached_set_model("element")
    x = torch.randn(2, 6, 5, generator=torch.Generator().manual_seed(3))
    scores = model(x)
    assert scores.shape == (2, 6)
    assert_close(model(x[:, perm]), scores[:, perm], **TOL)
    # the chosen element moves with the permutation: position j now holds element perm[j]
    assert model.predict(x[:, perm]).tolist() == [perm.index(int(p)) for p in model.predict(x)]


def test_positional_encoding_makes_order_matter():
    model = tokens_model(positional="sinusoidal", pooling="mean")
    ids = torch.tensor([[5, 6, 7, 8]])
    assert not torch.allclose(model(ids), model(ids.flip(1)), **TOL)


def test_mean_pooling_is_the_mean_of_the_real_elements_states():
    model = tokens_model(pooling="mean")
    ids = pad([[5, 6, 7], [8, 9]])
    h, mask = model.encode(ids)
    assert mask.tolist() == [[True, True, True], [True, True, False]]
    expected = torch.stack([h[0].mean(0), h[1, :2].mean(0)])
    assert_close(model(ids), model.output_net(expected), **TOL)


def test_cls_pooling_reads_the_prepended_cls_state_and_maps_include_it():
    model = tokens_model(pooling="cls")
    ids = pad([[5, 6, 7], [8, 9]])
    h, mask = model.encode(ids)
    assert h.shape == (2, 4, 16) and mask[:, 0].all()
    assert_close(model(ids), model.output_net(h[:, 0]), **TOL)
    maps = model.get_attention_maps(ids)
    assert len(maps) == 2 and maps[0].shape == (2, 4, 4, 4)
    assert (maps[-1][1, :, :, -1] == 0).all()  # nobody attends to the padding
    assert_close(maps[-1].sum(-1), torch.ones(2, 4, 4), **TOL)


def test_predict_returns_classes_and_restores_training_mode():
    model = tokens_model(dropout=0.1).train()
    pred = model.predict(pad([[5, 6], [7]]))
    assert pred.shape == (2,) and pred.dtype == torch.int64 and model.training


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_classes=3, vocab_size=10, input_dim=4), r"exactly one of vocab_size .* got vocab_size=10, input_dim=4"),
    (dict(num_classes=3), r"exactly one of vocab_size"),
    (dict(vocab_size=10), r"num_classes must be a positive integer for head='sequence', got None"),
    (dict(num_classes=2, input_dim=4, head="element"), r"num_classes must be None, got 2"),
    (dict(num_classes=2, vocab_size=10, pooling="max"), r"pooling must be one of cls, mean, got 'max'"),
    (dict(num_classes=2, vocab_size=10, positional="rope"), r"positional must be one of .*got 'rope'"),
])
def test_bad_arguments_raise_value_errors_showing_the_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SequenceClassifier(**{"model_dim": 8, "num_heads": 2, **kwargs})


def test_bad_inputs_raise_value_errors():
    with pytest.raises(ValueError, match=r"token inputs must be integer ids \(B, T\)"):
        tokens_model()(torch.randn(2, 3))
    with pytest.raises(ValueError, match=r"feature inputs must be \(B, T, 5\), got \(2, 3, 4\)"):
        set_model()(torch.randn(2, 3, 4))
    with pytest.raises(ValueError, match=r"mask must be \(B, T\) = \(2, 3\), got \(2, 4\)"):
        set_model()(torch.randn(2, 3, 5), torch.ones(2, 4, dtype=torch.bool))
