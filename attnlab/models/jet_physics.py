"""Jet physics from the constituents' four-momenta: per-constituent and pairwise features, the
jet's mass and pT, and N-subjettiness.

Shapes: B jets, N constituents (zero-padded), K axes; p4 (B, N, 4) = (E, px, py, pz) in GeV;
mask (B, N) True for a real constituent (``constituent_mask``: E > 0).

Coordinates, for a four-momentum (E, px, py, pz):

    pT = √(px² + py²),   φ = atan2(py, px),   η = asinh(pz / pT)          (pseudorapidity)
    mT = √(E² − pz²),    y = asinh(pz / mT) = ½ ln((E + pz)/(E − pz))   (rapidity)
    Δφ wrapped into [−π, π), ΔR = √(Δη² + Δφ²) (per constituent, to the jet axis) or
    √(Δy² + Δφ²) (between two particles, as in FastJet and ParT)

The jet axis is the sum of the real constituents' four-momenta. Every value is finite for any
input: logarithms take max(x, ε) with ε = 1e-8 (as ParT does), padding is replaced by zeros
before anything is computed, and padded rows (and pairs) come out as exact zeros. These are
inputs computed from data: gradients with respect to p4 are not made safe (they are NaN where
pT = 0 or ΔR = 0, e.g. at padding), and a model never needs them.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["NUM_FEATURES", "NUM_PAIR_FEATURES", "FEATURE_NAMES", "PAIR_FEATURE_NAMES", "EPS",
           "constituent_mask", "constituent_features", "pair_features", "jet_mass", "jet_pt",
           "nsubjettiness", "tau32", "baseline_features", "wrap_phi"]

FEATURE_NAMES = ("Δη", "Δφ", "log pT", "log E", "log pT/pT_jet", "log E/E_jet", "ΔR")
PAIR_FEATURE_NAMES = ("ln kT", "ln z", "ln ΔR", "ln m²")
NUM_FEATURES, NUM_PAIR_FEATURES = len(FEATURE_NAMES), len(PAIR_FEATURE_NAMES)
EPS = 1e-8          # the floor of every logarithm's argument (ParT's ``eps``)
AXIS_PARTICLES = 40  # N-subjettiness: the hardest constituents that the axes are found from
_CHUNK = 2048        # jets per kt reclustering pass (its distances are K × K per jet)


def constituent_mask(p4: Tensor) -> Tensor:
    """(B, N) True where a constituent is real: E > 0 (the files pad with zero rows).

    Examples:
        >>> constituent_mask(torch.tensor([[[5.0, 3, 0, 4], [0, 0, 0, 0]]]))
        tensor([[ True, False]])
    """
    return p4[..., 0] > 0


def wrap_phi(dphi: Tensor) -> Tensor:
    """An azimuthal difference wrapped into [−π, π): (Δφ + π) mod 2π − π.

    Examples:
        >>> wrap_phi(torch.tensor([3.0, -3.5, 4.0]))
        tensor([ 3.0000,  2.7832, -2.2832])
    """
    return torch.remainder(dphi + math.pi, 2 * math.pi) - math.pi


def _masked(p4: Tensor, mask: Tensor) -> Tensor:
    return torch.where(mask[..., None], p4, 0.0)


def _log(x: Tensor) -> Tensor:
    return torch.log(x.clamp(min=EPS))


def _pt(p4: Tensor) -> Tensor:
    return torch.hypot(p4[..., 1], p4[..., 2])


def _eta(p4: Tensor) -> Tensor:
    return torch.asinh(p4[..., 3] / _pt(p4).clamp(min=EPS))


def _phi(p4: Tensor) -> Tensor:
    return torch.atan2(p4[..., 2], p4[..., 1])


def _mt(p4: Tensor) -> Tensor:
    """Transverse mass √((E − pz)(E + pz)), 0 where that is negative (rounding)."""
    return ((p4[..., 0] - p4[..., 3]) * (p4[..., 0] + p4[..., 3])).clamp(min=0).sqrt()


def _rapidity(p4: Tensor) -> Tensor:
    return torch.asinh(p4[..., 3] / _mt(p4).clamp(min=EPS))


def constituent_features(p4: Tensor, mask: Tensor) -> Tensor:
    """The 7 features of each constituent, relative to the jet axis (ParT's kinematic inputs).

        Δη = η − η_jet,  Δφ = wrap(φ − φ_jet),  log pT,  log E,
        log(pT / pT_jet),  log(E / E_jet),  ΔR = √(Δη² + Δφ²)

    where the jet is the sum of the real constituents. Units: GeV inside the logarithms. They
    are not standardised (log pT of a 600 GeV jet's constituents spans ≈ −2..6): a model
    should scale them (e.g. ParT's (log pT − 1.7)·0.7).

    Args:
        p4: (B, N, 4) four-momenta [E, px, py, pz], zero rows for padding.
        mask: (B, N) True for real constituents.

    Returns:
        (B, N, 7) in the order of ``FEATURE_NAMES``; zeros at padding.

    Examples:
        >>> p4 = torch.tensor([[[10.0, 10, 0, 0], [10, -10, 0, 0], [0, 0, 0, 0]]])
        >>> f = constituent_features(p4, constituent_mask(p4))
        >>> f[0, :, 0].tolist(), f[0, :, 3].tolist()  # Δη; log E, ln 10 = 2.3026
        ([0.0, 0.0, 0.0], [2.3025851249694824, 2.3025851249694824, 0.0])
    """
    p4 = _masked(p4, mask)
    jet = p4.sum(1, keepdim=True)  # (B, 1, 4)
    pt, energy = _pt(p4), p4[..., 0]
    deta = _eta(p4) - _eta(jet)
    dphi = wrap_phi(_phi(p4) - _phi(jet))
    features = torch.stack([
        deta, dphi, _log(pt), _log(energy),
        _log(pt / _pt(jet).clamp(min=EPS)), _log(energy / jet[..., 0].clamp(min=EPS)),
        torch.hypot(deta, dphi),
    ], dim=-1)  # (B, N, 7)
    return torch.where(mask[..., None], features, 0.0)


def pair_features(p4: Tensor, mask: Tensor) -> Tensor:
    """ParT's interaction features of every pair of constituents (Qu, Li, Qian, 2022, eq. 3).

        ΔR_ab = √(Δy² + Δφ²),   kT = min(pT_a, pT_b)·ΔR_ab,
        z = min(pT_a, pT_b) / (pT_a + pT_b),   m²_ab = (p_a + p_b)²  (four-vectors)

    returned as ln kT, ln z, ln ΔR, ln m², each ln(max(x, ε)). The pair mass is computed in the
    form m² = (mT_a + mT_b)² − (pT_a + pT_b)² + 4 mT_a mT_b sinh²(Δy/2) + 4 pT_a pT_b sin²(Δφ/2),
    equal to (E_a + E_b)² − |p_a + p_b|² but without its cancellation in float32 for nearly
    collinear pairs. A particle with itself (ΔR = 0, and m² = 4m² ≈ 0 for massless ones) gives
    ln ε ≈ −18.4 where ParT does too.

    Args:
        p4: (B, N, 4) four-momenta [E, px, py, pz].
        mask: (B, N) True for real constituents.

    Returns:
        (B, N, N, 4) in the order of ``PAIR_FEATURE_NAMES``; zeros where either particle is
        padding; finite everywhere.

    Examples:
        >>> p4 = torch.tensor([[[10.0, 10, 0, 0], [10, 0, 10, 0]]])
        >>> u = pair_features(p4, constituent_mask(p4))[0, 0, 1]  # ΔR = π/2, m² = 200
        >>> [round(v, 4) for v in u.tolist()]  # ln(10·π/2), ln ½, ln(π/2), ln 200
        [2.7542, -0.6931, 0.4516, 5.2983]
    """
    p4 = _masked(p4, mask)
    pt, mt, y, phi = _pt(p4), _mt(p4), _rapidity(p4), _phi(p4)  # (B, N) each
    pt_a, pt_b, mt_a, mt_b = pt[:, :, None], pt[:, None, :], mt[:, :, None], mt[:, None, :]
    dy = y[:, :, None] - y[:, None, :]  # (B, N, N)
    dphi = wrap_phi(phi[:, :, None] - phi[:, None, :])
    delta = torch.hypot(dy, dphi)
    pt_min = torch.minimum(pt_a, pt_b)
    m2 = ((mt_a + mt_b) ** 2 - (pt_a + pt_b) ** 2 + 4 * mt_a * mt_b * torch.sinh(dy / 2) ** 2
          + 4 * pt_a * pt_b * torch.sin(dphi / 2) ** 2)
    features = torch.stack([_log(pt_min * delta), _log(pt_min / (pt_a + pt_b).clamp(min=EPS)),
                            _log(delta), _log(m2)], dim=-1)  # (B, N, N, 4)
    both = (mask[:, :, None] & mask[:, None, :])[..., None]  # (B, N, N, 1)
    return torch.where(both, features, 0.0)


def _jet(p4: Tensor, mask: Tensor) -> Tensor:
    """The jet's four-momentum (B, 4), summed in float64."""
    return _masked(p4, mask).double().sum(1)


def jet_mass(p4: Tensor, mask: Tensor) -> Tensor:
    """The jet's invariant mass m = √(max(E² − |p|², 0)) of the summed constituents, (B,).

    Examples:
        >>> p4 = torch.tensor([[[10.0, 10, 0, 0], [10, -10, 0, 0]]])  # back to back
        >>> jet_mass(p4, constituent_mask(p4))
        tensor([20.])
    """
    jet = _jet(p4, mask)
    m2 = jet[:, 0] ** 2 - (jet[:, 1:] ** 2).sum(-1)
    return m2.clamp(min=0).sqrt().to(p4.dtype)


def jet_pt(p4: Tensor, mask: Tensor) -> Tensor:
    """The jet's transverse momentum pT = √(px² + py²) of the summed constituents, (B,)."""
    return _pt(_jet(p4, mask)).to(p4.dtype)


def _hardest(p4: Tensor, mask: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The k highest-pT real constituents (B, k, 4) float64 and their mask (B, k)."""
    pt = torch.where(mask, _pt(p4), -1.0)  # padding last
    order = pt.argsort(dim=1, descending=True)[:, :k]  # (B, k)
    hard = torch.gather(p4, 1, order[..., None].expand(-1, -1, 4)).double()
    return _masked(hard, torch.gather(mask, 1, order)), torch.gather(mask, 1, order)


def _kt_distances(pt: Tensor, y: Tensor, phi: Tensor, alive: Tensor) -> Tensor:
    """d_ij = min(pT_i², pT_j²)·ΔR_ij² for all pairs of live pseudojets (B, K, K); inf elsewhere."""
    dr2 = (y[:, :, None] - y[:, None, :]) ** 2 + wrap_phi(phi[:, :, None] - phi[:, None, :]) ** 2
    d = torch.minimum(pt[:, :, None], pt[:, None, :]) ** 2 * dr2  # (B, K, K)
    eye = torch.eye(alive.shape[1], dtype=torch.bool, device=alive.device)
    return d.masked_fill(~(alive[:, :, None] & alive[:, None, :] & ~eye), math.inf)


def _kt_row(pt: Tensor, y: Tensor, phi: Tensor, alive: Tensor, i: Tensor) -> Tensor:
    """Row i of ``_kt_distances`` for each jet (B, K): pseudojet i[b] against all of jet b's."""
    r = torch.arange(len(i), device=i.device)
    dr2 = (y - y[r, i, None]) ** 2 + wrap_phi(phi - phi[r, i, None]) ** 2
    d = torch.minimum(pt, pt[r, i, None]) ** 2 * dr2  # (B, K)
    pair = alive & alive[r, i, None]
    pair[r, i] = False
    return d.masked_fill(~pair, math.inf)


def _kt_axes(p4: Tensor, mask: Tensor, ns: tuple[int, ...], k: int | None) -> dict:
    """Exclusive-kt axes: for each n in ``ns``, {n: (y (B, K), φ (B, K), live (B, K))}.

    The k hardest constituents are reclustered with the kt distance and no beam distance (kt
    with R → ∞, E-scheme: pseudojets i, j with the smallest d_ij merge into p_i + p_j) until n
    pseudojets are left; those are the axes. A jet with at most n constituents keeps them all.
    Only the merged pseudojet's row of d changes per step, so a step is O(K) plus an argmin.
    """
    p, live = _hardest(p4, mask, p4.shape[1] if k is None else min(k, p4.shape[1]))
    pt, y, phi = _pt(p), _rapidity(p), _phi(p)  # (B, K)
    d, count = _kt_distances(pt, y, phi, live), live.sum(1)
    axes = {n: (y.clone(), phi.clone(), live.clone()) for n in ns}
    rows, K = torch.arange(len(p)), p.shape[1]
    while bool((active := count > min(ns)).any()):
        b = rows[active]
        ij = d[b].flatten(1).argmin(1)
        i, j = ij // K, ij % K
        p[b, i] += p[b, j]
        live[b, j] = False
        pt[b, i], y[b, i], phi[b, i] = _pt(p[b, i]), _rapidity(p[b, i]), _phi(p[b, i])
        row = _kt_row(pt[b], y[b], phi[b], live[b], i)  # (b, K)
        d[b, i], d[b, :, i] = row, row
        d[b, j], d[b, :, j] = math.inf, math.inf
        count[b] -= 1
        for n in ns:
            hit = (count == n) & active  # reached n axes in this step
            for saved, now in zip(axes[n], (y, phi, live)):
                saved[hit] = now[hit]
    return axes


def _compact(axes: tuple[Tensor, Tensor, Tensor], n: int) -> tuple[Tensor, Tensor, Tensor]:
    """The (at most n) live axes moved to the first n slots: (B, K) -> (B, n)."""
    y, phi, live = axes
    first = live.to(torch.uint8).argsort(dim=1, descending=True, stable=True)[:, :n]  # (B, n)
    return y.gather(1, first), phi.gather(1, first), live.gather(1, first)


def _tau(p4: Tensor, mask: Tensor, axes: tuple[Tensor, Tensor, Tensor], R: float) -> Tensor:
    """τ = Σ_k pT_k min_j ΔR_jk / (Σ_k pT_k · R) over the real constituents k, (B,) float64."""
    p = _masked(p4, mask).double()
    pt, y, phi = _pt(p), _rapidity(p), _phi(p)  # (B, N)
    ay, aphi, alive = axes  # (B, n)
    dr = torch.hypot(y[:, :, None] - ay[:, None, :], wrap_phi(phi[:, :, None] - aphi[:, None, :]))
    nearest = dr.masked_fill(~alive[:, None, :], math.inf).amin(-1)  # (B, N)
    counted = mask & alive.any(1, keepdim=True)
    nearest = torch.where(counted, nearest, 0.0)
    return (pt * nearest).sum(1) / (pt.sum(1) * R).clamp(min=EPS)


def _taus(p4: Tensor, mask: Tensor, ns: tuple[int, ...], R: float, k: int | None) -> list[Tensor]:
    """[τ_n for n in ns], (B,) float64 each, computed ``_CHUNK`` jets at a time, each chunk cut
    to its last column holding a real constituent."""
    out: list[list[Tensor]] = [[] for _ in ns]
    for a in range(0, len(p4), _CHUNK):
        m = mask[a:a + _CHUNK]
        used = int(m.any(0).nonzero().max()) + 1 if m.any() else 1
        part, m = p4[a:a + _CHUNK, :used], m[:, :used]
        axes = _kt_axes(part, m, ns, k)
        for taus, n in zip(out, ns):
            taus.append(_tau(part, m, _compact(axes[n], n), R))
    return [torch.cat(t) if t else torch.zeros(0, dtype=torch.float64) for t in out]


def _check_nsub(p4: Tensor, n: int, R: float, axis_particles: int | None) -> None:
    if p4.ndim != 3 or p4.shape[-1] != 4:
        raise ValueError(f"p4 must have shape (B, N, 4), got {tuple(p4.shape)}")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not R > 0:
        raise ValueError(f"R must be positive, got {R!r}")
    if axis_particles is not None and axis_particles < n:
        raise ValueError(f"axis_particles ({axis_particles}) must be at least n ({n})")


@torch.no_grad()
def nsubjettiness(p4: Tensor, mask: Tensor, n: int, *, R: float = 0.8,
                  axis_particles: int | None = AXIS_PARTICLES) -> Tensor:
    """N-subjettiness τ_N (Thaler, Van Tilburg, 2011), β = 1, normalised:

        τ_N = Σ_k pT_k · min_j ΔR_jk / (Σ_k pT_k · R),   ΔR_jk = √(Δy² + Δφ²)

    summed over the real constituents k, with j over N axes: small τ_N means the jet's energy
    lies along N directions (τ_1 ≈ 0 for one collimated prong). The axes are exclusive-kt axes
    (the "KT_Axes" of FastJet contrib's Nsubjettiness): the ``axis_particles`` hardest
    constituents reclustered with the kt algorithm (d_ij = min(pT_i², pT_j²)·ΔR_ij², no beam
    distance, E-scheme) until N pseudojets remain.

    Limits: the axes are not minimised afterwards ("OnePass" axes lower τ_N by a few per cent
    and separate slightly better); taking only the 40 hardest constituents for the axes (the
    cost is O(K³) per jet; the softer ones carry a few per cent of the pT and enter τ_N) moves
    the axes slightly — ``axis_particles=None`` uses all of them and then equals FastJet's
    exclusive kt axes (``tests/jets/test_physics.py``). A jet with at most N constituents has
    τ_N = 0; a jet with none has τ_N = 0.

    Args:
        p4: (B, N, 4) four-momenta [E, px, py, pz].
        mask: (B, N) True for real constituents.
        n: the number of axes N ≥ 1.
        R: the jet radius R₀ of the normalisation.
        axis_particles: how many of the hardest constituents find the axes (None: all).

    Returns:
        (B,) τ_N in p4's dtype.

    Examples:
        >>> p4 = torch.tensor([[[100.0, 100, 0, 0], [50, 40, 30, 0], [50, 0, 50, 0]]])
        >>> mask = constituent_mask(p4)  # φ = 0, 0.6435, π/2; the first two merge for N = 2
        >>> nsubjettiness(p4, mask, 2)  # (100·0.2111 + 50·(0.6435 − 0.2111)) / (200·0.8)
        tensor([0.2671])
    """
    _check_nsub(p4, n, R, axis_particles)
    return _taus(p4, mask, (n,), R, axis_particles)[0].to(p4.dtype)


@torch.no_grad()
def tau32(p4: Tensor, mask: Tensor, *, R: float = 0.8,
          axis_particles: int | None = AXIS_PARTICLES) -> Tensor:
    """τ3/τ2: small for three-prong jets (t → bW → bqq̄'), near 1 for one- and two-prong ones.

    Both from one kt reclustering (``nsubjettiness``). Where τ2 = 0 (at most two constituents,
    or all in two collinear groups) τ3 = 0 too and the ratio is defined as 1: a third axis
    explains nothing more.

    Returns:
        (B,) in p4's dtype.

    Examples:
        >>> p4 = torch.tensor([[[100.0, 100, 0, 0], [50, 40, 30, 0], [50, 0, 50, 0]]])
        >>> tau32(p4, constituent_mask(p4))  # three particles: three exact prongs
        tensor([0.])
    """
    _check_nsub(p4, 3, R, axis_particles)
    tau3, tau2 = _taus(p4, mask, (3, 2), R, axis_particles)
    ratio = torch.where(tau2 > 0, tau3 / tau2.clamp(min=EPS), 1.0)
    return ratio.to(p4.dtype)


def baseline_features(p4: Tensor, mask: Tensor, *, R: float = 0.8) -> Tensor:
    """(B, 2): the jet mass (GeV) and τ3/τ2 of every jet, the inputs of the classical taggers
    (``attnlab.tasks.jets.metrics.baseline_scores``; its ``BASELINE_FEATURES`` names the columns).

    Examples:
        >>> p4 = torch.tensor([[[100.0, 100, 0, 0], [50, 40, 30, 0], [50, 0, 50, 0]]])
        >>> baseline_features(p4, constituent_mask(p4))  # m² = 200² − 140² − 80²
        tensor([[118.3216,   0.0000]])
    """
    return torch.stack([jet_mass(p4, mask), tau32(p4, mask, R=R)], dim=1)
