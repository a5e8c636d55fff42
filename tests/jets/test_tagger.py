"""The jet tagger (attnlab.models.JetTagger): a set model — its logits do not depend on the
order of the constituents nor on how much zero padding follows them, with and without the class
token and the pair bias; a one-constituent jet gives finite logits and gradients."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from attnlab.models import JetTagger, JetTaggerConfig
from attnlab.models.jet_tagger import PairBias, scaled_features

# float32 sums over up to ~40 constituents in another order: a few ulps of O(1) logits
ATOL, RTOL = 2e-5, 1e-4

OPTIONS = {
    "default (pair bias)": {},
    "the course's model": {"pair_bias": False},
    "class token": {"class_token": True, "pair_bias": False},
    "both, pre-LN": {"class_token": True, "pair_bias": True, "norm_first": True},
}


def jets(counts, *, width=None, seed=0):
    """Massless constituents of jets at pT ~ 600 GeV, pT-ordered, zero-padded to ``width``:
    p4 (len(counts), width, 4) [E, px, py, pz]."""
    g = torch.Generator().manual_seed(seed)
    width = width or max(counts)
    p4 = torch.zeros(len(counts), width, 4)
    for b, n in enumerate(counts):
        pt = torch.sort(torch.rand(n, generator=g) ** 3 * 200 + 0.5, descending=True).values
        eta = 0.4 + 0.3 * torch.randn(n, generator=g)
        phi = 1.0 + 0.3 * torch.randn(n, generator=g)
        px, py, pz = pt * phi.cos(), pt * phi.sin(), pt * torch.sinh(eta)
        p4[b, :n] = torch.stack([torch.sqrt(px ** 2 + py ** 2 + pz ** 2), px, py, pz], -1)
    return p4


def tagger(**options):
    torch.manual_seed(0)
    return JetTagger(model_dim=16, num_heads=2, num_layers=2, pair_dim=8, **options).eval()


@pytest.mark.parametrize("options", list(OPTIONS.values()), ids=list(OPTIONS))
def test_permuting_the_constituents_leaves_the_logits_unchanged(options):
    model, p4 = tagger(**options), jets([23, 7, 1, 16], width=25)
    logits = model(p4)
    for seed in range(3):
        order = torch.randperm(25, generator=torch.Generator().manual_seed(seed))
        assert_close(model(p4[:, order]), logits, atol=ATOL, rtol=RTOL)  # padding moves too


@pytest.mark.parametrize("options", list(OPTIONS.values()), ids=list(OPTIONS))
def test_extra_zero_padding_leaves_the_logits_unchanged(options):
    model, p4 = tagger(**options), jets([12, 5, 1])
    padded = torch.cat([p4, torch.zeros(3, 30, 4)], dim=1)  # (3, 42, 4)
    assert_close(model(padded), model(p4), atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("options", list(OPTIONS.values()), ids=list(OPTIONS))
def test_each_jet_of_a_padded_batch_gets_the_logits_it_gets_alone(options):
    model, p4 = tagger(**options), jets([18, 3, 9])
    batch = model(p4)
    for b, n in enumerate([18, 3, 9]):
        assert_close(batch[b], model(p4[b:b + 1, :n])[0], atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("options", list(OPTIONS.values()), ids=list(OPTIONS))
def test_a_one_constituent_jet_gives_finite_logits_and_gradients(options):
    model = tagger(**options).train()
    p4 = jets([1, 14, 1], width=20)
    loss = torch.nn.functional.cross_entropy(model(p4), torch.tensor([1, 0, 1]))
    loss.backward()
    assert math.isfinite(loss.item())
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name


def test_a_jet_with_no_constituent_gives_finite_logits():
    """Padding only (not in the files, but a batch cut from a stream could hold one)."""
    for options in OPTIONS.values():
        assert torch.isfinite(tagger(**options)(torch.zeros(2, 5, 4))).all()


def test_pair_bias_is_finite_and_zero_where_either_constituent_is_padding():
    from attnlab.models.jet_physics import pair_features

    p4 = jets([6, 1], width=8)
    _, mask = scaled_features(p4)
    bias = PairBias(4, 8, 3)(pair_features(p4, mask), mask)  # (2, 3, 8, 8)
    assert bias.shape == (2, 3, 8, 8) and torch.isfinite(bias).all()
    both = mask[:, None, :, None] & mask[:, None, None, :]
    assert (bias[~both.expand_as(bias)] == 0).all()
    assert bias[0, :, :6, :6].abs().sum() > 0


def test_scaled_features_are_zero_at_padding_and_of_order_one_on_real_constituents():
    x, mask = scaled_features(jets([40, 2], width=50))
    assert (x[~mask] == 0).all()
    assert x[mask].abs().max() < 10  # ParT's shift and scale: O(1) for jets of pT ~ 600 GeV


def test_attention_maps_have_one_map_per_block_and_ignore_padding():
    model = tagger(class_token=True, class_layers=3)
    p4 = jets([5, 9], width=12)
    maps = model.get_attention_maps(p4)
    assert len(maps) == 2 and maps[0].shape == (2, 2, 12, 12)
    assert (maps[-1][0, :, :, 5:] == 0).all()  # no weight on the first jet's padding
    assert_close(maps[-1][0, :, :5, :5].sum(-1), torch.ones(2, 5))
    token = model.class_attention_maps(p4)
    assert len(token) == 3 and token[0].shape == (2, 2, 1, 12)
    assert_close(token[0].sum(-1), torch.ones(2, 2, 1))
    assert tagger().class_attention_maps(p4) == []


def test_from_config_round_trips_through_config_yaml_keys():
    config = JetTaggerConfig(model_dim=32, num_heads=4, class_token=True, pair_bias=True)
    model = JetTagger.from_config(config)
    assert model.config == config and config.dim_feedforward == 64
    again = JetTagger.from_config(JetTaggerConfig.from_dict(config.as_dict()))
    assert again.state_dict().keys() == model.state_dict().keys()


def test_bad_input_shape_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match=r"p4 must be \(B, N, 4\).*\(2, 5, 3\)"):
        tagger()(torch.ones(2, 5, 3))


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(counts=st.lists(st.integers(1, 12), min_size=1, max_size=4), seed=st.integers(0, 10**6),
       extra=st.integers(0, 6))
def test_logits_of_any_jets_ignore_order_and_padding(counts, seed, extra):
    model = tagger(pair_bias=True)
    p4 = jets(counts, seed=seed)
    width = p4.shape[1] + extra
    order = torch.randperm(width, generator=torch.Generator().manual_seed(seed))
    shuffled = torch.cat([p4, torch.zeros(len(counts), extra, 4)], dim=1)[:, order]
    assert_close(model(shuffled), model(p4), atol=ATOL, rtol=RTOL)
