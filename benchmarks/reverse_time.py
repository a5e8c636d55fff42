"""Seconds to 100% test sequence accuracy on reversal: `attnlab train reverse` vs the course.

Anchor: the UvA Deep Learning Tutorial 6 recipe, re-created here in plain PyTorch (no Lightning,
so the anchor pays no framework overhead): the course's TransformerPredictor (explicit attention,
post-LN block, feed-forward 2·D), 10 categories, length 16, 50,000 training sequences served by a
per-example DataLoader (batch 128, shuffled, drop_last), model_dim 32, 1 head, 1 layer, Adam 5e-4,
cosine warm-up 50 over 10 epochs, gradient clipping 5. Its clock starts after `import torch` and
stops at the end of the first epoch whose 10,000-sequence test set is reversed 100% right
(data generation, training and the per-epoch tests are all counted).

Ours: the whole `attnlab train reverse` process on its defaults, start to exit (interpreter
start, imports including Lightning, data, training, the 10,000-sequence test, figures, files).

    .venv/bin/python benchmarks/reverse_time.py [--repeats 3] [--threads N] [-- extra train flags]

Prints wall and CPU seconds of both and the ratios ours / recipe (target: <= 1). On a shared
machine the CPU ratio is the steadier one. A benchmark, never a test.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.utils import data

ROOT = Path(__file__).resolve().parents[1]


# ---- the course's model, written out as the tutorial has it ------------------------------------
def scaled_dot_product(q, k, v, mask=None):
    d_k = q.size()[-1]
    attn_logits = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        attn_logits = attn_logits.masked_fill(mask == 0, -9e15)
    attention = F.softmax(attn_logits, dim=-1)
    return torch.matmul(attention, v), attention


class CourseMHA(nn.Module):
    def __init__(self, input_dim, embed_dim, num_heads):
        super().__init__()
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.qkv_proj = nn.Linear(input_dim, 3 * embed_dim)
        self.o_proj = nn.Linear(embed_dim, embed_dim)
        for lin in (self.qkv_proj, self.o_proj):
            nn.init.xavier_uniform_(lin.weight)
            lin.bias.data.fill_(0)

    def forward(self, x, mask=None):
        B, T, _ = x.size()
        qkv = self.qkv_proj(x).reshape(B, T, self.num_heads, 3 * self.head_dim)  # (B, T, H, 3hd)
        q, k, v = qkv.permute(0, 2, 1, 3).chunk(3, dim=-1)  # (B, H, T, hd) each
        values, _ = scaled_dot_product(q, k, v, mask)
        values = values.permute(0, 2, 1, 3).reshape(B, T, self.embed_dim)  # (B, T, E)
        return self.o_proj(values)


class CourseBlock(nn.Module):
    def __init__(self, input_dim, num_heads, dim_feedforward, dropout=0.0):
        super().__init__()
        self.self_attn = CourseMHA(input_dim, input_dim, num_heads)
        self.linear_net = nn.Sequential(nn.Linear(input_dim, dim_feedforward), nn.Dropout(dropout),
                                        nn.ReLU(inplace=True), nn.Linear(dim_feedforward, input_dim))
        self.norm1, self.norm2 = nn.LayerNorm(input_dim), nn.LayerNorm(input_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = self.norm1(x + self.dropout(self.self_attn(x)))
        return self.norm2(x + self.dropout(self.linear_net(x)))


class CoursePredictor(nn.Module):
    def __init__(self, input_dim, model_dim, num_classes, num_heads, num_layers):
        super().__init__()
        self.input_net = nn.Sequential(nn.Dropout(0.0), nn.Linear(input_dim, model_dim))
        pe = torch.zeros(5000, model_dim)
        position = torch.arange(0, 5000, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, model_dim, 2).float() * (-math.log(10000.0) / model_dim))
        pe[:, 0::2], pe[:, 1::2] = torch.sin(position * div_term), torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0), persistent=False)
        self.layers = nn.ModuleList([CourseBlock(model_dim, num_heads, 2 * model_dim)
                                     for _ in range(num_layers)])
        self.output_net = nn.Sequential(nn.Linear(model_dim, model_dim), nn.LayerNorm(model_dim),
                                        nn.ReLU(inplace=True), nn.Dropout(0.0),
                                        nn.Linear(model_dim, num_classes))

    def forward(self, x):
        x = self.input_net(x)
        x = x + self.pe[:, : x.size(1)]
        for layer in self.layers:
            x = layer(x)
        return self.output_net(x)


class CourseReverseDataset(data.Dataset):
    def __init__(self, num_categories, seq_len, size, generator):
        self.data = torch.randint(num_categories, size=(size, seq_len), generator=generator)

    def __len__(self):
        return self.data.size(0)

    def __getitem__(self, idx):
        inp = self.data[idx]
        return inp, torch.flip(inp, dims=(0,))


def cosine_warmup(step, warmup, max_iters):
    f = 0.5 * (1 + math.cos(math.pi * step / max_iters))
    return f * step / warmup if step <= warmup else f


def recipe(seed: int = 42, max_epochs: int = 10) -> dict:
    """Train the course's recipe; seconds until the first epoch with 100% test sequence accuracy."""
    start, cpu_start = time.perf_counter(), time.process_time()
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    train = CourseReverseDataset(10, 16, 50_000, g)
    test = CourseReverseDataset(10, 16, 10_000, g)
    loader = data.DataLoader(train, batch_size=128, shuffle=True, drop_last=True)
    model = CoursePredictor(10, 32, 10, 1, 1)
    opt = optim.Adam(model.parameters(), lr=5e-4)
    max_iters = max_epochs * len(loader)
    sched = optim.lr_scheduler.LambdaLR(opt, lambda e: cosine_warmup(e, 50, max_iters))
    test_x = F.one_hot(test.data, 10).float()
    test_y = test.data.flip(-1)
    for epoch in range(1, max_epochs + 1):
        model.train()
        for inp, labels in loader:
            logits = model(F.one_hot(inp, 10).float())
            loss = F.cross_entropy(logits.view(-1, 10), labels.view(-1))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            sched.step()
        model.eval()
        with torch.no_grad():
            seq_acc = (model(test_x).argmax(-1) == test_y).all(-1).float().mean().item()
        if seq_acc == 1.0:
            return {"seconds": time.perf_counter() - start, "cpu": time.process_time() - cpu_start,
                    "epochs": epoch, "steps": epoch * len(loader)}
    return {"seconds": float("nan"), "cpu": float("nan"), "epochs": None, "steps": max_iters,
            "last_seq_acc": seq_acc}


def ours(extra: list[str]) -> dict:
    """The whole `attnlab train reverse` process, start to exit, and its metrics.json."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        cmd = [str(Path(sys.executable).parent / "attnlab"), "train", "reverse", "--out", str(out), *extra]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if proc.returncode != 0:
            raise SystemExit(f"attnlab failed ({proc.returncode}):\n{proc.stderr}")
        metrics = json.loads((out / "metrics.json").read_text())
    return {"seconds": seconds, "cpu": cpu, **metrics}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads for the recipe (1, its fastest here; ours uses 1 too)")
    p.add_argument("--skip-recipe", action="store_true")
    p.add_argument("--quick", action="store_true", help="one repeat (a smoke run)")
    p.add_argument("extra", nargs="*", help="extra flags for attnlab train reverse (after --)")
    args = p.parse_args()
    if args.quick:
        args.repeats = 1
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"machine: {os.cpu_count()} CPUs, torch {torch.__version__}, {torch.get_num_threads()} threads")
    rows = []
    for i in range(args.repeats):
        o = ours(args.extra)
        r = {"seconds": float("nan"), "cpu": float("nan")} if args.skip_recipe else recipe()
        rows.append((o, r))
        print(f"run {i + 1}: ours {o['seconds']:.2f} s wall, {o['cpu']:.2f} s CPU (train "
              f"{o['train_seconds']:.2f} s, {o['steps']} steps, test seq acc "
              f"{o['test_sequence_accuracy']:.4f}) | recipe {r['seconds']:.2f} s wall, "
              f"{r['cpu']:.2f} s CPU ({r.get('epochs')} epochs, {r.get('steps')} steps) | "
              f"ratio wall {o['seconds'] / r['seconds']:.2f}, CPU {o['cpu'] / r['cpu']:.2f}", flush=True)
    # CPU seconds are the steadier measure on a shared machine: other processes' load stretches
    # wall time, not the work done
    for key, what in (("seconds", "wall"), ("cpu", "CPU")):
        o_med = sorted(o[key] for o, _ in rows)[len(rows) // 2]
        r_med = sorted(r[key] for _, r in rows)[len(rows) // 2]
        print(f"median {what}: ours {o_med:.2f} s, recipe {r_med:.2f} s, ratio ours/recipe "
              f"{o_med / r_med:.2f}")


if __name__ == "__main__":
    main()
