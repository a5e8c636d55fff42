"""Additive (Bahdanau) and bilinear (Luong) attention: proper, maskable weights."""
import pytest
import torch
from torch.testing import assert_close

import attnlab.nn as an

MODULES = {
    "additive": lambda: an.AdditiveAttention(4, 6, 8),
    "bilinear": lambda: an.BilinearAttention(4, 6),
}


@pytest.mark.parametrize("name", MODULES)
def test_weights_are_a_distribution_over_allowed_keys(name):
    attention = MODULES[name]()
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 6), torch.randn(2, 5, 7)
    mask = an.padding_mask(torch.tensor([5, 2]), 5)[:, 0]  # (B, 1, T_k)
    mask = mask.expand(2, 3, 5).clone()
    mask[0, 2] = False  # query 2 of sample 0 may attend to nothing
    values, weights = attention(q, k, v, mask)
    assert values.shape == (2, 3, 7) and weights.shape == (2, 3, 5)
    assert (weights >= 0).all()
    assert_close(weights[1, :, 2:], torch.zeros(3, 3), atol=0.0, rtol=0.0)  # masked keys
    row_sums = weights.sum(-1)
    assert_close(row_sums[0, :2], torch.ones(2), atol=1e-6, rtol=0.0)
    assert_close(row_sums[1], torch.ones(3), atol=1e-6, rtol=0.0)
    assert_close(weights[0, 2], torch.zeros(5), atol=0.0, rtol=0.0)  # the empty row
    assert_close(values[0, 2], torch.zeros(7), atol=0.0, rtol=0.0)
    assert_close(values, weights @ v, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("name", MODULES)
def test_a_padding_mask_hides_padded_keys_of_its_own_sample_only(name):
    """padding_mask's (B, 1, 1, T_k) once broadcast the (B, T_q, T_k) scores to
    (B, B, T_q, T_k): values (2, 2, 3, 7), each sample under every sample's mask."""
    attention = MODULES[name]()
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 6), torch.randn(2, 5, 7)
    mask = an.padding_mask(torch.tensor([5, 2]), 5)  # (B, 1, 1, T_k)
    values, weights = attention(q, k, v, mask)
    assert values.shape == (2, 3, 7) and weights.shape == (2, 3, 5)
    expected_values, expected_weights = attention(q, k, v, mask[:, 0])  # (B, 1, T_k)
    assert_close(values, expected_values, atol=0.0, rtol=0.0)
    assert_close(weights, expected_weights, atol=0.0, rtol=0.0)
    assert_close(weights[1, :, 2:], torch.zeros(3, 3), atol=0.0, rtol=0.0)
    assert (weights[0] > 0).all()  # sample 0 has no padding


@pytest.mark.parametrize("name", MODULES)
def test_a_mask_that_does_not_fit_the_scores_names_its_shape(name):
    attention = MODULES[name]()
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 6), torch.randn(2, 5, 7)
    with pytest.raises(ValueError, match=r"mask of shape \(2, 4\) does not broadcast"):
        attention(q, k, v, torch.ones(2, 4, dtype=torch.bool))


def test_additive_score_is_v_tanh_wq_plus_wk():
    attention = an.AdditiveAttention(4, 6, 8)
    q, k = torch.randn(1, 1, 4), torch.randn(1, 2, 6)
    scores = attention.v(torch.tanh(attention.w_q(q[0, 0]) + attention.w_k(k[0]))).squeeze(-1)
    _, weights = attention(q, k, torch.randn(1, 2, 3))
    assert_close(weights[0, 0], scores.softmax(-1), atol=1e-6, rtol=1e-6)


def test_bilinear_score_is_q_w_k():
    attention = an.BilinearAttention(4, 6)
    q, k = torch.randn(1, 1, 4), torch.randn(1, 2, 6)
    scores = q[0, 0] @ attention.w.weight @ k[0].T  # qᵀ W k, W of shape (d_q, d_k)
    _, weights = attention(q, k, torch.randn(1, 2, 3))
    assert_close(weights[0, 0], scores.softmax(-1), atol=1e-6, rtol=1e-6)
