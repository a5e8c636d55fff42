"""attnlab.tasks.jets.metrics against scikit-learn on fixed scores, and against the published
taggers' reading of its ROC where a test set puts ROC points exactly at ε_S = 0.3 and 0.5; the
likelihood-ratio baselines; and the Particle Flow Network baseline (attnlab.models.pfn): order
and padding do not matter."""
import math

import numpy as np
import pytest
import torch

from attnlab.tasks.jets.metrics import (BASELINES, LikelihoodRatio, baseline_scores, rejection, roc,
                                      roc_auc, tagging_metrics)
from attnlab.models.pfn import ParticleFlowNetwork

TOL = 1e-12  # both sides sum the same trapezoids in float64


def fixed_scores(ties: bool):
    """997 tops and 1,503 QCD jets with overlapping scores (0.3·997 is not a whole number, so
    no ROC point sits exactly at ε_S = 0.3 or 0.5)."""
    rng = np.random.default_rng(0)
    labels = np.r_[np.ones(997, int), np.zeros(1503, int)]
    scores = np.r_[rng.normal(1.0, 1.0, 997), rng.normal(0.0, 1.0, 1503)]
    scores = 1 / (1 + np.exp(-scores))
    return (np.round(scores, 2) if ties else scores), labels


@pytest.mark.slow
@pytest.mark.parametrize("ties", [False, True])
def test_roc_and_auc_equal_scikit_learn(ties):
    from sklearn.metrics import roc_auc_score, roc_curve

    scores, labels = fixed_scores(ties)
    fpr, tpr, _ = roc_curve(labels, scores, drop_intermediate=False)
    eff_s, eff_b = roc(scores, labels)
    np.testing.assert_allclose(eff_s, tpr, rtol=0, atol=TOL)
    np.testing.assert_allclose(eff_b, fpr, rtol=0, atol=TOL)
    assert roc_auc(scores, labels) == pytest.approx(roc_auc_score(labels, scores), abs=TOL)


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("efficiency", [0.3, 0.5, 0.77])
def test_rejection_interpolates_scikit_learns_roc(ties, efficiency):
    from sklearn.metrics import roc_curve

    scores, labels = fixed_scores(ties)
    fpr, tpr, _ = roc_curve(labels, scores)  # default drop_intermediate: the same straight lines
    expected = 1 / np.interp(efficiency, tpr, fpr)
    assert rejection(scores, labels, efficiency) == pytest.approx(expected, rel=TOL)


def scores_with_qcd_between_tops(rounded: bool):
    """1,000 tops and 1,500 QCD jets with overlapping scores (rounded: many ties), and three QCD
    jets placed between the 300th and 301st, and the 500th and 501st, best tops: ROC points sit
    exactly at ε_S = 0.3 and 0.5, as on the reference data's 50/50 test splits."""
    rng = np.random.default_rng(3)
    top, qcd = rng.normal(1.0, 1.0, 1000), rng.normal(0.0, 1.0, 1500)
    ranked = np.sort(top)[::-1]
    for k in (300, 500):
        qcd[k:k + 3] = ranked[k - 1] - np.array([0.1, 0.2, 0.3]) * (ranked[k - 1] - ranked[k])
    scores = 1 / (1 + np.exp(-np.r_[top, qcd]))
    labels = np.r_[np.ones(1000, int), np.zeros(1500, int)]
    return (np.round(scores, 3) if rounded else scores), labels


def reference_rejection(scores, labels, efficiency):
    """The published taggers' reading of scikit-learn's ROC (LorentzNet's ``buildROC``, PELICAN):
    at a point with exactly ε_S, ``fpr[argmin |tpr − ε_S|]``, the first such point and so the
    lowest ε_B; elsewhere linear between the points around ε_S."""
    from sklearn.metrics import roc_curve

    fpr, tpr, _ = roc_curve(labels, scores)
    if np.any(tpr == efficiency):
        eff_b = fpr[np.argmin(np.abs(tpr - efficiency))]
    else:
        eff_b = np.interp(efficiency, tpr, fpr)
    return 1 / max(eff_b, 1 / np.count_nonzero(labels == 0))


@pytest.mark.parametrize("rounded", [False, True])
def test_metrics_json_numbers_equal_the_published_taggers_reading(rounded):
    from sklearn.metrics import accuracy_score, roc_auc_score

    scores, labels = scores_with_qcd_between_tops(rounded)
    m = tagging_metrics(scores, labels)
    assert m["test_auc"] == pytest.approx(roc_auc_score(labels, scores), abs=TOL)
    assert m["test_accuracy"] == accuracy_score(labels, scores > 0.5)
    for key, efficiency in (("test_rejection_30", 0.3), ("test_rejection_50", 0.5)):
        assert m[key] == pytest.approx(reference_rejection(scores, labels, efficiency), rel=TOL)


def test_rejection_at_an_roc_point_with_qcd_jets_between_two_tops():
    """ε_S = 1/2 is reached at 0.8 (1 of 4 QCD jets tagged) and still at 0.7 (2 of 4): the
    published taggers read the 0.8, so 1/ε_B = 4, not 2."""
    scores = np.array([0.9, 0.85, 0.8, 0.7, 0.6, 0.5, 0.2, 0.1])
    labels = np.array([1, 0, 1, 0, 1, 1, 0, 0])
    assert reference_rejection(scores, labels, 0.5) == 4.0
    assert rejection(scores, labels, 0.5) == 4.0


def test_a_perfect_tagger_rejects_every_qcd_jet_even_at_full_signal_efficiency():
    """Every top above every QCD jet: all tops are tagged before any QCD jet, so at ε_S = 1 the
    rejection is the bound N_B (read np.interp's way, the last ROC point, it was 1)."""
    labels = np.r_[np.ones(10, int), np.zeros(40, int)]
    separated = np.r_[np.linspace(0.6, 1, 10), np.linspace(0, 0.4, 40)]
    assert rejection(separated, labels, 1.0) == 40.0
    assert reference_rejection(separated, labels, 1.0) == 40.0


def test_rejection_is_bounded_by_the_number_of_qcd_jets():
    labels = np.r_[np.ones(10, int), np.zeros(40, int)]
    separated = np.r_[np.linspace(0.6, 1, 10), np.linspace(0, 0.4, 40)]
    assert rejection(separated, labels, 0.5) == 40.0  # ε_B = 0: "at least 40"
    one_qcd_on_top = separated.copy()
    one_qcd_on_top[10] = 2.0  # the best-scored jet is QCD: ε_B = 1/40 at any ε_S
    assert rejection(one_qcd_on_top, labels, 0.3) == 40.0
    with pytest.raises(ValueError, match="signal_efficiency"):
        rejection(separated, labels, 0.0)


def test_tagging_metrics_keys_and_accuracy_threshold():
    from sklearn.metrics import roc_auc_score

    scores, labels = np.array([0.9, 0.5, 0.51, 0.2, 0.7, 0.1]), np.array([1, 1, 0, 0, 1, 0])
    m = tagging_metrics(scores, labels, prefix="val_")
    assert set(m) == {"val_accuracy", "val_auc", "val_rejection_30", "val_rejection_50"}
    assert m["val_accuracy"] == pytest.approx(4 / 6)  # 0.5 is QCD (argmax of a tie)
    assert m["val_auc"] == pytest.approx(roc_auc_score(labels, scores))
    assert all(isinstance(v, float) and math.isfinite(v) for v in m.values())


@pytest.mark.parametrize("scores, labels, message", [
    ([0.1, 0.2], [1, 1], "one class"),
    ([0.1, np.nan], [0, 1], "NaN"),
    ([0.1, 0.2], [0, 2], "0 or 1"),
    ([0.1, 0.2, 0.3], [0, 1], "one length"),
])
def test_metrics_reject_bad_input(scores, labels, message):
    with pytest.raises(ValueError, match=message):
        tagging_metrics(scores, labels)


def blobs(n, seed, shift=1.5):
    """Two unit Gaussians in 2-D, centres (0, 0) (QCD) and (shift, shift) (top)."""
    rng = np.random.default_rng(seed)
    x = np.r_[rng.normal(0, 1, (n, 2)), rng.normal(shift, 1, (n, 2))]
    return x, np.r_[np.zeros(n, int), np.ones(n, int)]


def test_likelihood_ratio_separates_two_gaussian_blobs_as_well_as_possible():
    train, test = blobs(20_000, 0), blobs(20_000, 1)
    lr = LikelihoodRatio(bins=30).fit(*train)
    scores = lr.score(test[0])
    # the optimal tagger cuts on x1 + x2: AUC = Φ(d/√2), d = 1.5·√2 the distance of the centres
    optimal = 0.5 * (1 + math.erf(1.5 / math.sqrt(2)))
    assert roc_auc(scores, test[1]) == pytest.approx(optimal, abs=0.005)
    assert ((scores >= 0) & (scores <= 1)).all()
    far = lr.score(np.array([[-50.0, -50.0], [50.0, 50.0], [50.0, -50.0], [0.75, 0.75]]))
    assert far[0] < 0.05 and far[1] > 0.95  # outside the training range: the outermost bins
    assert 0.3 < far[3] < 0.7  # midway between the centres: about even
    assert np.isfinite(far).all()


def test_empty_bins_score_one_half_whatever_the_class_sizes():
    rng = np.random.default_rng(2)
    top = rng.uniform(0, 1, (300, 2)) * [1, 1] + [0, 2]  # upper-left corner
    qcd = rng.uniform(0, 1, (100, 2)) * [1, 1] + [2, 0]  # lower-right corner
    x, y = np.r_[top, qcd], np.r_[np.ones(300, int), np.zeros(100, int)]
    lr = LikelihoodRatio(bins=4, smooth=0).fit(x, y)
    empty = lr.score(np.array([[0.5, 0.5], [2.5, 2.5]]))  # corners no training jet reached
    np.testing.assert_allclose(empty, [0.5, 0.5], rtol=1e-12)
    assert (lr.score(top) > 0.95).all() and (lr.score(qcd) < 0.05).all()
    with pytest.raises(ValueError, match="before fit"):
        LikelihoodRatio().score(x)


def test_baseline_scores_on_mass_and_tau32_like_features():
    rng = np.random.default_rng(4)

    def sample(n):
        top = np.c_[rng.normal(175, 15, n), rng.beta(4, 5, n)]
        qcd = np.c_[rng.gamma(3, 30, n), rng.beta(8, 3, n)]
        return np.r_[top, qcd], np.r_[np.ones(n, int), np.zeros(n, int)]

    (x_train, y_train), (x_test, y_test) = sample(5000), sample(5000)
    scores = baseline_scores(x_train, y_train, x_test, bins=20)
    assert set(scores) == set(BASELINES) and all(len(s) == len(y_test) for s in scores.values())
    auc = {name: roc_auc(s, y_test) for name, s in scores.items()}
    assert auc["likelihood"] > max(auc["mass"], auc["tau32"])  # two variables beat one
    # the mass window: a likelihood ratio beats a one-sided cut on the mass
    assert auc["mass"] > roc_auc(x_test[:, 0], y_test) + 0.02
    with pytest.raises(ValueError, match="mass, tau32"):
        baseline_scores(x_train[:, :1], y_train, x_test)


# ---- the Particle Flow Network --------------------------------------------------------------

ATOL = 1e-5  # float32 sums of up to 30 terms in another order


def pfn_inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 30, 7, generator=g)
    lengths = torch.tensor([30, 17, 1, 0])
    mask = torch.arange(30)[None, :] < lengths[:, None]  # (4, 30); the last jet is empty
    return x, mask


def test_pfn_is_invariant_to_the_order_of_the_constituents():
    torch.manual_seed(0)
    pfn = ParticleFlowNetwork().eval()
    x, mask = pfn_inputs()
    perm = torch.randperm(30)
    torch.testing.assert_close(pfn(x[:, perm], mask[:, perm]), pfn(x, mask), atol=ATOL, rtol=0)


def test_pfn_ignores_padding_whatever_it_holds():
    torch.manual_seed(0)
    pfn = ParticleFlowNetwork(phi_sizes=(32, 16), f_sizes=(32,)).eval()
    x, mask = pfn_inputs()
    logits = pfn(x, mask)
    garbage = torch.full((4, 12, 7), float("nan"))
    more_mask = torch.cat([mask, torch.zeros(4, 12, dtype=torch.bool)], 1)
    padded = pfn(torch.cat([x, garbage], 1), more_mask)
    torch.testing.assert_close(padded, logits, atol=1e-6, rtol=0)
    x_other = torch.where(mask[..., None], x, torch.randn_like(x) * 100)  # other padding values
    torch.testing.assert_close(pfn(x_other, mask), logits, atol=1e-6, rtol=0)
    assert logits.shape == (4, 2) and torch.isfinite(logits).all()
    torch.testing.assert_close(logits[3], pfn.f(torch.zeros(16)))  # no constituents: F(0)


@pytest.mark.slow
def test_pfn_learns_to_count():
    torch.manual_seed(0)
    x, mask = torch.ones(64, 10, 1), torch.arange(10)[None] < torch.randint(1, 11, (64, 1))
    labels = (mask.sum(1) > 5).long()  # "top" = more than five constituents: a sum can tell
    pfn = ParticleFlowNetwork(num_features=1, phi_sizes=(8,), f_sizes=(8,))
    optimizer = torch.optim.Adam(pfn.parameters(), lr=0.05)
    for _ in range(150):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(pfn(x, mask), labels)
        loss.backward()
        optimizer.step()
    assert (pfn(x, mask).argmax(1) == labels).float().mean() > 0.95


def test_pfn_rejects_bad_shapes():
    with pytest.raises(ValueError, match="phi_sizes"):
        ParticleFlowNetwork(phi_sizes=(10, 0))
    with pytest.raises(ValueError, match=r"x must be \(B, N, 7\)"):
        ParticleFlowNetwork()(torch.zeros(2, 3, 5), torch.ones(2, 3, dtype=torch.bool))
