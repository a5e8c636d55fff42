"""A Delphes-like detector: particles → smeared tracks and calorimeter towers.

The Top Quark Tagging Reference Dataset's jets were made of Delphes energy-flow objects with
the ATLAS card. This module does the part of that simulation that shapes a jet's constituents,
with the numbers of Delphes' ``cards/delphes_card_ATLAS.tcl`` (github.com/delphes/delphes):

- **tracks**: charged particles with pT > 0.5 GeV and |η| < 2.5 (the card's tracker covers
  |η| ≤ 2.5; the 0.5 GeV floor is ours), kept with the card's tracking efficiency
  (charged hadrons: 0.95 for pT > 1 GeV and 0.70 below in |η| ≤ 1.5, 0.85 / 0.60 in
  1.5 < |η| ≤ 2.5; electrons 0.95 / 0.73 and 0.83 / 0.50, 0.99 / 0.90 above 100 GeV; muons
  0.99 / 0.75 and 0.98 / 0.70); pT smeared log-normally (``MomentumSmearing``) with the
  card's relative resolution σ(pT)/pT = √(a² + pT²·b²), for charged hadrons
  a, b = 0.06, 1.3e-3 (|η| ≤ 0.5), 0.10, 1.7e-3 (≤ 1.5), 0.25, 3.1e-3 (≤ 2.5); electrons
  0.03, 1.3e-3 / 0.05, 1.7e-3 / 0.15, 3.1e-3; muons 0.01, 1.0e-4 / 0.015, 1.5e-4 /
  0.025, 3.5e-4; direction and mass kept.
- **towers**: every other visible particle but muons (neutral ones, and charged ones the
  tracker missed) deposits its energy in the ECAL and the HCAL with the card's fractions
  (e, γ, π⁰: all ECAL; K⁰s, Λ: 0.3 / 0.7; other hadrons: all HCAL), summed per (η, φ)
  cell: ECAL 0.0174 × 1° for |η| < 3 (the card's barrel and end-cap cells), 0.175 × 10°
  beyond; HCAL 0.1 × 10° for |η| < 2.5, 0.2 × 20° beyond (the card's forward cells are
  irregular; these are their typical size). Each tower's energy is smeared log-normally
  with the card's resolution, ECAL σ(E) = √(E²·0.0017² + E·0.101²) for |η| ≤ 3.2 and
  √(E²·0.035² + E·0.285²) to 4.9; HCAL √(E²·0.0302² + E·0.5205² + 1.59²) for |η| ≤ 1.7,
  √(E²·0.05² + E·0.706²) to 3.2, √(E²·0.0942² + E·1.0²) to 4.9; a tower is kept when
  E > 0.5 GeV (ECAL) or 1.0 GeV (HCAL) and E > 2σ, as a massless object at a point drawn
  uniformly in its cell (the card's ``SmearTowerCenter``).

Tracks are kept out of the calorimeter, which is what Delphes' energy flow achieves by
subtracting the tracks' expected deposits from the towers. Not modelled: pile-up, the
magnetic field's bending, calorimeter showers spreading into neighbouring cells.

Shapes: P particles of a batch (flattened over events); the output is jagged per event.
"""
from __future__ import annotations

import numpy as np

__all__ = ["DelphesLike", "track_resolution", "ecal_resolution", "hcal_resolution"]

TRACK_PT_MIN, TRACK_ETA_MAX = 0.5, 2.5
# (|η| upper edge, a, b) of σ(pT)/pT = √(a² + pT²·b²), per particle kind (the card's)
_TRACK_RESOLUTION = {
    "hadron": ((0.5, 0.06, 1.3e-3), (1.5, 0.10, 1.7e-3), (2.5, 0.25, 3.1e-3)),
    "electron": ((0.5, 0.03, 1.3e-3), (1.5, 0.05, 1.7e-3), (2.5, 0.15, 3.1e-3)),
    "muon": ((0.5, 0.01, 1.0e-4), (1.5, 0.015, 1.5e-4), (2.5, 0.025, 3.5e-4)),
}
# tracking efficiency (|η| ≤ 1.5, 1.5 < |η| ≤ 2.5) for pT ≤ 1 GeV, 1 < pT ≤ 100, pT > 100
_TRACK_EFFICIENCY = {
    "hadron": ((0.70, 0.95, 0.95), (0.60, 0.85, 0.85)),
    "electron": ((0.73, 0.95, 0.99), (0.50, 0.83, 0.90)),
    "muon": ((0.75, 0.99, 0.99), (0.70, 0.98, 0.98)),
}
# (|η| upper edge, c, s, n) of σ(E) = √(E²·c² + E·s² + n²)
_ECAL = ((3.2, 0.0017, 0.101, 0.0), (4.9, 0.0350, 0.285, 0.0))
_HCAL = ((1.7, 0.0302, 0.5205, 1.59), (3.2, 0.0500, 0.706, 0.0), (4.9, 0.0942, 1.00, 0.0))
# cell regions: (|η| upper edge, Δη, cells in φ)
_ECAL_CELLS = ((3.0, 0.0174, 360), (4.9, 0.175, 36))
_HCAL_CELLS = ((2.5, 0.1, 36), (4.9, 0.2, 18))
_ECAL_MIN, _HCAL_MIN, _SIGNIFICANCE_MIN = 0.5, 1.0, 2.0
_ECAL_FRACTION = {11: 1.0, 22: 1.0, 111: 1.0, 310: 0.3, 3122: 0.3, 13: 0.0}
_HCAL_FRACTION = {11: 0.0, 22: 0.0, 111: 0.0, 310: 0.7, 3122: 0.7, 13: 0.0}
# |charge| of the particles Pythia leaves stable (others: asked of Pythia's particle data)
_CHARGED = {11, 13, 211, 321, 2212, 3112, 3222, 3312, 3334}
_NEUTRAL = {22, 111, 130, 310, 2112, 3122, 3322}


def _by_eta(table, abs_eta, pick):
    """``pick(row)`` of the first row whose |η| edge is ≥ |η| (0 beyond the last)."""
    out = np.zeros_like(abs_eta)
    done = np.zeros(abs_eta.shape, dtype=bool)
    for row in table:
        here = ~done & (abs_eta <= row[0])
        out = np.where(here, pick(row), out)
        done |= here
    return out


def track_resolution(pt, abs_eta, kind: str = "hadron"):
    """The card's relative pT resolution σ(pT)/pT of a track (0 beyond |η| = 2.5).

    Examples:
        >>> float(track_resolution(np.array([100.0]), np.array([0.2]))[0])  # √(.06² + .13²)
        0.14317821063276354
    """
    return _by_eta(_TRACK_RESOLUTION[kind], abs_eta,
                   lambda r: np.sqrt(r[1] ** 2 + (pt * r[2]) ** 2))


def _calorimeter_resolution(table, energy, abs_eta):
    return _by_eta(table, abs_eta,
                   lambda r: np.sqrt((energy * r[1]) ** 2 + energy * r[2] ** 2 + r[3] ** 2))


def ecal_resolution(energy, abs_eta):
    """The card's ECAL σ(E) in GeV. Example: ``ecal_resolution(100.0, 0.5)`` ≈ 1.02."""
    return _calorimeter_resolution(_ECAL, np.asarray(energy, float), np.asarray(abs_eta, float))


def hcal_resolution(energy, abs_eta):
    """The card's HCAL σ(E) in GeV. Example: ``hcal_resolution(100.0, 0.5)`` ≈ 6.2."""
    return _calorimeter_resolution(_HCAL, np.asarray(energy, float), np.asarray(abs_eta, float))


def log_normal(mean, sigma, rng):
    """Delphes' ``LogNormal``: a positive draw with this mean and standard deviation."""
    mean = np.asarray(mean, float)
    return _log_normal_with(mean, sigma, rng.standard_normal(mean.shape))


def _lookup(abs_id, table: dict, default: float):
    out = np.full(abs_id.shape, default)
    for key, value in table.items():
        out[abs_id == key] = value
    return out


_ASKED: dict[int, bool] = {}  # charged or not, of ids outside _CHARGED and _NEUTRAL


def is_charged(abs_id: np.ndarray) -> np.ndarray:
    """Whether each particle (by |PDG id|) is charged."""
    charged = np.isin(abs_id, list(_CHARGED))
    unknown = np.setdiff1d(abs_id[~charged], list(_NEUTRAL))
    for pid in unknown.tolist():  # a handful of ids at most, never one per particle
        if pid not in _ASKED:
            import pythia8mc

            _ASKED[pid] = pythia8mc.Pythia("", False).particleData.charge(pid) != 0
        if _ASKED[pid]:
            charged |= abs_id == pid
    return charged


class DelphesLike:
    """Particles → tracks and towers, as described in the module docstring.

    Args:
        seed: seeds the smearing (numpy ``default_rng``), so a seed gives the same objects.
    Call:
        ``detector(particles)``: awkward (events, var) records px, py, pz, E, id →
        (events, var) records px, py, pz, E (tracks, then ECAL towers, then HCAL towers).
    """

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, particles):
        import awkward as ak

        counts = ak.to_numpy(ak.num(particles))
        flat = ak.flatten(particles)
        px, py, pz, energy = (ak.to_numpy(flat[k]).astype(np.float64) for k in
                              ("px", "py", "pz", "E"))
        abs_id = np.abs(ak.to_numpy(flat["id"]))
        event = np.repeat(np.arange(len(counts)), counts)
        pt = np.hypot(px, py)
        eta, phi = np.arcsinh(pz / np.maximum(pt, 1e-12)), np.arctan2(py, px)
        tracked = self._tracked(abs_id, pt, eta)
        calo = ~tracked & (abs_id != 13)
        mass = np.sqrt(np.maximum(energy**2 - px**2 - py**2 - pz**2, 0.0))
        parts = [self._tracks(event[tracked], abs_id[tracked], pt[tracked], eta[tracked],
                              phi[tracked], mass[tracked])]
        for fractions, default, cells, resolution, e_min in (
                (_ECAL_FRACTION, 0.0, _ECAL_CELLS, ecal_resolution, _ECAL_MIN),
                (_HCAL_FRACTION, 1.0, _HCAL_CELLS, hcal_resolution, _HCAL_MIN)):
            deposit = energy[calo] * _lookup(abs_id[calo], fractions, default)
            parts.append(self._towers(event[calo], eta[calo], phi[calo], deposit, cells,
                                      resolution, e_min))
        return _jagged(parts, len(counts))

    def _tracked(self, abs_id, pt, eta):
        """Charged, pT > 0.5 GeV, |η| < 2.5, and found (the card's efficiency)."""
        abs_eta = np.abs(eta)
        candidate = is_charged(abs_id) & (pt > TRACK_PT_MIN) & (abs_eta < TRACK_ETA_MAX)
        efficiency = np.zeros(pt.shape)
        pt_bin = np.digitize(pt, (1.0, 100.0), right=True)  # ≤ 1, ≤ 100, above
        for kind, rows in _TRACK_EFFICIENCY.items():
            mine = _kind_mask(abs_id, kind)
            for region, row in enumerate(rows):
                here = mine & ((abs_eta > 1.5) == bool(region))
                efficiency[here] = np.asarray(row)[pt_bin[here]]
        return candidate & (self.rng.random(pt.shape) < efficiency)

    def _tracks(self, event, abs_id, pt, eta, phi, mass):
        """Log-normal pT smearing (``MomentumSmearing``: σ capped at pT), η, φ, m kept."""
        smeared = np.zeros(pt.shape)
        draws = self.rng.standard_normal(pt.shape)
        for kind in _TRACK_RESOLUTION:
            mine = _kind_mask(abs_id, kind)
            sigma = np.minimum(track_resolution(pt[mine], np.abs(eta[mine]), kind), 1.0)
            smeared[mine] = _log_normal_with(pt[mine], sigma * pt[mine], draws[mine])
        return _four_vectors(event, smeared, eta, phi, mass)

    def _towers(self, event, eta, phi, energy, cells, resolution, e_min):
        """Energy summed per (event, η, φ) cell, smeared, thresholded; massless objects."""
        abs_eta = np.abs(eta)
        keep = (energy > 0) & (abs_eta < cells[-1][0])
        event, eta, phi, energy, abs_eta = (a[keep] for a in (event, eta, phi, energy, abs_eta))
        region = np.searchsorted(np.array([c[0] for c in cells]), abs_eta, side="right")
        d_eta = np.array([c[1] for c in cells])[region]
        n_phi = np.array([c[2] for c in cells])[region]
        i_eta = np.floor(eta / d_eta).astype(np.int64)
        i_phi = np.minimum(((phi + np.pi) / (2 * np.pi) * n_phi).astype(np.int64), n_phi - 1)
        key = ((event * 4 + region) * 4096 + i_eta + 2048) * 512 + i_phi
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        total = np.bincount(inverse.ravel(), weights=energy)
        event, d_eta, n_phi = event[first], d_eta[first], n_phi[first]
        i_eta, i_phi = i_eta[first], i_phi[first]
        sigma = resolution(total, np.abs((i_eta + 0.5) * d_eta))
        smeared = log_normal(total, sigma, self.rng)
        u = self.rng.random((2, len(total)))  # the point in the cell (SmearTowerCenter)
        tower_eta = (i_eta + u[0]) * d_eta
        tower_phi = -np.pi + (i_phi + u[1]) * 2 * np.pi / n_phi
        ok = (smeared > e_min) & (smeared > _SIGNIFICANCE_MIN * sigma)
        pt = smeared[ok] / np.cosh(tower_eta[ok])
        return _four_vectors(event[ok], pt, tower_eta[ok], tower_phi[ok], 0.0)


def _kind_mask(abs_id, kind: str):
    if kind == "electron":
        return abs_id == 11
    if kind == "muon":
        return abs_id == 13
    return (abs_id != 11) & (abs_id != 13)


def _log_normal_with(mean, sigma, draws):
    b = np.sqrt(np.log1p((sigma / np.maximum(mean, 1e-300)) ** 2))
    return np.where(mean > 0, np.exp(np.log(np.maximum(mean, 1e-300)) - 0.5 * b**2 + b * draws),
                    0.0)


def _four_vectors(event, pt, eta, phi, mass):
    pz = pt * np.sinh(eta)
    energy = np.sqrt(pt**2 + pz**2 + np.asarray(mass) ** 2)
    return event, energy, pt * np.cos(phi), pt * np.sin(phi), pz


def _jagged(parts, n_events: int):
    """(event, E, px, py, pz) pieces → awkward (events, var) records, in the order given
    within each event."""
    import awkward as ak

    event, energy, px, py, pz = (np.concatenate([p[i] for p in parts]) for i in range(5))
    order = np.argsort(event, kind="stable")
    counts = np.bincount(event, minlength=n_events)
    record = ak.zip({"px": px[order], "py": py[order], "pz": pz[order], "E": energy[order]},
                    with_name="Momentum4D")
    return ak.to_packed(ak.unflatten(record, counts))
