"""``attnlab data jets``: generate top-quark and QCD jets with Pythia 8 and FastJet.

    attnlab data jets --signal N --background N --out FILE [--seed S] [--jobs J]
                      [--detector none|delphes-like] [--force]

Writes FILE in the Top Quark Tagging Reference Dataset's layout (``attnlab.tasks.jets.data``), which
``attnlab train jets --data FILE`` reads. Every flag is checked before the first event is made.
Progress goes to standard error (a bar on a terminal, a line per tenth otherwise); the one line
on standard output is the summary. Needs the `jets` extra (``pip install 'attnlab[jets]'``).
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from ..errors import UsageError
from ..settings import add_flags, check_options, seed_setting, setting

DETECTORS = ("none", "delphes-like")  # attnlab.tasks.jets.generate.DETECTORS (checked by a test)


@dataclass
class JetsOptions:
    """``attnlab data jets``'s typed flags (``--out`` and ``--force`` are checked in
    ``check_args``, with the rule that something is generated)."""

    signal: int = setting(None, help="top jets to make", low=0, wording="0 or more",
                          required=True)
    background: int = setting(None, help="QCD jets to make", low=0, wording="0 or more",
                              required=True)
    seed: int = seed_setting(42, help="random seed (default 42); the same seed and --jobs give "
                                      "the same jets, so make a test set with another seed")
    jobs: int = setting(1, help="worker processes (1); each makes a share of both classes",
                        low=1, wording="at least 1", metavar="J")
    detector: str = setting("none", choices=DETECTORS,
                            help="none: particle level (default); delphes-like: tracks and "
                                 "calorimeter towers smeared with the Delphes ATLAS card's "
                                 "resolutions")


def register(sub) -> None:
    p = sub.add_parser("data", help="generate data sets: `data jets` (Pythia 8 + FastJet)",
                       description="Generate a data set.")
    what = p.add_subparsers(dest="dataset", metavar="DATASET", parser_class=type(p))
    what.required = True
    j = what.add_parser(
        "jets", help="top-quark and QCD jets in the Top Quark Tagging Reference Dataset's layout",
        description="Generate top-quark jets (signal) and QCD jets (background) with Pythia 8 "
                    "and FastJet, as the Top Quark Tagging Reference Dataset made them: pp at "
                    "14 TeV, anti-kt R = 0.8, the leading jet with 550 < pT < 650 GeV and "
                    "|eta| < 2, up to 200 constituents. Particle level by default, which is "
                    "easier to tag than the reference's detector-level jets. Needs the jets "
                    "extra: pip install 'attnlab[jets]'.")
    add_flags(j, JetsOptions, only=("signal", "background"))
    j.add_argument("--out", required=True, metavar="FILE",
                   help="the .h5 file to write; an existing file is refused (see --force)")
    j.add_argument("--force", action="store_true", help="replace FILE if it exists")
    add_flags(j, JetsOptions, only=("seed", "jobs", "detector"))
    j.set_defaults(func=run)


def check_args(args: argparse.Namespace) -> None:
    """Every user error, as a one-line ``UsageError``, before anything is generated."""
    check_options(args, JetsOptions)
    if args.signal == 0 and args.background == 0:
        raise UsageError("--signal and --background are both 0: nothing to generate")
    check_out(args.out, force=args.force)
    from ..tasks.jets.generate import check_installed

    missing = check_installed()
    if missing is not None:
        raise UsageError(f"the jets extra is not installed ({missing} is missing): "
                         f"pip install 'attnlab[jets]'")
    from .preflight import check_memory

    # the jets are held in memory until they are written: --signal 10**12 once started
    check_memory(settings_of(args).memory_estimate())


def settings_of(args: argparse.Namespace):
    """The generator's ``JetSettings`` of the flags."""
    from ..tasks.jets.generate import JetSettings

    return JetSettings(signal=args.signal, background=args.background, seed=args.seed,
                       jobs=args.jobs, detector=args.detector)


def check_out(out: str, *, force: bool) -> None:
    """``UsageError`` naming --out when FILE cannot be written as asked (``check_output``'s
    rule), or exists without --force."""
    from ..paths import check_output

    path = check_output(out, "--out", directory=False, make_parents=False, example="jets.h5")
    if path.exists() and not force:
        raise UsageError(f"--out {out} exists; choose another file or add --force to replace it")


class Progress:
    """Jets accepted per class and the rate, on standard error: a bar redrawn in place on a
    terminal, else a line at each further tenth of the total (logs stay short)."""

    def __init__(self, signal: int, background: int, *, stream=None) -> None:
        self.total = {"signal": signal, "background": background}
        self.done = {"signal": 0, "background": 0}
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.start = time.perf_counter()
        self.tenths = 0

    def __call__(self, kind: str, k: int) -> None:
        self.done[kind] += k
        share = sum(self.done.values()) / max(1, sum(self.total.values()))
        if self.tty:
            bar = "#" * int(30 * share)
            self.stream.write(f"\r[{bar:<30}] {self.text()}\x1b[K")
            self.stream.flush()
        elif int(10 * share) > self.tenths:
            self.tenths = int(10 * share)
            print(f"jets: {self.text()}", file=self.stream, flush=True)

    def text(self) -> str:
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        done, total = self.done, self.total
        return (f"top {done['signal']}/{total['signal']}  QCD {done['background']}/"
                f"{total['background']}  {sum(done.values()) / elapsed:.1f} jets/s  "
                f"{elapsed:.0f} s")

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def run(args: argparse.Namespace) -> int:
    check_args(args)
    from ..tasks.jets.data import write_jets
    from ..tasks.jets.generate import generate_jets

    settings = settings_of(args)
    progress = Progress(args.signal, args.background)
    try:
        p4, labels = generate_jets(settings, progress=progress)
    finally:
        progress.close()
    try:
        write_jets(args.out, p4, labels, settings.as_dict())
    except OSError as e:
        raise UsageError(f"--out {args.out}: cannot write it ({e.strerror or e})") from None
    elapsed = time.perf_counter() - progress.start
    level = "particle level" if args.detector == "none" else f"detector {args.detector}"
    print(f"wrote {args.out}: {int(labels.sum())} top and {int((labels == 0).sum())} QCD jets "
          f"({level}, seed {args.seed}) in {elapsed:.0f} s, {len(labels) / elapsed:.1f} jets/s")
    return 0
