"""``--strategy ddp`` with one process on the CPU, against the default strategy.

    python -m benchmarks.ddp_one_process [--steps 300] [--rounds 3] [--width 32] [--quick]

Run it without ``OMP_NUM_THREADS`` in the environment: Fabric's launcher leaves torch's
threads alone when it is set, and that is half of what is measured.

The same tiny language model (``attnlab train lm`` on a synthetic text, ``--width`` wide, one
layer, block size 32, ``--threads 1``, float32, no validation or checkpoint until the end) is
trained ``--steps`` steps in four ways, each in a fresh process as a user starts it, in
alternating rounds (A B C D, D C B A, ...) so that changes of load hit every side alike:

- **default**: no ``--strategy`` (Fabric's single-device strategy);
- **ddp**: ``--devices 1 --strategy ddp`` as attnlab now runs it (without DDP, saying so);
- **ddp, threads kept**: DDP on one process, with ``--threads`` put back after the launch
  (``attnlab.training.hardware.single_process_ddp`` patched to say no): what DDP itself costs;
- **ddp, launcher threads**: DDP on one process with the thread count Fabric's launcher sets
  (one per core), as attnlab ran it before the fallback (``hardware.launch`` patched to
  Fabric's own).

A side's time is the run's ``train_seconds`` (metrics.json: the training loop alone, not the
process's start or the test split), the median over rounds; the ratio is that over the
default's median. Not a test: the times depend on the machine and its load (printed, with
``uptime``, before and after). Everything is written under a temporary directory, removed at
the end.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SIDES = {
    "default": [],
    "ddp": ["--devices", "1", "--strategy", "ddp"],
    "ddp, threads kept": ["--devices", "1", "--strategy", "ddp"],
    "ddp, launcher threads": ["--devices", "1", "--strategy", "ddp"],
}


def child(side: str, argv: list[str]) -> int:
    """``attnlab train`` in this process, with the patches that bring back the path of
    ``side`` (called in a fresh process by ``train``)."""
    from attnlab.cli import main
    from attnlab.training import engine, hardware

    if side in ("ddp, threads kept", "ddp, launcher threads"):
        hardware.single_process_ddp = lambda cfg: False
    if side == "ddp, launcher threads":
        engine.launch = lambda built, cfg: built.launch()
    return main(argv)


def train(side: str, data: Path, out: Path, args) -> float:
    """One run of ``side`` in its own process; its training seconds."""
    argv = ["train", "lm", "--data", str(data), "--out", str(out), "--max-steps",
            str(args.steps), "--model-dim", str(args.width), "--num-heads", "2",
            "--num-layers", "1", "--block-size", "32", "--batch-size", "8", "--threads", "1",
            "--accelerator", "cpu", "--precision", "32", "--warmup", "10", "--val-batches", "1",
            "--val-every", str(args.steps), *SIDES[side]]
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "ATTNLAB_RUN_DIR")}
    code = (f"import sys; from benchmarks.ddp_one_process import child; "
            f"sys.exit(child({side!r}, {argv!r}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=Path(__file__).resolve().parent.parent, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"{side}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return float(json.loads((out / "metrics.json").read_text())["train_seconds"])


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--width", type=int, default=32, help="--model-dim")
    p.add_argument("--quick", action="store_true", help="--steps 60 --rounds 1")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.rounds = 60, 1
    if "OMP_NUM_THREADS" in os.environ:
        print("note: OMP_NUM_THREADS is set here; each run starts without it", flush=True)
    print(f"before: {uptime()}  ({os.cpu_count()} cores)", flush=True)
    seconds: dict[str, list[float]] = {side: [] for side in SIDES}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "corpus.txt"
        data.write_text("the quick brown fox jumps over the lazy dog; attention is all you "
                        "need.\n" * 200)
        order = list(SIDES)
        for r in range(args.rounds):
            for i, side in enumerate(order if r % 2 == 0 else order[::-1]):
                out = Path(tmp) / f"r{r}-{i}"
                seconds[side].append(train(side, data, out, args))
                print(f"round {r + 1}  {side:<22} {seconds[side][-1]:8.2f} s", flush=True)
    print(f"after:  {uptime()}")
    base = statistics.median(seconds["default"])
    print(f"\n{args.steps} steps of a {args.width}-wide lm, train_seconds, median of "
          f"{args.rounds} round(s)")
    print(f"{'side':<24}{'s':>8}{'ms/step':>10}{'x default':>11}   all rounds (s)")
    for side, values in seconds.items():
        m = statistics.median(values)
        print(f"{side:<24}{m:8.2f}{m / args.steps * 1e3:10.2f}{m / base:11.2f}   "
              f"{' '.join(f'{v:.2f}' for v in values)}")


if __name__ == "__main__":
    main()
