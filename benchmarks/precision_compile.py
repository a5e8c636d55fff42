"""Training throughput on the CPU: float32 vs bf16 autocast (``--precision bf16-mixed``) vs
``torch.compile`` (``--compile``), for attnlab's TransformerEncoder.

Each variant trains the same encoder (forward, backward, AdamW step) on the same batches; the
rounds alternate between variants (``encoder_speed.alternate``) and the median is reported, with
the ratio against eager fp32.

    python -m benchmarks.precision_compile [--quick]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from attnlab.nn import TransformerEncoder
from benchmarks.encoder_speed import alternate  # rounds in turn, the order rotated


def make(D: int, H: int, L: int, FF: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return TransformerEncoder(L, input_dim=D, num_heads=H, dim_feedforward=FF)


def step_fn(model, opt, x, *, bf16: bool):
    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            y = model(x)
        y.float().pow(2).mean().backward()
        opt.step()
    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small model, few rounds")
    args = ap.parse_args()
    if args.quick:
        B, T, D, H, L, FF, rounds, iters = 8, 64, 64, 4, 2, 128, 3, 3
    else:
        B, T, D, H, L, FF, rounds, iters = 32, 128, 256, 8, 4, 1024, 5, 5
    x = torch.randn(B, T, D)
    variants = {}
    for name, bf16, compiled in (("fp32 eager", False, False), ("bf16-mixed eager", True, False),
                                 ("fp32 compiled", False, True), ("bf16-mixed compiled", True, True)):
        model = make(D, H, L, FF)
        if compiled:
            model.compile()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        step = step_fn(model, opt, x, bf16=bf16)
        start = time.perf_counter()
        step()
        step()  # compile / warm-up
        variants[name] = (step, time.perf_counter() - start)
    times = alternate({name: step for name, (step, _) in variants.items()}, rounds, iters)
    base = statistics.median(times["fp32 eager"])
    print(f"TransformerEncoder training, B={B} T={T} D={D} H={H} L={L} FF={FF}, "
          f"{torch.get_num_threads()} threads, median of {rounds}×{iters} steps")
    print(f"{'variant':<22}{'tokens/s':>12}{'vs fp32 eager':>15}{'warm-up s':>11}")
    for name, samples in times.items():
        t = statistics.median(samples)
        print(f"{name:<22}{B * T / t:>12,.0f}{base / t:>14.2f}×{variants[name][1]:>11.1f}")


if __name__ == "__main__":
    main()
