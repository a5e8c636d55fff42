"""The jet axis the constituent features are relative to is the E-scheme axis (the sum of the
four-momenta, as FastJet's anti-kT jets have it), and the features of a jet turned about the
beam so that it crosses φ = ±π are those of the jet itself (docs/jets.md, "The model")."""
import math

import pytest
import torch

from attnlab.models.jet_physics import (constituent_features, constituent_mask, jet_mass,
                                        pair_features, tau32)

from .test_task import synthetic_jets


def _turned(p4: torch.Tensor, angle: float) -> torch.Tensor:
    """The jets (B, N, 4) turned by ``angle`` about the beam (z) axis; padding stays zero."""
    c, s = math.cos(angle), math.sin(angle)
    out = p4.clone()
    out[..., 1], out[..., 2] = c * p4[..., 1] - s * p4[..., 2], s * p4[..., 1] + c * p4[..., 2]
    return torch.where(constituent_mask(p4)[..., None], out, 0.0)


@pytest.mark.parametrize("axis_phi", [math.pi - 0.01, math.pi, -math.pi + 0.01])
def test_a_jet_across_phi_pi_has_the_features_of_the_jet_turned_away(axis_phi):
    """The toy jets sit at φ ≈ 1; turned to φ ≈ ±π some constituents have φ near +π and
    others near −π. Float64, within 1e-12 (the pair features' logarithms of small masses,
    within 1e-5)."""
    p4, _ = synthetic_jets(10, seed=3)
    p4 = torch.from_numpy(p4).double()
    mask = constituent_mask(p4)
    turned = _turned(p4, axis_phi - 1.0)
    phi = torch.atan2(turned[..., 2], turned[..., 1])[mask]
    assert (phi > 3.0).any() and (phi < -3.0).any()  # the jets do cross φ = ±π
    torch.testing.assert_close(constituent_features(turned, mask), constituent_features(p4, mask),
                               atol=1e-12, rtol=0)
    torch.testing.assert_close(pair_features(turned, mask), pair_features(p4, mask),
                               atol=1e-5, rtol=0)
    torch.testing.assert_close(jet_mass(turned, mask), jet_mass(p4, mask), atol=1e-9, rtol=0)
    torch.testing.assert_close(tau32(turned, mask), tau32(p4, mask), atol=1e-12, rtol=0)


@pytest.mark.slow  # FastJet's import
def test_the_axis_is_fastjets_e_scheme_anti_kt_jet():
    """η_jet = η − Δη of every constituent equals the pseudorapidity of FastJet's anti-kT
    (R = 0.8, E-scheme) jet of the same constituents, and φ_jet its azimuth, within 1e-12; a
    pT-weighted centroid would be another axis."""
    fastjet = pytest.importorskip("fastjet")
    p4, _ = synthetic_jets(3, seed=5)
    p4 = _turned(torch.from_numpy(p4).double(), math.pi - 1.0)[:1]  # axis near φ = π
    mask = constituent_mask(p4)
    real = p4[0, mask[0]]  # (n, 4)
    jets = fastjet.ClusterSequence(
        [fastjet.PseudoJet(*(float(v) for v in (p[1], p[2], p[3], p[0]))) for p in real],
        fastjet.JetDefinition(fastjet.antikt_algorithm, 0.8)).inclusive_jets()
    jet = max(jets, key=lambda j: j.pt())
    features = constituent_features(p4, mask)[0, mask[0]]  # (n, 7)
    eta = torch.asinh(real[:, 3] / torch.hypot(real[:, 1], real[:, 2]))
    phi = torch.atan2(real[:, 2], real[:, 1])
    axis_phi = torch.remainder(phi - features[:, 1] + math.pi, 2 * math.pi) - math.pi
    torch.testing.assert_close(eta - features[:, 0], torch.full_like(eta, jet.eta()),
                               atol=1e-12, rtol=0)
    torch.testing.assert_close(axis_phi, torch.full_like(phi, jet.phi_std()), atol=1e-12, rtol=0)
    centroid = float((torch.hypot(real[:, 1], real[:, 2]) * eta).sum()
                     / torch.hypot(real[:, 1], real[:, 2]).sum())
    assert abs(centroid - jet.eta()) > 1e-6  # the test tells the two axes apart
