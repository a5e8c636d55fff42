"""``--optimizer muon`` against AdamW on nanoGPT's CPU shape: held-out loss after the same steps.

    python -m benchmarks.muon [--steps 600] [--eval-every 100] [--threads 1] [--seed 1]
                              [--muon-lrs 1e-3 ...] [--quick]

Both sides in this process, each from the same initial weights and on the same seeded batches:
attnlab's ``CausalLM`` in nanoGPT's README CPU shape (4 layers, 4 heads, width 128, block 64,
batch 12, no dropout, no biases) on the character-level corpus of ``benchmarks.nanogpt``
(English sentences about numbers, 1.16 M characters, seeded; the first 90% to train on, the
last 10% held out), with ``attnlab train lm``'s optimiser settings (``--lr 1e-3 --warmup 100
--weight-decay 0.1 --beta2 0.99 --grad-clip 1.0``, cosine schedule over ``--steps``) built by
``attnlab.training.module.make_optimizer`` from ``optimizer_groups``, as the training loop
builds them:

- ``adamw``: AdamW for every parameter;
- ``muon@LR``: Muon at ``--muon-lr LR`` for the blocks' weight matrices, AdamW at 1e-3 for the
  rest (``--muon-lrs``, default 1e-3: the recipe's, --lr itself).

Printed: every ``--eval-every`` steps, each side's mean loss on 40 fixed held-out batches
(nats per character); then the seconds per step of each (the machine's load makes these
noisy: the losses are not) and the ratio to AdamW. Not a test.
"""
from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from attnlab.models import CausalLM
from attnlab.models.configs import CausalLMConfig
from attnlab.training.module import make_optimizer, optimizer_groups
from benchmarks.nanogpt import SHAPE, write_corpus

SETTINGS = {"lr": SHAPE["lr"], "warmup": SHAPE["warmup"], "weight_decay": 0.1, "beta2": 0.99,
            "schedule": "cosine"}
HELD_OUT_BATCHES = 40


def corpus(chars: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(training ids, held-out ids, vocabulary size) of the benchmark's character corpus."""
    with tempfile.TemporaryDirectory(prefix="attnlab-muon-") as tmp:
        text = write_corpus(Path(tmp) / "corpus.txt", chars)
    chars_seen = sorted(set(text))
    ids = torch.tensor([chars_seen.index(c) for c in text], dtype=torch.long)
    cut = int(0.9 * len(ids))
    return ids[:cut], ids[cut:], len(chars_seen)


def windows(data: torch.Tensor, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One batch: SHAPE's batch of random windows (inputs, next characters)."""
    block = SHAPE["block"]
    starts = torch.randint(len(data) - block - 1, (SHAPE["batch"],), generator=g)
    x = torch.stack([data[i:i + block] for i in starts])  # (B, T)
    y = torch.stack([data[i + 1:i + block + 1] for i in starts])  # (B, T)
    return x, y


def model(vocab: int, seed: int) -> CausalLM:
    torch.manual_seed(seed)
    return CausalLM(CausalLMConfig(vocab_size=vocab, model_dim=SHAPE["width"],
                                   num_heads=SHAPE["heads"], num_layers=SHAPE["layers"],
                                   dim_feedforward=4 * SHAPE["width"], max_len=SHAPE["block"],
                                   dropout=0.0, bias=False))


def loss_of(net: CausalLM, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    logits = net(x)  # (B, T, V)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))


@torch.no_grad()
def held_out(net: CausalLM, batches: list) -> float:
    net.eval()
    loss = sum(float(loss_of(net, x, y)) for x, y in batches) / len(batches)
    net.train()
    return loss


def train(name: str, settings: dict, data, held, vocab: int, args) -> tuple[list[float], float]:
    """Held-out losses at every ``--eval-every`` steps, and seconds per training step."""
    net = model(vocab, args.seed)
    opt, sched = make_optimizer(optimizer_groups(net, settings), settings,
                                model_dim=SHAPE["width"], max_steps=args.steps)
    g = torch.Generator().manual_seed(args.seed)
    curve, seconds = [], 0.0
    for step in range(1, args.steps + 1):
        x, y = windows(data, g)
        start = time.perf_counter()
        loss = loss_of(net, x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        seconds += time.perf_counter() - start
        if step % args.eval_every == 0:
            curve.append(held_out(net, held))
            print(f"  {name:12s} step {step:5d}  held-out loss {curve[-1]:.4f}", flush=True)
    return curve, seconds / args.steps


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--chars", type=int, default=1_160_000)
    ap.add_argument("--muon-lrs", type=float, nargs="+", default=[SHAPE["lr"]])
    ap.add_argument("--quick", action="store_true", help="60 steps, a smoke run, not a result")
    args = ap.parse_args(argv)
    if args.quick:
        args.steps, args.eval_every, args.chars = 60, 30, 100_000
    torch.set_num_threads(args.threads)
    data, held_ids, vocab = corpus(args.chars)
    g = torch.Generator().manual_seed(12345)
    held = [windows(held_ids, g) for _ in range(HELD_OUT_BATCHES)]
    print(f"muon vs adamw: {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"{torch.get_num_threads()} thread(s), load average {os.getloadavg()[0]:.2f}; "
          f"{args.steps} steps of {SHAPE['batch']}x{SHAPE['block']} characters, vocabulary "
          f"{vocab} (uniform guess {math.log(vocab):.3f} nats)")
    sides = {"adamw": {**SETTINGS, "optimizer": "adamw"}}
    for lr in args.muon_lrs:
        sides[f"muon@{lr:g}"] = {**SETTINGS, "optimizer": "muon", "muon_lr": lr}
    results = {name: train(name, s, data, held, vocab, args) for name, s in sides.items()}
    steps = list(range(args.eval_every, args.steps + 1, args.eval_every))
    print(f"\n{'step':>6s} " + " ".join(f"{n:>12s}" for n in results))
    for i, step in enumerate(steps):
        print(f"{step:6d} " + " ".join(f"{c[i]:12.4f}" for c, _ in results.values()))
    base_curve, base_s = results["adamw"]
    print(f"{'s/step':>6s} " + " ".join(f"{s:12.4f}" for _, s in results.values()))
    for name, (curve, s) in results.items():
        if name == "adamw":
            continue
        reached = next((st for st, v in zip(steps, curve) if v <= base_curve[-1]), None)
        where = (f"reaches adamw's final loss by step {reached}" if reached
                 else "does not reach adamw's final loss")
        print(f"{name}: final {curve[-1]:.4f} vs adamw {base_curve[-1]:.4f} "
              f"({curve[-1] - base_curve[-1]:+.4f} nats); {where}; time per step "
              f"{s / base_s:.2f}x adamw's", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
