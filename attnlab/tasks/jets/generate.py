"""Top-quark and QCD jets from Pythia 8 and FastJet, as in the Top Quark Tagging Reference Dataset.

``generate_jets(JetSettings(signal=N, background=N, seed=S, jobs=J))`` returns the constituents
of N top jets and N QCD jets (shuffled together) and their labels, ready for
``attnlab.tasks.jets.data.write_jets``. The recipe is the reference dataset's (Kasieczka, Plehn et
al., SciPost Phys. 7, 014 (2019)):

- pp at 14 TeV, multi-parton interactions off (the reference has none; and faster:
  benchmarks/RESULTS.md);
- signal: hadronic tt̄ (``Top:gg2ttbar``, ``Top:qqbar2ttbar``, W → quarks only);
  background: ``HardQCD:all``;
- the visible final state (neutrinos dropped) clustered with anti-kt, R = 0.8 (FastJet);
- the event's leading jet, kept when 550 < pT < 650 GeV and |η| < 2;
- a top jet must hold the hadronic top and its three decay quarks (b, q, q̄') within
  ΔR = √(Δη² + Δφ²) < 0.8 of the jet axis (the top as it decays, after its own radiation; the
  quarks as they are made in the decay, before theirs);
- up to 200 constituents ordered by pT, zero-padded: (E, px, py, pz) in GeV.

Events come in batches (``Pythia.nextBatch``, awkward arrays) and are clustered in batches
(FastJet's awkward interface), so no Python runs per particle. Each class is made in pieces of
``PIECE`` jets, each piece by its own Pythia seeded from (``seed``, class, piece number), and
``jobs`` worker processes share the pieces: the same seed gives the same jets, byte for byte,
whatever ``jobs`` is.

Shapes: N jets, C = 200 constituents; p4 (N, C, 4) float32; labels (N,) int64 (1 = top).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
from dataclasses import asdict, dataclass

import numpy as np

from .data import MAX_CONSTITUENTS

__all__ = ["JetSettings", "generate_jets", "RECIPES", "PYTHIA_VERSION", "DETECTORS",
           "check_installed"]

PYTHIA_VERSION = "8.317.2"  # the pin of the `jets` extra in pyproject.toml (a test checks)
DETECTORS = ("none", "delphes-like")
SIGNAL, BACKGROUND = "signal", "background"

_COMMON = ("Beams:eCM = 14000.", "PartonLevel:MPI = off", "Print:quiet = on")
# pT-hat windows (GeV). The lower the minimum, the more faithful the sample and the slower it
# is made: jets land in 550-650 GeV from events of much lower pT-hat (hard initial-state
# radiation recoils), and they are the less typical ones. Chosen from the share of accepted
# jets below each minimum and the accepted jets per second (benchmarks/RESULTS.md, "Numbers
# once quoted in the tasks' code"): QCD from 400, tops from 450. No accepted jet had pT-hat >
# 800, hence the maxima of 1000.
RECIPES = {
    SIGNAL: ("Top:gg2ttbar = on", "Top:qqbar2ttbar = on", "24:onMode = off",
             "24:onIfAny = 1 2 3 4 5", "PhaseSpace:pTHatMin = 450.",
             "PhaseSpace:pTHatMax = 1000."),
    BACKGROUND: ("HardQCD:all = on", "PhaseSpace:pTHatMin = 400.",
                 "PhaseSpace:pTHatMax = 1000."),
}
_NEUTRINOS = (12, 14, 16)


# bytes one Pythia generator holds beside its jets (its tables, an event batch, FastJet):
# --jobs 2 peaked 0.6 GB above the jets' two copies, which the estimate once left out
GENERATOR_BYTES = 300e6


@dataclass(frozen=True)
class JetSettings:
    """What to generate; stored with the jets (``write_jets(..., settings.as_dict())``).

    Args:
        signal: number of top jets. background: number of QCD jets.
        seed: the run's seed; piece k of class c gets a Pythia seed derived from (seed, c, k).
        jobs: worker processes (1 = in this process); the jets do not depend on it.
        detector: ``"none"`` (particle level) or ``"delphes-like"`` (tracks and towers,
            ``attnlab.tasks.jets.detector``).
        pt_min, pt_max, eta_max: the leading jet's window (GeV; |η|). radius: anti-kt R.
        max_constituents: constituents kept per jet (highest pT first).
    The Pythia settings are ``RECIPES`` (stored too, by ``as_dict``).
    """
    signal: int
    background: int
    seed: int = 42
    jobs: int = 1
    detector: str = "none"
    pt_min: float = 550.0
    pt_max: float = 650.0
    eta_max: float = 2.0
    radius: float = 0.8
    max_constituents: int = MAX_CONSTITUENTS

    def memory_estimate(self) -> list[tuple[str, float]]:
        """What making the jets holds at its peak, as (what, bytes) for ``check_memory``:
        every jet twice, 16 bytes a constituent (the pieces and the jets joined from them,
        then those and their shuffled copy; ``write_jets`` adds one chunk only), and
        ``GENERATOR_BYTES`` for each of the ``jobs`` Pythia generators (worker processes;
        with one job, this one).

        Examples:
            >>> [size / 1e6 for _, size in JetSettings(signal=1000, background=0,
            ...                                        jobs=2).memory_estimate()]  # MB
            [6.4, 600.0]
        """
        n = self.signal + self.background
        generators = "processes" if self.jobs > 1 else "process"
        return [(f"--signal {self.signal:,} + --background {self.background:,} jets of "
                 f"{self.max_constituents} constituents, held twice while they are shuffled",
                 2 * n * self.max_constituents * 4 * 4),
                (f"--jobs {self.jobs} Pythia generator {generators}",
                 self.jobs * GENERATOR_BYTES)]

    def as_dict(self) -> dict:
        """The settings, the Pythia recipe and the versions that made the jets (JSON-able)."""
        recipe = {"common": list(_COMMON), **{k: list(v) for k, v in RECIPES.items()}}
        return {"generator": "attnlab data jets", **asdict(self), "recipe": recipe,
                "pythia8mc": _version("pythia8mc"), "fastjet": _version("fastjet")}


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def check_installed() -> str | None:
    """The first package of the `jets` extra that is missing (its import name), or None."""
    import importlib.util

    for name in ("pythia8mc", "fastjet", "awkward", "pandas", "tables"):
        if importlib.util.find_spec(name) is None:
            return name
    return None


def worker_seed(seed: int, label: int, piece: int) -> int:
    """Pythia's ``Random:seed`` (1 to 900,000,000) for one piece of one class."""
    state = np.random.SeedSequence([seed, label, piece]).generate_state(1)[0]
    return int(state) % 900_000_000 + 1


@contextlib.contextmanager
def quiet_stdout():
    """File descriptor 1 to /dev/null: Pythia's and FastJet's C++ banners and notes go there,
    not onto the user's standard output (they do not go through ``sys.stdout``)."""
    import sys

    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    libc.fflush(None)
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        libc.fflush(None)
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def make_pythia(kind: str, seed: int):
    """A Pythia instance for ``kind`` (``"signal"`` or ``"background"``), initialised quietly."""
    import pythia8mc

    pythia = pythia8mc.Pythia("", False)  # False: no banner
    for line in (*_COMMON, *RECIPES[kind], "Random:setSeed = on", f"Random:seed = {seed}"):
        if not pythia.readString(line):
            raise RuntimeError(f"Pythia refused the setting {line!r}")
    if not pythia.init():
        raise RuntimeError(f"Pythia failed to initialise the {kind} process")
    return pythia


def visible_particles(events):
    """The final-state particles of each event but neutrinos, as (E, px, py, pz) records.

    Shape: (events, var) records px, py, pz, E, id (awkward, packed for FastJet).
    """
    import awkward as ak

    prt = events.prt
    keep = (prt.status > 0) & ~_isin(abs(prt.id), _NEUTRINOS)
    p = prt.p[keep]
    return ak.to_packed(ak.zip({"px": p.px, "py": p.py, "pz": p.pz, "E": p.e,
                                "id": prt.id[keep]}, with_name="Momentum4D"))


def _isin(values, choices):
    out = values == choices[0]
    for c in choices[1:]:
        out = out | (values == c)
    return out


def leading_jets(particles, radius: float):
    """Anti-kt jets of each event; the leading one's momentum and constituent indices.

    Returns:
        (jet, has_jet, constituents): jet (events,) records px, py, pz, E (zeros where the
        event has no jet); has_jet (events,) bool; constituents (events, var) indices into
        ``particles`` of the leading jet's constituents.
    """
    import awkward as ak
    import fastjet

    jetdef = fastjet.JetDefinition(fastjet.antikt_algorithm, radius)
    sequence = fastjet.ClusterSequence(particles, jetdef)
    min_pt = 100.0  # far below the window: only the leading jet is kept
    jets = sequence.inclusive_jets(min_pt)
    index = sequence.constituent_index(min_pt)  # (events, jets, var)
    lead = ak.argmax(np.hypot(jets.px, jets.py), axis=1, keepdims=True)  # (events, 1)
    has_jet = ~ak.to_numpy(ak.is_none(ak.firsts(lead)))
    lead = ak.fill_none(lead, 0)
    jet = ak.firsts(jets[ak.mask(lead, has_jet)])
    jet = {k: ak.to_numpy(ak.fill_none(jet[k], 0.0)) for k in ("px", "py", "pz", "E")}
    constituents = ak.firsts(index[ak.mask(lead, has_jet)])
    return jet, has_jet, ak.fill_none(constituents, [], axis=0)


def eta_phi(px, py, pz):
    """Pseudorapidity η = asinh(pz / pT) and azimuth φ (numpy or awkward arrays)."""
    pt = np.hypot(px, py)
    return np.arcsinh(pz / np.maximum(pt, 1e-12)), np.arctan2(py, px)


def delta_r(eta1, phi1, eta2, phi2):
    """ΔR = √(Δη² + Δφ²), Δφ wrapped into [-π, π)."""
    dphi = (phi1 - phi2 + np.pi) % (2 * np.pi) - np.pi
    return np.hypot(eta1 - eta2, dphi)


def in_window(jet: dict, has_jet: np.ndarray, s: JetSettings) -> np.ndarray:
    """Leading jets with ``pt_min < pT < pt_max`` and ``|η| < eta_max``; (events,) bool."""
    pt = np.hypot(jet["px"], jet["py"])
    eta, _ = eta_phi(jet["px"], jet["py"], jet["pz"])
    return has_jet & (pt > s.pt_min) & (pt < s.pt_max) & (np.abs(eta) < s.eta_max)


def top_contained(events, jet: dict, radius: float) -> np.ndarray:
    """Whether a top and its three decay quarks all lie within ``radius`` of the jet axis.

    The top is its last copy (the one that decays: its first daughter is a decay product, of
    status ±22/23); the quarks are the status -23 daughters of that top (the b) and of its W.
    Which top they belong to is the sign of the mother's id (t → W⁺ b, t̄ → W⁻ b̄).
    Returns (events,) bool.
    """
    import awkward as ak

    prt = events.prt
    ids, status = prt.id, prt.status
    mother_id = ids[prt.mother1]
    decay = (status == -23) & ((abs(mother_id) == 6) | (abs(mother_id) == 24))
    first_daughter_status = abs(status[prt.daughter1])
    top = (abs(ids) == 6) & ((first_daughter_status == 22) | (first_daughter_status == 23))
    chosen = decay | top
    sign = ak.where(top, np.sign(ids), np.sign(mother_id))[chosen]
    p = prt.p[chosen]
    eta, phi = eta_phi(p.px, p.py, p.pz)
    jet_eta, jet_phi = eta_phi(jet["px"], jet["py"], jet["pz"])
    inside = delta_r(eta, phi, jet_eta[:, None], jet_phi[:, None]) < radius
    found = np.zeros(len(events), dtype=bool)
    for s in (1, -1):  # the top, then the anti-top: four partons each
        mine = sign == s
        whole = ak.to_numpy(ak.sum(mine, axis=1) == 4)
        found |= whole & ak.to_numpy(ak.all(inside | ~mine, axis=1))
    return found


def constituent_p4(particles, constituents, max_constituents: int) -> np.ndarray:
    """(E, px, py, pz) of each jet's constituents, highest pT first, zero-padded or cut to
    ``max_constituents``. Shape: (jets, max_constituents, 4) float32."""
    import awkward as ak

    cons = particles[constituents]
    order = ak.argsort(np.hypot(cons.px, cons.py), axis=1, ascending=False, stable=True)
    cons = cons[order]
    columns = [ak.to_numpy(ak.fill_none(ak.pad_none(cons[k], max_constituents, clip=True), 0.0))
               for k in ("E", "px", "py", "pz")]
    return np.stack(columns, axis=-1).astype(np.float32)


def select_jets(events, kind: str, s: JetSettings, detector=None
                ) -> tuple[np.ndarray, np.ndarray]:
    """The accepted jets of one batch of events: their constituents (jets, C, 4) and the
    indices of their events in the batch. ``detector``: particles → detector objects (e.g.
    ``detector.DelphesLike``), or None for particle level."""
    particles = visible_particles(events)
    if detector is not None:
        particles = detector(particles)
    jet, has_jet, constituents = leading_jets(particles, s.radius)
    keep = in_window(jet, has_jet, s)
    if kind == SIGNAL:
        keep &= top_contained(events, jet, s.radius)
    chosen = np.flatnonzero(keep)
    p4 = constituent_p4(particles[chosen], constituents[chosen], s.max_constituents)
    return p4, chosen


def make_detector(name: str, seed: int):
    """The detector simulation called ``name`` (``DETECTORS``), seeded; None for "none"."""
    if name == "none":
        return None
    if name == "delphes-like":
        from .detector import DelphesLike

        return DelphesLike(int(np.random.SeedSequence([seed, 7]).generate_state(1)[0]))
    raise ValueError(f"detector must be one of {DETECTORS}, got {name!r}")


def _next_batch(remaining: int, accepted: int, made: int) -> int:
    """Events for the next ``nextBatch``: enough for the jets still missing at the acceptance
    seen so far, 50 to 500 (memory: ~1000 particles an event). A function of the counts
    only, so a seed always draws the same batches."""
    acceptance = (accepted + 1) / (made + 10)
    return int(np.clip(np.ceil(1.2 * remaining / acceptance), 50, 500))


def generate_part(kind: str, n: int, seed: int, s: JetSettings, report=None) -> np.ndarray:
    """``n`` accepted jets of one class from one Pythia seeded with ``seed``.

    ``report(kind, k)`` is called after each batch that accepted k > 0 jets. Everything the
    C++ libraries print goes to /dev/null. Returns (n, C, 4) float32.
    """
    parts, accepted, made = [], 0, 0
    detector = make_detector(s.detector, seed)
    with quiet_stdout():
        pythia = make_pythia(kind, seed)
        while accepted < n:
            events = pythia.nextBatch(_next_batch(n - accepted, accepted, made))
            made += len(events)
            p4, _ = select_jets(events, kind, s, detector)
            p4 = p4[: n - accepted]
            parts.append(p4)
            accepted += len(p4)
            if report is not None and len(p4):
                report(kind, len(p4))
            if made >= 20_000 and accepted == 0:
                raise RuntimeError(f"no {kind} jet accepted in {made} events: check the recipe")
    return np.concatenate(parts) if parts else np.zeros((0, s.max_constituents, 4), np.float32)


# jets per piece of work: long enough that a Pythia initialisation is a small part of it
# (benchmarks/RESULTS.md)
PIECE = 2000


def tasks(s: JetSettings) -> list[tuple[str, int, int]]:
    """(kind, jets, Pythia seed) for each piece of work: each class in pieces of ``PIECE``
    jets (the last one smaller), interleaved so that both classes advance at once. A function
    of the counts and the seed only, not of ``jobs``.

    Examples:
        >>> [(kind, n) for kind, n, _ in tasks(JetSettings(signal=2500, background=1000))]
        [('background', 1000), ('signal', 2000), ('signal', 500)]
    """
    out = []
    for piece in range(-(-max(s.signal, s.background) // PIECE)):
        for label, (kind, total) in enumerate(((BACKGROUND, s.background), (SIGNAL, s.signal))):
            n = min(PIECE, total - piece * PIECE)
            if n > 0:
                out.append((kind, n, worker_seed(s.seed, label, piece)))
    return out


_QUEUE = None  # in a worker process: where it reports progress


def _init_worker(queue) -> None:
    """Ctrl-C is the parent's to handle (it stops the pool); a worker ignores it, instead of
    dying with a traceback of its own. SIGTERM and SIGHUP get their default back where the
    parent set a Python handler (the ``attnlab`` command does): ``Pool.terminate`` stops the
    workers with SIGTERM, and a Python handler runs only when the main thread runs Python,
    which a worker waiting for its next task does not; the signal may land on another of its
    threads (its progress queue's, or a library's), so it lived on and the command hung after
    its last jet."""
    import signal

    global _QUEUE
    _QUEUE = queue
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in ("SIGTERM", "SIGHUP"):
        number = getattr(signal, name, None)  # no SIGHUP on Windows
        if number is not None and callable(signal.getsignal(number)):
            signal.signal(number, signal.SIG_DFL)  # ignored (nohup) stays ignored


def _report(kind: str, k: int) -> None:
    _QUEUE.put((kind, k))


def _run_task(task: tuple[str, int, int], s: JetSettings) -> np.ndarray:
    kind, n, seed = task
    return generate_part(kind, n, seed, s, report=_report)


def _drain(queue, progress, timeout: float) -> None:
    import queue as queues

    try:
        while True:
            kind, k = queue.get(timeout=timeout)
            if progress is not None:
                progress(kind, k)
            timeout = 0
    except queues.Empty:
        pass


def _run_pool(work: list, s: JetSettings, progress) -> list[np.ndarray]:
    """``work`` on ``s.jobs`` processes; results in the order of ``work``, whatever order they
    finish in. Forked: "spawn" and "forkserver" run the caller's main script again in each
    worker, which breaks a script without an ``if __name__ == "__main__"`` guard; the workers
    use nothing of this process's threads (Pythia and FastJet only)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    with ctx.Pool(s.jobs, initializer=_init_worker, initargs=(queue,)) as pool:
        pending = [pool.apply_async(_run_task, (task, s)) for task in work]
        while not all(r.ready() for r in pending):
            _drain(queue, progress, timeout=0.2)
            for r in pending:
                if r.ready() and not r.successful():
                    r.get()  # raises the worker's exception here
        _drain(queue, progress, timeout=0.05)
        return [r.get() for r in pending]


def generate_jets(s: JetSettings, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """Generate ``s.signal`` top jets and ``s.background`` QCD jets, shuffled together.

    Args:
        s: the settings. progress: called as ``progress(kind, k)`` when k more jets of
            ``kind`` (``"signal"``/``"background"``) are accepted.
    Returns:
        (p4, labels): p4 (N, C, 4) float32 (E, px, py, pz), labels (N,) int64, 1 = top.
    Examples:
        >>> p4, labels = generate_jets(JetSettings(signal=2, background=2, seed=1))
        >>> p4.shape, int(labels.sum())
        ((4, 200, 4), 2)
    """
    work = tasks(s)
    if s.jobs == 1:
        parts = [generate_part(kind, n, seed, s, report=progress) for kind, n, seed in work]
    else:
        parts = _run_pool(work, s, progress)
    labels = np.concatenate([np.full(len(p), int(kind == SIGNAL), np.int64)
                             for (kind, _, _), p in zip(work, parts)] or [np.zeros(0, np.int64)])
    p4 = np.concatenate(parts) if parts else np.zeros((0, s.max_constituents, 4), np.float32)
    del parts  # one copy fewer at the peak: 100k jets are 320 MB each
    order = np.random.default_rng([s.seed, 2]).permutation(len(labels))
    return p4[order], labels[order]
