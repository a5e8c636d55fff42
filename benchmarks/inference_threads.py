"""How many torch threads should a command that runs a trained model use?

    python -m benchmarks.inference_threads [--quick]

For causal language models from 0.1 M to ~60 M parameters, times two workloads at 1 and at 2
threads, in this one process (``torch.set_num_threads`` between the runs, the order alternated
so that neither side always runs first):

- **forward**: one batch of 16 windows of 128 tokens, the shape of ``attnlab evaluate``;
- **decode**: 32 tokens greedily at batch 1 with the key/value cache, the shape of
  ``attnlab generate`` and of one input of ``translate`` or ``predict``;
- **decode16**: the same for 16 prompts at once, the shape of ``translate`` and ``predict``
  with many inputs (``--input-file``).

Then the same with another process burning one core (a busy machine), where idle threads
spin-wait for each other. It prints the ratio time(2 threads) / time(1 thread) per size:
below 1, two threads are faster. ``attnlab.commands.threads.default_threads`` is set from these
numbers; the table in benchmarks/RESULTS.md says which were measured. Not a test: the numbers
depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time

import torch

from attnlab.models import CausalLM

SIZES = [(64, 2), (128, 4), (256, 4), (384, 6), (512, 8), (768, 8)]  # (width, layers)


def burn(stop) -> None:
    """Keep one core busy until ``stop`` is set (another user's job)."""
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def timed(fn, repeats: int) -> float:
    """The median seconds of ``repeats`` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def workloads(model: CausalLM, vocab: int):
    g = torch.Generator().manual_seed(0)
    batch = torch.randint(vocab, (16, 128), generator=g)
    prompt = torch.randint(vocab, (1, 16), generator=g)
    prompts = torch.randint(vocab, (16, 16), generator=g)

    @torch.no_grad()
    def forward():
        model(batch)

    @torch.no_grad()
    def decode():
        model.generate(prompt, 32)

    @torch.no_grad()
    def decode16():
        model.generate(prompts, 32)

    return {"forward": forward, "decode": decode, "decode16": decode16}


def measure(repeats: int, sizes) -> list[dict]:
    rows = []
    for width, layers in sizes:
        torch.manual_seed(0)
        vocab = 512
        model = CausalLM(vocab, model_dim=width, num_heads=max(1, width // 64), num_layers=layers,
                         max_len=256).eval()
        params = sum(p.numel() for p in model.parameters())
        for name, fn in workloads(model, vocab).items():
            seconds = {1: [], 2: []}
            for order in ((1, 2), (2, 1)):
                for threads in order:
                    torch.set_num_threads(threads)
                    seconds[threads].append(timed(fn, repeats))
            one, two = (statistics.mean(seconds[t]) for t in (1, 2))
            rows.append({"params": params, "width": width, "layers": layers, "workload": name,
                         "one": one, "two": two})
    torch.set_num_threads(os.cpu_count() or 1)
    return rows


def print_rows(title: str, rows: list[dict]) -> None:
    print(f"\n{title}")
    print(f"  {'parameters':>11} {'D x L':>8} {'workload':>8} {'1 thread ms':>12} "
          f"{'2 threads ms':>13} {'2t / 1t':>8}")
    for r in rows:
        print(f"  {r['params']:>11,} {str(r['width']) + ' x ' + str(r['layers']):>8} "
              f"{r['workload']:>8} {r['one'] * 1000:>12.1f} {r['two'] * 1000:>13.1f} "
              f"{r['two'] / r['one']:>8.2f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="three sizes, fewer repeats")
    args = p.parse_args(argv)
    repeats = 3 if args.quick else 7
    sizes = SIZES[::2] if args.quick else SIZES
    print(f"inference threads: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, "
          f"torch {torch.__version__}")
    print_rows("an otherwise idle machine", measure(repeats, sizes))
    stop = multiprocessing.Event()
    busy = multiprocessing.Process(target=burn, args=(stop,), daemon=True)
    busy.start()
    try:
        print_rows("another process busy on one core", measure(repeats, sizes))
    finally:
        stop.set()
        busy.join(5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
