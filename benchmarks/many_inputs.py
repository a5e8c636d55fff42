"""Many inputs in one process against one process per input.

    python -m benchmarks.many_inputs [--quick]

Trains three small runs (reverse, translate, lm; a few steps each: only their speed matters),
then for ``predict``, ``translate`` and ``generate``:

- **one process per input**: ``attnlab predict DIR --input TEXT`` as a new process, the way a
  shell loop calls it, timed on ``--sample`` inputs and scaled to ``--count``;
- **one process for all**: ``attnlab predict DIR --input-file FILE`` with ``--count`` lines.

It prints both times and the ratio (target: at least 50x for 1,000 inputs). Every process gets
``--threads 1``, so both sides use one core. Not a test: the times depend on the machine.
"""
from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def attnlab(*args, stdin: str | None = None) -> float:
    """Seconds one ``attnlab`` process takes (it must succeed)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "attnlab", *map(str, args)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, input=stdin, text=True)
    return time.perf_counter() - start


def train_runs(tmp: Path) -> dict[str, Path]:
    text = tmp / "text.txt"
    words = "the quick brown fox jumps over a lazy dog and the cat sat on the mat".split()
    rng = random.Random(0)
    text.write_text("\n".join(" ".join(rng.choices(words, k=12)) for _ in range(400)) + "\n")
    runs = {"reverse": tmp / "reverse", "translate": tmp / "translate", "lm": tmp / "lm"}
    attnlab("train", "reverse", "--out", runs["reverse"], "--max-steps", "20", "--threads", "1")
    attnlab("train", "translate", "--out", runs["translate"], "--max-steps", "20",
            "--test-size", "50", "--val-size", "20", "--threads", "1")
    attnlab("train", "lm", "--data", text, "--out", runs["lm"], "--max-steps", "20",
            "--block-size", "64", "--threads", "1")
    return runs


def inputs(kind: str, count: int) -> list[str]:
    rng = random.Random(1)
    if kind == "reverse":
        return [" ".join(str(rng.randrange(10)) for _ in range(16)) for _ in range(count)]
    if kind == "translate":
        return [str(rng.randrange(1_000_000)) for _ in range(count)]
    return [" ".join(rng.choices(["the", "a", "fox", "cat", "sat"], k=3)) for _ in range(count)]


COMMANDS = {  # kind -> (one input's argv, many inputs' argv) after "attnlab"
    "reverse": (lambda run, x: ["predict", run, "--input", x],
                lambda run, f: ["predict", run, "--input-file", f]),
    "translate": (lambda run, x: ["translate", run, x],
                  lambda run, f: ["translate", run, "--input-file", f]),
    "lm": (lambda run, x: ["generate", run, "--prompt", x, "--greedy", "--max-new-tokens", "20"],
           lambda run, f: ["generate", run, "--input-file", f, "--greedy",
                           "--max-new-tokens", "20"]),
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=1000, help="inputs in the file")
    p.add_argument("--sample", type=int, default=8, help="separate processes timed")
    p.add_argument("--quick", action="store_true", help="--count 100 --sample 3")
    args = p.parse_args(argv)
    if args.quick:
        args.count, args.sample = 100, 3
    print(f"many inputs: {args.count} inputs; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        runs = train_runs(tmp)
        print(f"  {'command':<10} {'per process s':>14} {f'{args.count} processes s':>17} "
              f"{'one file s':>11} {'ratio':>7}")
        for kind, (one, many) in COMMANDS.items():
            texts = inputs(kind, args.count)
            each = [attnlab(*one(runs[kind], x), "--threads", "1") for x in texts[:args.sample]]
            per_process = sum(each) / len(each)
            path = tmp / f"{kind}.txt"
            path.write_text("\n".join(texts) + "\n")
            together = attnlab(*many(runs[kind], path), "--threads", "1")
            name = COMMANDS[kind][0](runs[kind], "x")[0]
            print(f"  {name:<10} {per_process:>14.2f} {per_process * args.count:>17.0f} "
                  f"{together:>11.1f} {per_process * args.count / together:>6.0f}x", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
