"""What the held-out overlap check adds to reading a jets file before training.

    python -m benchmarks.jets_check [--jets 40000] [--constituents 200] [--repeats 3]

``train jets`` checks every file whole before the run directory exists
(``check_jet_file``); since the overlap warnings it also takes a 64-bit digest of each jet
(``digests=``), so that held-out files repeating training jets are named. One file of random
physical jets (E ≥ |p|, 30 to ``--constituents`` real constituents, the rest zero padding) is
written in the reference layout, then checked with and without digests, alternately in this
process. Printed: the median seconds of each, and their ratio. Not a test.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jets", type=int, default=40_000)
    p.add_argument("--constituents", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3)
    return p.parse_args(argv)


def random_jets(n: int, constituents: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(p4 (n, constituents, 4), labels (n,)): massless-ish constituents, zero-padded."""
    rng = np.random.default_rng(seed)
    p = rng.normal(0, 20, (n, constituents, 3)).astype(np.float32)
    energy = np.linalg.norm(p, axis=-1) * 1.001 + 0.1
    p4 = np.concatenate([energy[..., None], p], axis=-1)
    real = rng.integers(30, constituents + 1, n)
    p4[np.arange(constituents)[None, :] >= real[:, None]] = 0.0
    return p4, np.arange(n) % 2


def main(argv=None) -> int:
    from attnlab.tasks.jets.data import check_jet_file, write_jets

    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jets.h5"
        write_jets(path, *random_jets(args.jets, args.constituents))
        check_jet_file(path, max_constituents=args.constituents)  # warm the page cache
        times: dict[str, list[float]] = {"without digests": [], "with digests": []}
        for _ in range(args.repeats):
            for name, digests in (("without digests", None), ("with digests", [])):
                start = time.perf_counter()
                check_jet_file(path, max_constituents=args.constituents, digests=digests)
                times[name].append(time.perf_counter() - start)
    print(f"check_jet_file of {args.jets:,} jets x {args.constituents} constituents, "
          f"median of {args.repeats}:")
    for name, seconds in times.items():
        print(f"  {name:16s} {statistics.median(seconds):7.3f} s")
    ratio = statistics.median(times["with digests"]) / statistics.median(times["without digests"])
    print(f"  ratio (with / without): {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
