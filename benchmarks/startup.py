"""Start-up of the ``attnlab`` command.

    python -m benchmarks.startup [--quick] [--repeats 5]

Times, as new processes (median of ``--repeats``): ``attnlab --help``, ``attnlab train --help``,
a flag error, a missing run directory, and how long after its process starts ``attnlab train
reverse`` finishes its first optimiser step (a global optimiser hook, installed by a small
launcher before attnlab runs, prints it), and the same for a bare PyTorch script taking that
step with reverse's model (the floor: torch and the torch._dynamo its first step imports), the
two in turns. Then what ``attnlab train reverse`` itself imports, from ``python -X importtime``
on the command: its largest top-level imports, and whether Lightning's Trainer
(``lightning.pytorch``) or torchmetrics is among them.
Targets: the first four <= 0.3 s; the first step <= the bare script's + 1.0 s.
Not a test.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

LAUNCH = r"""
import os, sys, time
with open("/proc/self/stat") as f:
    ticks = int(f.read().split(")")[1].split()[19])
with open("/proc/uptime") as f:
    started = time.perf_counter() - (float(f.read().split()[0]) - ticks / os.sysconf("SC_CLK_TCK"))
from torch.optim.optimizer import register_optimizer_step_post_hook
def first(opt, args, kwargs, done=[]):
    if not done:
        done.append(1)
        print(f"FIRST_STEP {time.perf_counter() - started:.3f}", file=sys.stderr, flush=True)
register_optimizer_step_post_hook(first)
"""

ATTNLAB = LAUNCH + """
from attnlab.cli import main
sys.exit(main(sys.argv[1:]))
"""

# The same first step without the CLI or Lightning: reverse's default model (10 symbols, 32
# wide, one head, one layer) on one batch of 128 sequences of 16, plain AdamW. The floor of a
# training process: torch, and torch._dynamo, which the first optimiser step imports.
BARE = LAUNCH + """
import torch
from attnlab.models.predictor import ElementPredictor
model = ElementPredictor(10, 32, 10, 1, 1)
opt = torch.optim.AdamW(model.parameters(), 1e-3)
x = torch.nn.functional.one_hot(torch.randint(10, (128, 16)), 10).float()
torch.nn.functional.cross_entropy(model(x).flatten(0, 1), x.argmax(-1).flatten()).backward()
opt.step()
"""


def seconds(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "attnlab", *argv], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def first_step(tmp: str, i: int, script: str = ATTNLAB) -> float:
    done = subprocess.run([sys.executable, "-c", script, "train", "reverse", "--max-steps", "2",
                           "--out", os.path.join(tmp, f"r{i}")], capture_output=True, text=True)
    found = re.search(r"FIRST_STEP ([\d.]+)", done.stderr)
    if found is None:
        raise SystemExit(f"no first step:\n{done.stderr[-2000:]}")
    return float(found.group(1))


def import_times(argv: list[str]) -> list[tuple[float, int, str]]:
    """(cumulative seconds, depth, name) of every module ``python -X importtime -m attnlab
    ARGV`` imports, in the order the report lists them (depth 0: imported at the top)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "attnlab", *argv],
                          capture_output=True, text=True)
    rows = []
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            name = parts[2].rstrip()
            depth = (len(name) - len(name.lstrip())) // 2
            rows.append((int(parts[1]) / 1e6, depth, name.strip()))
    return rows


# what the first step's import is made of (those that appear)
NAMED = ("torch", "torch._dynamo", "lightning_fabric", "lightning", "lightning.pytorch",
         "torchmetrics", "transformers", "scipy", "matplotlib", "attnlab.training",
         "attnlab.training.engine")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="--repeats 2")
    args = p.parse_args(argv)
    repeats = 2 if args.quick else args.repeats
    print(f"start-up: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        cases = {"attnlab --help": ["--help"], "attnlab train --help": ["train", "--help"],
                 "a flag error (--lr -1)": ["train", "reverse", "--lr", "-1"],
                 "a missing run directory": ["predict", os.path.join(tmp, "none"), "--input", "1"]}
        for name, argv_ in cases.items():
            times = [seconds(argv_) for _ in range(repeats)]
            print(f"  {name:<28} {statistics.median(times):.2f} s  (target 0.3 s)")
        steps, bare = [], []
        for i in range(repeats):  # in turns
            steps.append(first_step(tmp, i))
            bare.append(first_step(tmp, i, BARE))
        target = statistics.median(bare) + 1.0
        print(f"  {'train reverse: first step':<28} {statistics.median(steps):.2f} s  "
              f"(target: bare + 1.0 s = {target:.2f} s, "
              f"{'met' if statistics.median(steps) <= target else 'MISSED'}; "
              f"each run: {', '.join(f'{s:.2f}' for s in steps)})")
        print(f"  {'bare PyTorch: first step':<28} {statistics.median(bare):.2f} s  "
              f"(no CLI, no Lightning; each run: {', '.join(f'{s:.2f}' for s in bare)}); "
              f"attnlab +{statistics.median(steps) - statistics.median(bare):.2f} s, "
              f"{statistics.median(steps) / statistics.median(bare):.2f}x")
        rows = import_times(["train", "reverse", "--max-steps", "2",
                             "--out", os.path.join(tmp, "importtime")])
    largest = {}
    for seconds_, depth, name in rows:  # a module imported twice: the larger
        largest[name] = max(seconds_, largest.get(name, 0.0))
    print("\nimports of `attnlab train reverse --max-steps 2` (cumulative s, one process, "
          "python -X importtime):")
    top = sorted(((s_, n) for s_, d, n in rows if d == 0), reverse=True)[:8]
    print("  top level: " + ", ".join(f"{n} {s_:.2f}" for s_, n in top))
    print("  named:     " + ", ".join(f"{n} {largest[n]:.2f}" for n in NAMED if n in largest))
    absent = [n for n in ("lightning.pytorch", "torchmetrics") if n not in largest]
    print(f"  not imported: {', '.join(absent) or '-'}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
