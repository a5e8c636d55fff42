"""How well attnlab's ``CausalLM`` trains against nanoGPT's ``GPT`` when nothing else differs:
the same batches, optimiser, schedule, precision and steps, in one process.

    python -m benchmarks.lm_quality_probe [--steps 1000] [--quick] [--nanogpt DIR]
                                          [--shape L,H,D,T,B] [VARIANT ...]

On a GPU the shape is nanoGPT's shakespeare-char (6 layers, 6 heads, width 384, block 256, batch
64, dropout 0.2 everywhere, bf16 autocast); on a CPU a tiny one (a smoke run, not a result),
or any given as ``--shape`` (layers, heads, width, block, batch).
Corpus: 1.1 M characters of the standard library's source (``benchmarks.nanogpt.write_corpus``),
character level, the first 90% to train on and the last 10% held out. Both models: AdamW
(β = (0.9, 0.99), weight decay 0.1 on matrices), nanoGPT's schedule (linear warm-up over 30
steps, cosine to lr/10), clipping at 1.0, the same seeded batches. Printed per variant: the
last training batch's loss and the mean loss of 50 held-out batches.

Variants (default: all):
    nanogpt            nanoGPT's GPT (model.py of ``--nanogpt DIR``, default ``.nanogpt``, or
                       ``$NANOGPT``; ``bias=False``); skipped, saying so, where there is none
    attnlab            CausalLM as ``attnlab train lm`` builds it (SmallInit's σ = √(2/5D),
                       σ/√(2L) for the projections into the residual stream)
    attnlab+gpt2-init  CausalLM with GPT-2's fixed σ = 0.02 (0.02/√(2L) into the stream)
    attnlab+layer-init CausalLM with its layers' own initialisation instead (attention's
                       Xavier, ``nn.Linear``'s uniform; embeddings N(0, 0.02²)): how it
                       started before
    attnlab+no-ffn-dropout
                       CausalLM without the dropout inside each feed-forward network (the
                       course's block has one after the first layer; GPT-2's has none)

Not a test: it trains 1,000 steps per variant (about 20 s each on an H100).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from attnlab.models import CausalLM
from benchmarks.nanogpt import nanogpt_classes, write_corpus

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
LAYERS, HEADS, WIDTH, BLOCK, BATCH = (6, 6, 384, 256, 64) if DEVICE == "cuda" else (2, 2, 64, 32, 8)
DROPOUT, LR, WARMUP = 0.2, 1e-3, 30
VARIANTS = ("nanogpt", "attnlab", "attnlab+gpt2-init", "attnlab+layer-init",
            "attnlab+no-ffn-dropout")


def batches(data: torch.Tensor, seed: int, count: int):
    """``count`` seeded (inputs, targets) pairs of BATCH windows of BLOCK ids."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(count):
        starts = torch.randint(len(data) - BLOCK - 1, (BATCH,), generator=g)
        x = torch.stack([data[i:i + BLOCK] for i in starts])
        y = torch.stack([data[i + 1:i + BLOCK + 1] for i in starts])
        yield x.to(DEVICE), y.to(DEVICE)


def build(variant: str, vocab: int, nanogpt: Path):
    """(model on DEVICE, loss of (inputs, targets))."""
    torch.manual_seed(0)
    if variant == "nanogpt":
        GPT, GPTConfig = nanogpt_classes(nanogpt)
        with contextlib.redirect_stdout(io.StringIO()):  # its parameter count
            model = GPT(GPTConfig(block_size=BLOCK, vocab_size=vocab, n_layer=LAYERS,
                                  n_head=HEADS, n_embd=WIDTH, dropout=DROPOUT, bias=False))
        return model.to(DEVICE), lambda x, y: model(x, y)[1]
    model = CausalLM(vocab, model_dim=WIDTH, num_heads=HEADS, num_layers=LAYERS,
                     max_len=BLOCK, dropout=DROPOUT, attention_dropout=DROPOUT, bias=False)
    if variant == "attnlab+layer-init":
        for module in model.modules():  # the embeddings keep N(0, 0.02²), as they had
            if isinstance(module, torch.nn.Linear) and module is not model.lm_head:
                module.reset_parameters()
        for module in model.modules():
            if hasattr(module, "_reset_parameters"):  # attention's Xavier
                module._reset_parameters()
    elif variant == "attnlab+gpt2-init":
        for name, p in model.named_parameters():
            if p.dim() == 2:
                into_stream = name.endswith(("o_proj.weight", "linear_net.3.weight"))
                torch.nn.init.normal_(p, std=0.02 / math.sqrt(2 * LAYERS) if into_stream else 0.02)
    elif variant == "attnlab+no-ffn-dropout":
        for block in model.decoder.layers:
            block.linear_net[1].p = 0.0
    return model.to(DEVICE), lambda x, y: F.cross_entropy(model(x).flatten(0, 1), y.flatten())


def lr_at(step: int, steps: int) -> float:
    """nanoGPT's schedule: linear warm-up, then cosine from LR to LR / 10."""
    if step < WARMUP:
        return LR * (step + 1) / (WARMUP + 1)
    done = (step - WARMUP) / max(1, steps - WARMUP)
    return LR / 10 + 0.5 * (1 + math.cos(math.pi * done)) * (LR - LR / 10)


def train(variant: str, train_ids, val_ids, vocab: int, steps: int,
          nanogpt: Path) -> tuple[float, float]:
    model, loss_of = build(variant, vocab, nanogpt)
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": matrices, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.99), fused=DEVICE == "cuda")
    model.train()
    for step, (x, y) in enumerate(batches(train_ids, 1, steps)):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps)
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            loss = loss_of(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    model.eval()
    with torch.no_grad(), torch.autocast(DEVICE, dtype=torch.bfloat16):
        held_out = sum(loss_of(x, y).item() for x, y in batches(val_ids, 7, 50)) / 50
    return loss.item(), held_out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("variants", nargs="*", metavar="VARIANT", help=", ".join(VARIANTS))
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="50 steps: a smoke run")
    ap.add_argument("--nanogpt", type=Path, default=Path(os.environ.get("NANOGPT", ".nanogpt")))
    ap.add_argument("--shape", help="L,H,D,T,B: layers, heads, width, block, batch")
    args = ap.parse_args()
    if args.shape:
        global LAYERS, HEADS, WIDTH, BLOCK, BATCH
        LAYERS, HEADS, WIDTH, BLOCK, BATCH = (int(v) for v in args.shape.split(","))
    steps = 50 if args.quick else args.steps
    variants = args.variants or list(VARIANTS)
    for name in set(variants) - set(VARIANTS):
        ap.error(f"no variant {name!r}: one of {', '.join(VARIANTS)}")
    if "nanogpt" in variants and not (args.nanogpt / "model.py").is_file():
        print(f"nanoGPT: no {args.nanogpt / 'model.py'} (--nanogpt DIR): its side is skipped")
        variants.remove("nanogpt")
    text = write_corpus(Path("/tmp/lm_quality_probe.txt"), 1_100_000, "stdlib")
    symbols = {c: i for i, c in enumerate(sorted(set(text)))}
    ids = torch.tensor([symbols[c] for c in text])
    cut = int(len(ids) * 0.9)
    print(f"{DEVICE}: {LAYERS} layers, {HEADS} heads, width {WIDTH}, block {BLOCK}, batch "
          f"{BATCH}, dropout {DROPOUT}, {steps} steps, {len(symbols)} symbols", flush=True)
    for variant in variants:
        start = time.perf_counter()
        last, held_out = train(variant, ids[:cut], ids[cut:], len(symbols), steps, args.nanogpt)
        print(f"{variant:24s} train(last) {last:.4f} val {held_out:.4f} "
              f"{time.perf_counter() - start:4.0f}s", flush=True)


if __name__ == "__main__":
    main()
