"""attnlab.generation: next-token selection (top-k, top-p, temperature), decoding loops."""
import pytest
import torch

from attnlab.generation import filter_top_k, filter_top_p, select_next_token

NEG = float("-inf")


# ---- filter_top_k ----------------------------------------------------------------------
def test_top_k_keeps_the_k_largest_per_row():
    logits = torch.tensor([[1.0, 3.0, 2.0, 0.0], [4.0, -1.0, 5.0, 6.0]])
    out = filter_top_k(logits, 2)
    expected = torch.tensor([[NEG, 3.0, 2.0, NEG], [NEG, NEG, 5.0, 6.0]])
    torch.testing.assert_close(out, expected)  # exact: values are copied, not computed


def test_top_k_keeps_ties_and_all_when_k_is_large():
    logits = torch.tensor([[2.0, 2.0, 1.0]])
    assert torch.isfinite(filter_top_k(logits, 1)).tolist() == [[True, True, False]]
    torch.testing.assert_close(filter_top_k(logits, 10), logits)


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_top_k_rejects_non_positive_k(k):
    with pytest.raises(ValueError, match=r"top_k must be a positive integer, got"):
        filter_top_k(torch.zeros(1, 3), k)


# ---- filter_top_p ----------------------------------------------------------------------
def test_top_p_keeps_the_smallest_nucleus_reaching_p():
    probs = torch.tensor([[0.1, 0.5, 0.3, 0.1]])
    logits = probs.log()
    kept = lambda p: torch.isfinite(filter_top_p(logits, p))[0].tolist()  # noqa: E731
    assert kept(0.5) == [False, True, False, False]  # 0.5 alone reaches 0.5
    assert kept(0.6) == [False, True, True, False]  # 0.5 + 0.3
    assert kept(0.85).count(True) == 3  # 0.9 reached by three tokens; a fourth is not needed
    assert kept(1.0) == [True, True, True, True]


def test_top_p_always_keeps_at_least_one_token():
    logits = torch.tensor([[0.0, 10.0, 0.0]])  # the top token holds ~0.9999 of the mass
    out = filter_top_p(logits, 1e-6)
    assert torch.isfinite(out)[0].tolist() == [False, True, False]
    assert out[0, 1] == 10.0


@pytest.mark.parametrize("p", [0.0, -0.1, 1.5])
def test_top_p_rejects_values_outside_0_1(p):
    with pytest.raises(ValueError, match=r"top_p must be in \(0, 1\], got"):
        filter_top_p(torch.zeros(1, 3), p)


# ---- select_next_token -----------------------------------------------------------------
def test_greedy_selection_is_the_argmax():
    logits = torch.tensor([[0.1, 2.0, -1.0], [5.0, 0.0, 4.9]])
    assert select_next_token(logits).tolist() == [1, 0]


def test_sampling_is_reproducible_with_a_generator_and_respects_top_k():
    logits = torch.randn(64, 20)
    a = select_next_token(logits, do_sample=True, top_k=3, generator=torch.Generator().manual_seed(1))
    b = select_next_token(logits, do_sample=True, top_k=3, generator=torch.Generator().manual_seed(1))
    assert a.tolist() == b.tolist()
    top3 = logits.topk(3, dim=-1).indices
    assert (top3 == a[:, None]).any(dim=-1).all()


def test_sampling_frequencies_follow_the_softmax_with_temperature():
    logits = torch.tensor([[0.0, 1.0, 2.0]]).expand(20000, 3)
    g = torch.Generator().manual_seed(0)
    ids = select_next_token(logits, do_sample=True, temperature=2.0, generator=g)
    freq = torch.bincount(ids, minlength=3).float() / ids.numel()
    expected = (logits[0] / 2.0).softmax(-1)
    # 20,000 draws: the standard error of each frequency is below 0.004
    torch.testing.assert_close(freq, expected, atol=0.02, rtol=0)


def test_top_p_sampling_never_leaves_the_nucleus():
    logits = torch.tensor([[3.0, 2.9, -5.0, -5.0]]).expand(500, 4)
    ids = select_next_token(logits, do_sample=True, top_p=0.9, generator=torch.Generator().manual_seed(0))
    assert set(ids.tolist()) == {0, 1}


@pytest.mark.parametrize("temperature", [0.0, -1.0])
def test_select_rejects_non_positive_temperature(temperature):
    with pytest.raises(ValueError, match=r"temperature must be > 0, got"):
        select_next_token(torch.zeros(1, 3), do_sample=True, temperature=temperature)


def test_select_rejects_logits_that_are_not_2d():
    with pytest.raises(ValueError, match=r"logits must be \(B, V\), got shape \(3,\)"):
        select_next_token(torch.zeros(3))
