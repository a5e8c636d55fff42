"""Run every benchmark script in this folder in turn: ``python -m benchmarks [--quick] [NAME ...]``.

A full run appends a dated section to ``benchmarks/RESULTS.md``: the machine (CPU, cores, torch,
load average) and each script's printed figures and ratios. ``--quick`` runs write nothing
unless ``--write`` is given; ``--no-write`` never writes.

Each ``benchmarks/<name>.py`` runs as ``python -m benchmarks.<name>`` in its own process (a fresh
allocator and thread pool, so one script's memory does not skew the next), ``--quick`` passed on to
the scripts that declare that flag. Files whose name starts with ``_`` are helpers, not benchmarks.
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


# Scripts here that measure no speed: suite_stress repeats the whole test suite for an hour
# (`make test-stress`).
NOT_TIMINGS = {"suite_stress"}


def discover() -> list[str]:
    """Names of the benchmark scripts, sorted."""
    return sorted(p.stem for p in HERE.glob("*.py")
                  if not p.stem.startswith("_") and p.stem not in NOT_TIMINGS)


def accepts_quick(name: str) -> bool:
    """Whether the script declares a ``--quick`` flag (scripts without one run in full)."""
    return "--quick" in (HERE / f"{name}.py").read_text()


def machine() -> str:
    """One line describing where the figures were measured."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads, load average {load} at start")


def run_one(name: str, quick: bool) -> tuple[int, float, str]:
    """Run one benchmark, echoing its output; return (exit code, seconds, output)."""
    cmd = [sys.executable, "-m", f"benchmarks.{name}"]
    if quick and accepts_quick(name):
        cmd.append("--quick")
    elif quick:
        print(f"(benchmarks.{name} has no --quick flag: running it in full)", flush=True)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=HERE.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines = []
    for line in proc.stdout:
        print(line, end="", flush=True)
        lines.append(line)
    return proc.wait(), time.perf_counter() - start, "".join(lines)


def write_results(sections: list[tuple[str, int, float, str]], header: str, quick: bool) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    out = [f"\n## Full benchmark run — {stamp}{' (quick)' if quick else ''}\n",
           f"\nCommand: `python -m benchmarks{' --quick' if quick else ''}`. Machine: {header}.\n"]
    for name, code, seconds, text in sections:
        out.append(f"\n### {name} — exit {code}, {seconds:.0f} s\n\n```\n{text.rstrip()}\n```\n")
    with open(HERE / "RESULTS.md", "a", encoding="utf-8") as f:
        f.writelines(out)
    print(f"\nappended to {HERE / 'RESULTS.md'}")


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks",
                                 description="Run every benchmark script in benchmarks/ in turn.")
    ap.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of {discover()})")
    ap.add_argument("--quick", action="store_true",
                    help="pass --quick to each script that has it (a smoke run)")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    ap.add_argument("--write", action=argparse.BooleanOptionalAction, default=None,
                    help="append the results to benchmarks/RESULTS.md (default: on for full runs)")
    args = ap.parse_args()
    names = discover()
    if args.list:
        print("\n".join(names))
        return 0
    unknown = sorted(set(args.names) - set(names))
    if unknown:
        ap.error(f"unknown benchmark(s) {unknown}; available: {names}")
    header = machine()
    print(f"machine: {header}")
    failed, sections = [], []
    for name in args.names or names:
        print(f"\n===== benchmarks.{name} =====", flush=True)
        code, seconds, text = run_one(name, args.quick)
        print(f"===== benchmarks.{name}: exit {code}, {seconds:.0f} s =====", flush=True)
        sections.append((name, code, seconds, text))
        if code != 0:
            failed.append(name)
    if args.write if args.write is not None else not args.quick:
        write_results(sections, header, args.quick)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
