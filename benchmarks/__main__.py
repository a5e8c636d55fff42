"""Run every benchmark script in this folder in turn: ``python -m benchmarks [--quick] [NAME ...]``.

Each ``benchmarks/<name>.py`` runs as ``python -m benchmarks.<name>`` in its own process (a fresh
allocator and thread pool, so one script's memory does not skew the next), ``--quick`` passed on to
the scripts that declare that flag. Files whose name starts with ``_`` are helpers, not benchmarks.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def discover() -> list[str]:
    """Names of the benchmark scripts, sorted."""
    return sorted(p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_"))


def accepts_quick(name: str) -> bool:
    """Whether the script declares a ``--quick`` flag (scripts without one run in full)."""
    return "--quick" in (HERE / f"{name}.py").read_text()


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks",
                                 description="Run every benchmark script in benchmarks/ in turn.")
    ap.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of {discover()})")
    ap.add_argument("--quick", action="store_true",
                    help="pass --quick to each script that has it (a smoke run)")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = ap.parse_args()
    names = discover()
    if args.list:
        print("\n".join(names))
        return 0
    unknown = sorted(set(args.names) - set(names))
    if unknown:
        ap.error(f"unknown benchmark(s) {unknown}; available: {names}")
    failed = []
    for name in args.names or names:
        print(f"\n===== benchmarks.{name} =====", flush=True)
        start = time.perf_counter()
        cmd = [sys.executable, "-m", f"benchmarks.{name}"]
        if args.quick and accepts_quick(name):
            cmd.append("--quick")
        elif args.quick:
            print(f"(benchmarks.{name} has no --quick flag: running it in full)", flush=True)
        code = subprocess.call(cmd, cwd=HERE.parent)
        print(f"===== benchmarks.{name}: exit {code}, {time.perf_counter() - start:.0f} s =====",
              flush=True)
        if code != 0:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
