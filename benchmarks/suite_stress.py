"""The whole test suite, again and again, some runs with every core kept busy: ``make test-stress``.

A test that fails by chance fails a CI run, and CI runs ``make test`` on a two-core machine that
other work shares. This repeats ``make test``'s command (``pytest -q -n 2``) ``--plain`` times as
it is, ``--loaded`` times while one busy process per core competes with it, and ``--shuffled``
times in an order drawn from a seed (conftest.py's ``--shuffle``: a test that passes only after
another). It prints one row a run — when, how, the load average, how long, pytest's summary and
every test that failed — and exits 1 if any run failed. Each run's whole output is kept in
``--logs``; ``--write`` appends the table to benchmarks/RESULTS.md.

Not a timing: ``python -m benchmarks`` leaves it out (it takes an hour).

    python -m benchmarks.suite_stress --plain 5 --loaded 3 --shuffled 1 --write
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _burn(stop) -> None:
    """One core's worth of work until ``stop`` is set."""
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x = (x * 31 + 7) % 1_000_003


class Load:
    """``n`` busy processes for the duration of the ``with`` block."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.stop = multiprocessing.Event()
        self.procs: list[multiprocessing.Process] = []

    def __enter__(self) -> "Load":
        self.procs = [multiprocessing.Process(target=_burn, args=(self.stop,), daemon=True)
                      for _ in range(self.n)]
        for p in self.procs:
            p.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for p in self.procs:
            p.join(5)
            if p.is_alive():
                p.kill()


class LoadAverage:
    """The 1-minute load average sampled every 10 s while the ``with`` block runs."""

    def __init__(self) -> None:
        self.samples = [os.getloadavg()[0]]
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(10):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> "LoadAverage":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()

    def summary(self) -> str:
        return (f"{self.samples[0]:.1f} at start, mean {sum(self.samples) / len(self.samples):.1f}"
                f", max {max(self.samples):.1f}")


def summary_line(output: str) -> str:
    """pytest's closing line (``1 failed, 1909 passed, ... in 359.12s``), or the last line."""
    lines = [line.strip("= ") for line in output.splitlines() if line.strip()]
    closing = [line for line in lines if re.search(r"\b(passed|failed|error)s?\b.* in [\d.]+s", line)]
    return (closing or lines or ["(no output)"])[-1]


def failures(output: str) -> list[str]:
    """The ids of the tests that failed or errored, from pytest's short summary (``-ra``)."""
    return re.findall(r"^(?:FAILED|ERROR) (\S+)", output, flags=re.M)


def run_suite(kind: str, index: int, logs: Path, shuffle: int, busy: int,
              pytest_args: list[str]) -> dict:
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "2", *pytest_args]
    if shuffle:
        cmd += ["--shuffle", str(shuffle)]
    log = logs / f"{index:02d}-{kind}.log"
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"[{started}] run {index} ({kind}): {' '.join(cmd[2:])}", flush=True)
    t0 = time.perf_counter()
    with Load(busy), LoadAverage() as load, open(log, "w") as f:
        code = subprocess.call(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                               env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})  # as make test
    seconds = time.perf_counter() - t0
    output = log.read_text(errors="replace")
    row = dict(index=index, kind=kind + (f" (seed {shuffle})" if shuffle else "")
               + (f" + {busy} busy processes" if busy else ""), started=started,
               load=load.summary(), seconds=seconds, code=code, summary=summary_line(output),
               failed=failures(output), log=str(log))
    print(f"    exit {code}, {seconds / 60:.1f} min, load {row['load']}: {row['summary']}"
          + "".join(f"\n    FAILED {t}" for t in row["failed"]), flush=True)
    return row


def table(rows: list[dict]) -> str:
    out = ["| run | started | how | load average (1 min) | minutes | result | failed tests |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['index']} | {r['started']} | {r['kind']} | {r['load']} | "
                   f"{r['seconds'] / 60:.1f} | {r['summary']} | {', '.join(r['failed']) or '—'} |")
    return "\n".join(out)


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.suite_stress",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--plain", type=int, default=5, help="runs as they are (default 5)")
    ap.add_argument("--loaded", type=int, default=3,
                    help="runs with one busy process per core beside them (default 3)")
    ap.add_argument("--shuffled", type=int, default=1,
                    help="runs in an order drawn from a seed (default 1)")
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100_000 + 1,
                    help="the first shuffled run's seed (default: from the clock; printed)")
    ap.add_argument("--busy", type=int, default=os.cpu_count() or 2,
                    help="busy processes in a loaded run (default: one per core)")
    ap.add_argument("--logs", type=Path, default=None,
                    help="where each run's output goes (default runs/suite-stress-TIMESTAMP)")
    ap.add_argument("--write", action="store_true", help="append the table to RESULTS.md")
    ap.add_argument("pytest_args", nargs="*", help="passed on to pytest (after --)")
    args = ap.parse_args(argv)
    logs = args.logs or ROOT / "runs" / time.strftime("suite-stress-%Y%m%d-%H%M%S")
    logs.mkdir(parents=True, exist_ok=False)
    plan = ([("plain", 0, 0)] * args.plain + [("loaded", 0, args.busy)] * args.loaded
            + [("shuffled", args.seed + i, 0) for i in range(args.shuffled)])
    print(f"commit {commit()}, {os.cpu_count()} cores, logs in {logs}", flush=True)
    rows = [run_suite(kind, i, logs, seed, busy, args.pytest_args)
            for i, (kind, seed, busy) in enumerate(plan, 1)]
    text = table(rows)
    print("\n" + text)
    passed = sum(r["code"] == 0 for r in rows)
    print(f"\n{passed} of {len(rows)} runs passed")
    if args.write:
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        with open(HERE / "RESULTS.md", "a", encoding="utf-8") as f:
            f.write(f"\n## suite_stress — the whole suite repeated, {stamp}, commit {commit()}\n\n"
                    f"    python -m benchmarks.suite_stress {' '.join(argv or sys.argv[1:])}\n\n"
                    f"{text}\n\n{passed} of {len(rows)} runs passed.\n")
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
