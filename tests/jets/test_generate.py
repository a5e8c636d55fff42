"""The jet generator, ``attnlab data jets``: Pythia 8 + FastJet, a few seconds."""
import ctypes
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("pythia8mc")
pytest.importorskip("fastjet")

from attnlab.cli import main  # noqa: E402
from attnlab.commands import data as data_command  # noqa: E402
from attnlab.tasks.jets import generate as gen  # noqa: E402
from attnlab.tasks.jets.data import read_jets, read_settings  # noqa: E402


def _mass_pt_eta(p4):
    e, px, py, pz = (p4[..., i].astype(np.float64).sum(axis=1) for i in range(4))
    pt = np.hypot(px, py)
    return np.sqrt(np.maximum(e**2 - px**2 - py**2 - pz**2, 0)), pt, np.arcsinh(pz / pt)


@pytest.fixture(scope="module")
def jets():
    return gen.generate_jets(gen.JetSettings(signal=100, background=100, seed=1))


@pytest.mark.slow
def test_shapes_labels_and_padding(jets):
    p4, labels = jets
    assert p4.shape == (200, 200, 4) and p4.dtype == np.float32
    assert labels.dtype == np.int64 and labels.sum() == 100
    assert labels[:100].sum() not in (0, 100)  # the classes are shuffled together
    energy = p4[..., 0]
    count = (energy > 0).sum(axis=1)
    assert count.min() >= 5 and 40 < count.mean() < 120
    for jet, n in zip(p4, count):  # real constituents first, then nothing but zeros
        assert (jet[:n, 0] > 0).all() and not jet[n:].any()


@pytest.mark.slow
def test_constituents_ordered_by_pt(jets):
    pt = np.hypot(jets[0][..., 1], jets[0][..., 2])
    assert (np.diff(pt, axis=1) <= 0).all()


@pytest.mark.slow
def test_jets_in_the_window(jets):
    p4, _ = jets
    _, pt, eta = _mass_pt_eta(p4)
    whole = (p4[:, -1, 0] == 0)  # jets cut at 200 constituents lose a little pT
    assert ((pt[whole] > 549.9) & (pt[whole] < 650.1)).all()
    assert (np.abs(eta) < 2.0).all()


@pytest.mark.slow
def test_top_mass_peak(jets):
    p4, labels = jets
    mass, _, _ = _mass_pt_eta(p4)
    top, qcd = mass[labels == 1].mean(), mass[labels == 0].mean()
    assert 150 < top < 200, top
    assert qcd < top - 50, (qcd, top)


@pytest.mark.slow
def test_same_seed_same_jets_other_seed_other_jets():
    a = gen.generate_jets(gen.JetSettings(signal=10, background=5, seed=5))
    b = gen.generate_jets(gen.JetSettings(signal=10, background=5, seed=5))
    c = gen.generate_jets(gen.JetSettings(signal=10, background=5, seed=6))
    assert a[0].tobytes() == b[0].tobytes() and (a[1] == b[1]).all()
    assert a[0].tobytes() != c[0].tobytes()


@pytest.mark.slow
def test_the_jets_do_not_depend_on_jobs(monkeypatch):
    monkeypatch.setattr(gen, "PIECE", 3)  # 7 top jets in pieces 3, 3, 1; 5 QCD in 3, 2
    s = gen.JetSettings(signal=7, background=5, seed=3, jobs=2)
    seen = []
    a = gen.generate_jets(s, progress=lambda kind, k: seen.append((kind, k)))
    b = gen.generate_jets(s)
    one = gen.generate_jets(gen.JetSettings(signal=7, background=5, seed=3, jobs=1))
    assert a[0].tobytes() == b[0].tobytes() == one[0].tobytes() and a[1].sum() == 7
    assert (a[1] == one[1]).all()
    assert sum(k for kind, k in seen if kind == "signal") == 7  # progress from the workers
    assert len({seed for _, _, seed in gen.tasks(s)}) == 5  # every piece its own seed


def test_quiet_stdout_silences_cxx_output(capfd):
    libc = ctypes.CDLL(None)
    with gen.quiet_stdout():
        libc.puts(b"a banner from C")
    print("python after")
    assert capfd.readouterr().out == "python after\n"


def _cli(capsys, *args):
    code = main(["data", "jets", *args])
    return code, capsys.readouterr()


@pytest.mark.parametrize("args, words", [
    (["--signal", "-1", "--background", "5"], "--signal must be 0 or more, got -1"),
    (["--signal", "5", "--background", "-2"], "--background must be 0 or more"),
    (["--signal", "0", "--background", "0"], "both 0"),
    (["--signal", "5", "--background", "5", "--jobs", "0"], "--jobs must be at least 1"),
    (["--signal", "5", "--background", "5", "--seed", "-1"], "--seed must be in"),
    (["--signal", "5", "--background", "5", "--detector", "cms"], "--detector"),
])
def test_bad_flags_exit_2_with_one_line(capsys, tmp_path, args, words):
    code, out = _cli(capsys, *args, "--out", str(tmp_path / "jets.h5"))
    assert code == 2 and words in out.err and out.err.count("\n") == 1
    assert not (tmp_path / "jets.h5").exists()


def test_out_problems_exit_2(capsys, tmp_path):
    old = tmp_path / "old.h5"
    old.write_bytes(b"keep me")
    for out, words in ((old, "exists; choose another file or add --force"),
                       (tmp_path / "missing" / "j.h5", "does not exist"),
                       (tmp_path, "is a directory")):
        code, res = _cli(capsys, "--signal", "5", "--background", "5", "--out", str(out))
        assert code == 2 and words in res.err and res.err.count("\n") == 1, res.err
    assert old.read_bytes() == b"keep me"


def test_missing_extra_names_the_install_command(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(gen, "check_installed", lambda: "pythia8mc")
    code, res = _cli(capsys, "--signal", "5", "--background", "5", "--out",
                     str(tmp_path / "j.h5"))
    assert code == 2 and "pip install 'attnlab[jets]'" in res.err and "pythia8mc" in res.err


def test_more_jets_than_memory_holds_exit_2_before_generating(capsys, tmp_path, monkeypatch):
    """--signal 10**12 once started generating 3.2 PB of jets, which are held until written;
    now the memory check refuses it in one line naming the flags, and nothing is made."""
    def generate(*args, **kwargs):
        raise AssertionError("generation started")

    monkeypatch.setattr(gen, "generate_jets", generate)
    out = tmp_path / "jets.h5"
    code, res = _cli(capsys, "--signal", str(10**12), "--background", "5", "--out", str(out))
    assert code == 2 and res.err.count("\n") == 1, res.err
    assert "--signal 1,000,000,000,000 + --background 5 jets" in res.err
    assert "6.4 PB" in res.err and "available" in res.err
    assert not out.exists() and not list(tmp_path.iterdir())



def test_workers_that_memory_cannot_hold_exit_2_before_generating(capsys, tmp_path, monkeypatch):
    """The memory check counted the jets only: with --jobs each Pythia worker holds its own
    tables beside them, and a count it let through ran out of memory part-way. Now a --jobs
    that the available memory cannot hold is refused in one line naming it."""
    from attnlab.commands import preflight

    def generate(*args, **kwargs):
        raise AssertionError("generation started")

    monkeypatch.setattr(gen, "generate_jets", generate)
    jets = gen.JetSettings(signal=1000, background=1000).memory_estimate()[0][1]
    monkeypatch.setattr(preflight, "available_memory", lambda: int(jets + 100e6))
    out = tmp_path / "jets.h5"
    code, res = _cli(capsys, "--signal", "1000", "--background", "1000", "--jobs", "8",
                     "--out", str(out))
    assert code == 2 and res.err.count("\n") == 1, res.err
    assert "--jobs 8 Pythia generator processes" in res.err and "available" in res.err
    assert not out.exists() and not list(tmp_path.iterdir())

@pytest.mark.slow
def test_cli_writes_the_reference_layout(capfd, tmp_path):
    out = tmp_path / "jets.h5"
    out.write_bytes(b"old")
    assert main(["data", "jets", "--signal", "6", "--background", "4", "--out", str(out),
                 "--seed", "9", "--force"]) == 0
    printed = capfd.readouterr().out.splitlines()
    assert len(printed) == 1 and printed[0].startswith(f"wrote {out}: 6 top and 4 QCD jets")
    p4, labels = read_jets(out)
    assert p4.shape == (10, 200, 4) and labels.sum() == 6
    settings = read_settings(out)
    assert settings["seed"] == 9 and settings["pythia8mc"] == gen.PYTHIA_VERSION  # the pin
    assert settings["pt_min"] == 550 and "HardQCD:all = on" in settings["recipe"]["background"]


def test_detector_choices_match_the_generator():
    assert data_command.DETECTORS == gen.DETECTORS


def test_parser_imports_nothing_heavy():
    code = ("import sys; from attnlab.cli import build_parser; build_parser(); "
            "heavy = [m for m in ('torch', 'lightning', 'pythia8mc', 'fastjet', 'awkward', "
            "'pandas') if m in sys.modules]; assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
def test_cli_prints_no_banner(tmp_path):
    """In a fresh process, where FastJet's banner has not been printed yet."""
    out = tmp_path / "jets.h5"
    res = subprocess.run([sys.executable, "-m", "attnlab", "data", "jets", "--signal", "5",
                          "--background", "5", "--out", str(out), "--jobs", "2"],
                         capture_output=True, text=True, check=True)
    assert res.stdout.splitlines() == [res.stdout.strip()] and res.stdout.startswith("wrote ")
    assert "FastJet" not in res.stderr + res.stdout and "PYTHIA" not in res.stderr + res.stdout


# --- the Delphes-like detector (attnlab/data/jets_detector.py) ---------------------------------

def _particles(rows):
    """One event of particles: rows of (E, px, py, pz, id)."""
    import awkward as ak

    rows = np.asarray(rows, dtype=np.float64)
    record = ak.zip({"px": rows[:, 1], "py": rows[:, 2], "pz": rows[:, 3], "E": rows[:, 0],
                     "id": rows[:, 4].astype(np.int32)})
    return ak.unflatten(record, [len(rows)])


def test_card_resolutions():
    from attnlab.tasks.jets.detector import ecal_resolution, hcal_resolution, track_resolution

    # delphes_card_ATLAS.tcl: ECAL sqrt(E^2 0.0017^2 + E 0.101^2); HCAL (|eta| <= 1.7)
    # sqrt(E^2 0.0302^2 + E 0.5205^2 + 1.59^2); tracks sqrt(0.10^2 + pT^2 1.7e-3^2) at |eta| 1
    assert ecal_resolution(100.0, 0.5) == pytest.approx(np.sqrt(0.17**2 + 100 * 0.101**2))
    assert hcal_resolution(100.0, 0.5) == pytest.approx(
        np.sqrt(3.02**2 + 100 * 0.5205**2 + 1.59**2))
    assert hcal_resolution(100.0, 2.0) == pytest.approx(np.sqrt(5.0**2 + 100 * 0.706**2))
    assert track_resolution(np.array([50.0]), np.array([1.0]))[0] == pytest.approx(
        np.sqrt(0.1**2 + (50 * 1.7e-3) ** 2))


@pytest.mark.slow
def test_photons_in_one_cell_make_one_smeared_tower():
    from attnlab.tasks.jets.detector import DelphesLike, ecal_resolution

    # two 50 GeV photons 0.001 apart in eta: one ECAL cell (0.0174 x 1 degree), one tower
    e, eta = 50.0, np.array([0.3001, 0.3011])
    rows = [(e, e / np.cosh(h), 0.0, e * np.tanh(h), 22) for h in eta]
    energies = []
    for seed in range(250):
        out = DelphesLike(seed)(_particles(rows))
        assert len(out[0]) == 1
        energies.append(float(out[0].E[0]))
    assert np.mean(energies) == pytest.approx(100.0, rel=0.01)
    assert np.std(energies) == pytest.approx(ecal_resolution(100.0, 0.3), rel=0.15)


@pytest.mark.slow
def test_tracks_and_thresholds():
    from attnlab.tasks.jets.detector import DelphesLike

    rows = [(20.0, 20.0, 0.0, 0.0, 211),      # a charged pion: a track (pT 20, eta 0)
            (0.3, 0.3, 0.0, 0.0, 22),         # a 0.3 GeV photon: below the ECAL's 0.5 GeV
            (0.4, 0.0, 0.4, 0.0, 13),         # a soft muon: no track (pT < 0.5), no deposit
            (30.0, 0.0, -30.0, 0.0, 2112)]    # a neutron: an HCAL tower
    found = [DelphesLike(seed)(_particles(rows))[0] for seed in range(50)]
    sizes = [len(f) for f in found]
    assert max(sizes) <= 2 and sizes.count(2) > 35  # tracking efficiency 0.95; towers may fall
    pts = [float(np.hypot(f.px[0], f.py[0])) for f in found if len(f) == 2]
    assert 17 < np.mean(pts) < 23 and np.std(pts) > 0  # smeared about 20 GeV


@pytest.mark.slow
def test_detector_level_jets_are_reproducible():
    s = gen.JetSettings(signal=8, background=8, seed=2, detector="delphes-like")
    a, b = gen.generate_jets(s), gen.generate_jets(s)
    assert a[0].tobytes() == b[0].tobytes()
    pt = np.hypot(a[0][..., 1], a[0][..., 2])
    assert (np.diff(pt, axis=1) <= 0).all() and a[0].shape == (16, 200, 4)


def test_the_extra_pins_the_tested_pythia():
    from pathlib import Path

    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert f'"pythia8mc=={gen.PYTHIA_VERSION}"' in pyproject


def test_every_flag_comes_from_the_typed_options_and_signal_is_required(capsys, tmp_path):
    """``data jets`` declares its numbers once (``JetsOptions``): the flags, their ranges and
    the one that must be given."""
    import dataclasses

    from attnlab.commands.data import JetsOptions

    assert {f.name for f in dataclasses.fields(JetsOptions)} == {
        "signal", "background", "seed", "jobs", "detector"}
    code, out = _cli(capsys, "--background", "5", "--out", str(tmp_path / "jets.h5"))
    assert code == 2 and "required: --signal" in out.err and out.err.count("\n") == 1


def _signal_handlers(task, s):
    """A pool task (in place of ``_run_task``): whether the worker's SIGTERM and SIGHUP are at
    their default (booleans: a handler the worker inherited is a function the pool cannot
    pickle back, which would fail the test on pickling, not on what it checks)."""
    import signal

    return [signal.getsignal(signal.SIGTERM) is signal.SIG_DFL,
            signal.getsignal(signal.SIGHUP) is signal.SIG_DFL]


@pytest.mark.slow
def test_a_worker_ends_at_once_when_the_pool_is_stopped(monkeypatch):
    """``data jets --jobs 2`` once hung after its last jet, until its worker was killed by
    hand: the pool stops its workers with SIGTERM, and a worker had inherited the command's
    Python handler, which never ran while the worker waited for its next task. A worker has
    the default again (it dies at once), under the command's handlers as ``main`` sets them.
    SIGHUP starts at its default here, as in a terminal: under ``nohup`` it is ignored, and
    the command rightly leaves it so."""
    import signal

    from attnlab.cli import _sigterm_interrupts

    monkeypatch.setattr(gen, "_run_task", _signal_handlers)
    s = gen.JetSettings(signal=1, background=1, jobs=2)
    hangup = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        with _sigterm_interrupts():
            assert callable(signal.getsignal(signal.SIGTERM))  # the command's own, in the parent
            assert callable(signal.getsignal(signal.SIGHUP))
            found = gen._run_pool([("signal", 1, 1), ("background", 1, 2)], s, None)
    finally:
        signal.signal(signal.SIGHUP, hangup)
    assert found == [[True, True]] * 2  # [SIGTERM, SIGHUP] at their default in each worker
