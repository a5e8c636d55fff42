"""attnlab.models.jet_physics: features against values computed by hand (float64 numpy), Δφ
wrap-around at ±π, padding and coincident particles, and N-subjettiness on hand-built one-,
two- and three-prong jets (and against FastJet's exclusive-kt axes)."""
import math

import numpy as np
import pytest
import torch

from attnlab.models.jet_physics import (EPS, NUM_FEATURES, NUM_PAIR_FEATURES, baseline_features,
                                      constituent_features, constituent_mask, jet_mass, jet_pt,
                                      nsubjettiness, pair_features, tau32)


def massless(pt, eta, phi):
    """Four-momenta (n, 4) [E, px, py, pz] of massless particles (float64)."""
    pt, eta, phi = (np.atleast_1d(np.asarray(v, dtype=np.float64)) for v in (pt, eta, phi))
    return np.c_[pt * np.cosh(eta), pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta)]


def jets(*particle_lists, pad_to=None):
    """(B, N, 4) float64 tensor from lists of (n_b, 4) arrays, zero-padded."""
    n = pad_to or max(len(p) for p in particle_lists)
    out = np.zeros((len(particle_lists), n, 4))
    for b, p in enumerate(particle_lists):
        out[b, :len(p)] = p
    return torch.from_numpy(out)


def test_features_of_a_two_particle_jet_by_hand():
    a, b = massless(30.0, 0.0, 0.0)[0], massless(10.0, 0.4, 0.5)[0]
    p4 = jets(np.stack([a, b]), pad_to=3)  # one padding row
    f = constituent_features(p4, constituent_mask(p4))[0].numpy()
    jet = a + b
    pt_jet = math.hypot(jet[1], jet[2])
    eta_jet, phi_jet = math.asinh(jet[3] / pt_jet), math.atan2(jet[2], jet[1])
    for row, (p, pt, eta, phi) in enumerate([(a, 30.0, 0.0, 0.0), (b, 10.0, 0.4, 0.5)]):
        deta, dphi = eta - eta_jet, phi - phi_jet
        expected = [deta, dphi, math.log(pt), math.log(p[0]), math.log(pt / pt_jet),
                    math.log(p[0] / jet[0]), math.hypot(deta, dphi)]
        np.testing.assert_allclose(f[row], expected, rtol=1e-12, atol=1e-12)
    assert f.shape == (3, NUM_FEATURES) and (f[2] == 0).all()
    # float32 inputs: the same within float32 rounding
    f32 = constituent_features(p4.float(), constituent_mask(p4))[0].numpy()
    np.testing.assert_allclose(f32, f, atol=2e-6)


def test_pair_features_of_a_two_particle_jet_by_hand():
    a, b = massless(30.0, 0.0, 0.0)[0], massless(10.0, 0.4, 0.5)[0]
    p4 = jets(np.stack([a, b]), pad_to=3)
    u = pair_features(p4, constituent_mask(p4))[0].numpy()  # (3, 3, 4)
    delta = math.hypot(0.4, 0.5)  # rapidity = η for massless particles
    total = a + b
    m2 = total[0] ** 2 - (total[1:] ** 2).sum()  # (p_a + p_b)²
    expected = [math.log(10.0 * delta), math.log(10.0 / 40.0), math.log(delta), math.log(m2)]
    np.testing.assert_allclose(u[0, 1], expected, rtol=1e-10)
    np.testing.assert_allclose(u[1, 0], expected, rtol=1e-10)  # symmetric
    assert u.shape == (3, 3, NUM_PAIR_FEATURES)
    assert (u[2] == 0).all() and (u[:, 2] == 0).all()  # pairs with the padding row


def test_pair_mass_of_a_nearly_collinear_pair_in_float32():
    # m² = 2 pT_a pT_b (cosh Δy − cos Δφ) = 0.0178 GeV², against E² ≈ 9e4: (E_a + E_b)² − |p|²
    # in float32 gives 0.0234 (+32 %); the form without the cancellation is within 0.1 %
    a, b = massless(200.0, 0.3, 1.0)[0], massless(100.0, 0.3005, 1.0008)[0]
    exact = 2 * 200 * 100 * (math.cosh(0.0005) - math.cos(0.0008))
    u = pair_features(jets(np.stack([a, b])).float(), torch.ones(1, 2, dtype=torch.bool))
    assert float(u[0, 0, 1, 3]) == pytest.approx(math.log(exact), abs=1e-3)


def test_delta_phi_wraps_around_pi():
    pair = massless([20.0, 20.0], [0.1, -0.1], [math.pi - 0.05, -math.pi + 0.05])
    p4 = jets(pair)
    mask = constituent_mask(p4)
    f = constituent_features(p4, mask)[0]
    np.testing.assert_allclose(f[:, 1].abs().numpy(), [0.05, 0.05], atol=1e-9)  # not 2π − 0.05
    np.testing.assert_allclose(f[:, 6].numpy(), [math.hypot(0.1, 0.05)] * 2, atol=1e-9)
    assert float(f[0, 1]) == pytest.approx(-float(f[1, 1]))
    lndelta = pair_features(p4, mask)[0, 0, 1, 2]
    assert float(lndelta) == pytest.approx(math.log(math.hypot(0.2, 0.1)), abs=1e-9)


def _awkward_batch():
    """Random jets, an empty jet, and a jet with a particle along the beam (pT = 0)."""
    rng = np.random.default_rng(0)
    lists = [massless(rng.exponential(20, n), rng.normal(0, 0.3, n), rng.normal(0, 0.3, n))
             for n in (5, 1, 12)]
    beam = np.r_[massless(10.0, 0.1, 0.2), [[7.0, 0.0, 0.0, 7.0]]]  # the second has pT = 0
    return jets(*lists, np.zeros((0, 4)), beam, pad_to=15)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_zeros_and_finite_values_at_padding(dtype):
    p4 = _awkward_batch().to(dtype)
    mask = constituent_mask(p4)
    f, u = constituent_features(p4, mask), pair_features(p4, mask)
    assert torch.isfinite(f).all() and torch.isfinite(u).all()
    assert (f[~mask] == 0).all()
    pad_pairs = ~(mask[:, :, None] & mask[:, None, :])
    assert (u[pad_pairs] == 0).all()
    assert (f[3] == 0).all() and (u[3] == 0).all()  # the empty jet
    for value in (jet_mass(p4, mask), jet_pt(p4, mask), tau32(p4, mask),
                  nsubjettiness(p4, mask, 2)):
        assert torch.isfinite(value).all() and value.dtype == dtype


def test_pair_features_of_identical_particles_are_finite():
    same = massless([40.0, 40.0, 5.0], [0.2, 0.2, -0.1], [0.3, 0.3, 0.1])
    p4 = jets(same, pad_to=4)
    u = pair_features(p4, constituent_mask(p4))[0]
    assert torch.isfinite(u).all()
    log_eps = math.log(EPS)
    # ΔR = 0 and m² = 0: ln kT, ln ΔR, ln m² sit at ln ε; z = ½
    np.testing.assert_allclose(u[0, 1].numpy(), [log_eps, math.log(0.5), log_eps, log_eps],
                               atol=1e-6)
    np.testing.assert_allclose(u[0, 0].numpy(), u[0, 1].numpy())  # a particle with itself


def test_features_follow_a_permutation_of_the_constituents():
    p4 = _awkward_batch()
    mask = constituent_mask(p4)
    perm = torch.randperm(p4.shape[1], generator=torch.Generator().manual_seed(0))
    f, u = constituent_features(p4, mask), pair_features(p4, mask)
    torch.testing.assert_close(constituent_features(p4[:, perm], mask[:, perm]), f[:, perm])
    torch.testing.assert_close(pair_features(p4[:, perm], mask[:, perm]), u[:, perm][:, :, perm])
    torch.testing.assert_close(tau32(p4[:, perm], mask[:, perm]), tau32(p4, mask))


def test_jet_mass_and_pt():
    back_to_back = massless([50.0, 50.0], [0.0, 0.0], [0.0, math.pi])
    top_like = massless([300.0, 150.0, 100.0], [0.0, 0.3, -0.2], [0.0, 0.4, -0.5])
    p4 = jets(back_to_back, top_like, pad_to=4)
    mask = constituent_mask(p4)
    total = top_like.sum(0)
    np.testing.assert_allclose(jet_mass(p4, mask).numpy(),
                               [100.0, math.sqrt(total[0] ** 2 - (total[1:] ** 2).sum())],
                               rtol=1e-12)
    np.testing.assert_allclose(jet_pt(p4, mask).numpy(), [0.0, math.hypot(*total[1:3])],
                               atol=1e-9)


def prong_jet(centres, pts, rng, spread=0.01, per_prong=6):
    """Particles scattered by ``spread`` around each (η, φ) centre, sharing each prong's pT."""
    parts = []
    for (eta, phi), pt in zip(centres, pts):
        share = rng.dirichlet(np.ones(per_prong)) * pt
        parts.append(massless(share, eta + rng.normal(0, spread, per_prong),
                              phi + rng.normal(0, spread, per_prong)))
    parts = np.concatenate(parts)
    return parts[np.argsort(-np.hypot(parts[:, 1], parts[:, 2]))]  # pT-ordered, as the files


def test_nsubjettiness_counts_the_prongs():
    rng = np.random.default_rng(1)
    one = prong_jet([(0.0, 0.0)], [600.0], rng)
    two = prong_jet([(0.0, 0.0), (0.35, 0.3)], [350.0, 250.0], rng)
    three = prong_jet([(0.0, 0.0), (0.35, 0.3), (-0.3, 0.35)], [250.0, 200.0, 150.0], rng)
    p4 = jets(one, two, three, pad_to=40)
    mask = constituent_mask(p4)
    tau = {n: nsubjettiness(p4, mask, n).numpy() for n in (1, 2, 3)}
    assert tau[1][0] < 0.02  # one prong: τ1 ≈ 0 (the spread only)
    assert tau[2][1] < 0.02 < 0.2 < tau[1][1]  # two prongs: τ2 ≈ 0, τ1 large
    assert tau[3][2] < 0.02 < 0.1 < tau[2][2]  # three prongs: τ3 ≈ 0, τ2 large
    ratio = tau32(p4, mask).numpy()
    np.testing.assert_allclose(ratio, tau[3] / tau[2], rtol=1e-6)
    assert ratio[2] < 0.15 and ratio[2] < ratio[1] and ratio[2] < ratio[0]  # three prongs: least
    collinear = jets(massless([30.0, 20.0, 10.0], [0.1] * 3, [0.2] * 3))
    tau1 = nsubjettiness(collinear, constituent_mask(collinear), 1)
    assert float(tau1) == pytest.approx(0, abs=1e-12)


def test_nsubjettiness_by_hand_and_its_conventions():
    # φ = 0, 0.6435, π/2 with pT 100, 50, 50: kt merges the first two for N = 2
    p4 = torch.tensor([[[100.0, 100, 0, 0], [50, 40, 30, 0], [50, 0, 50, 0]]], dtype=torch.float64)
    mask = constituent_mask(p4)
    phi_axis = math.atan2(30, 140)
    expected = (100 * phi_axis + 50 * (math.atan2(30, 40) - phi_axis)) / (200 * 0.8)
    assert float(nsubjettiness(p4, mask, 2)) == pytest.approx(expected, rel=1e-12)
    assert float(nsubjettiness(p4, mask, 2, R=0.4)) == pytest.approx(2 * expected, rel=1e-12)
    assert float(nsubjettiness(p4, mask, 3)) == 0.0  # as many axes as particles
    two = torch.tensor([[[10.0, 10, 0, 0], [10, 0, 10, 0], [0, 0, 0, 0]]])
    assert float(tau32(two, constituent_mask(two))) == 1.0  # τ2 = 0: defined as 1
    empty = torch.zeros(1, 3, 4)
    assert float(nsubjettiness(empty, constituent_mask(empty), 1)) == 0.0
    with pytest.raises(ValueError, match="n must be a positive integer"):
        nsubjettiness(p4, mask, 0)


def test_tau_does_not_depend_on_padding_or_batch_neighbours():
    rng = np.random.default_rng(2)
    jet = prong_jet([(0.0, 0.0), (0.3, 0.3), (-0.3, 0.3)], [250, 200, 150], rng, spread=0.1)
    other = prong_jet([(0.1, 0.1)], [600], rng, spread=0.2, per_prong=50)
    alone = jets(jet)
    batch = jets(other, jet, pad_to=70)
    ref = baseline_features(alone, constituent_mask(alone))[0]
    torch.testing.assert_close(baseline_features(batch, constituent_mask(batch))[1], ref,
                               rtol=1e-12, atol=1e-12)


def test_kt_axes_equal_fastjet_exclusive_kt():
    fastjet = pytest.importorskip("fastjet")
    rng = np.random.default_rng(3)
    lists = [prong_jet([(0, 0), (0.3, 0.2), (-0.2, 0.3)], [300, 200, 100], rng, spread=0.15,
                       per_prong=int(k)) for k in rng.integers(2, 15, 12)]
    p4 = jets(*lists, pad_to=45)
    mask = constituent_mask(p4)
    definition = fastjet.JetDefinition(fastjet.kt_algorithm, 1000.0)  # no beam distance
    for n in (1, 2, 3):
        ours = nsubjettiness(p4, mask, n, axis_particles=None).numpy()
        for b, particles in enumerate(lists):
            pseudo = [fastjet.PseudoJet(*map(float, (q[1], q[2], q[3], q[0]))) for q in particles]
            axes = fastjet.ClusterSequence(pseudo, definition).exclusive_jets(n)
            tau = sum(p.pt() * min(p.delta_R(a) for a in axes) for p in pseudo)
            assert ours[b] == pytest.approx(tau / (sum(p.pt() for p in pseudo) * 0.8), abs=1e-9)
