"""AdamW's step on each task's parameters: PyTorch's per-tensor default, ``foreach`` and
``fused`` (the measurement behind ``attnlab.training.make_optimizer``'s choice).

    python -m benchmarks.adamw [--threads 1] [--tasks reverse lm ...]

For every task ``attnlab train`` offers (jets only with ``--jets N`` > 0), its default model's
trainable parameters (as ``attnlab train TASK`` builds them, via ``benchmarks.train_loop``)
get random gradients, and each kind of AdamW (weight decay 0.01) steps them: 5 warm-up steps,
then the median of 5 rounds of 50 steps, the kinds in turns. Prints ms per step and the ratio
of the default to fused. Not a test.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

KINDS = {"per-tensor": {}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def step_ms(params: list[torch.Tensor], rounds: int = 5, steps: int = 50) -> dict[str, float]:
    copies, optimizers = {}, {}
    for kind, options in KINDS.items():
        copies[kind] = [torch.nn.Parameter(p.detach().clone()) for p in params]
        for p in copies[kind]:
            p.grad = torch.randn_like(p)
        optimizers[kind] = torch.optim.AdamW(copies[kind], lr=1e-3, weight_decay=0.01, **options)
        for _ in range(5):
            optimizers[kind].step()
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for _ in range(rounds):
        for kind, opt in optimizers.items():
            start = time.perf_counter()
            for _ in range(steps):
                opt.step()
            times[kind].append((time.perf_counter() - start) / steps * 1e3)
    return {kind: statistics.median(t) for kind, t in times.items()}


def main(argv=None) -> int:
    from benchmarks.train_loop import TASKS, capture, given_for, write_jets, write_reviews, write_text

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tasks", nargs="+", default=None)
    ap.add_argument("--jets", type=int, default=0, help="jets per class for the jets task (0: skip)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    tasks = args.tasks or list(TASKS)
    print(f"AdamW step: {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"{torch.get_num_threads()} thread(s), load average {os.getloadavg()[0]:.2f}")
    print(f"{'task':10s} {'tensors':>7s} {'parameters':>10s} " +
          " ".join(f"{k + ' ms':>13s}" for k in KINDS) + f" {'per-tensor/fused':>16s}")
    with tempfile.TemporaryDirectory(prefix="attnlab-adamw-") as tmp:
        work = Path(tmp)
        inputs = {"reviews": work / "reviews.csv", "text": work / "text.txt"}
        write_reviews(inputs["reviews"])
        write_text(inputs["text"])
        if "jets" in tasks and args.jets > 0:
            write_jets(work / "jets.h5", args.jets)
            inputs["jets"] = work / "jets.h5"
        for task in tasks:
            given = given_for(task, inputs, args.threads)
            if isinstance(given, str):
                print(f"{task:10s} {given}")
                continue
            setup = capture(task, given, work / task, args.threads)
            params = [p for p in setup.module.parameters() if p.requires_grad]
            ms = step_ms(params)
            print(f"{task:10s} {len(params):7d} {sum(p.numel() for p in params):10,d} " +
                  " ".join(f"{ms[k]:13.3f}" for k in KINDS) +
                  f" {ms['per-tensor'] / ms['fused']:16.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
