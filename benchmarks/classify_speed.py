"""Whole-sequence and set prediction: anomaly accuracy and time, text-classification throughput.

    .venv/bin/python benchmarks/classify_speed.py [--skip-anomaly] [--threads 1]

1. `attnlab train anomaly` with its defaults (in process): test accuracy and training seconds,
   against the target (>= 0.99 in about a minute).
2. Text classification throughput, sequences per second, training (forward + backward + AdamW)
   and inference, for attnlab's SequenceClassifier and for the anchor: the same model built
   from torch.nn.TransformerEncoder (same width, depth, heads, feed-forward, embedding, mean
   pooling), on the same padded batches of word-tokenised synthetic reviews. Ratio > 1 = we are
   faster.
3. `attnlab train classify` end to end (Lightning loop included): sequences per second.

Not a test: timings depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from attnlab.cli import main
from attnlab.models import SequenceClassifier
from attnlab.nn import PositionalEncoding
from attnlab.tasks.classify.runtime import make_batches
from attnlab.tokenizers import WordTokenizer

D, HEADS, LAYERS, FF, CLASSES = 64, 4, 2, 128, 3


def reviews(n: int, seed: int = 0) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    words = ["good great lovely superb".split(), "bad awful poor dull".split(),
             "okay average plain fair".split()]
    filler = "the movie was a and plot acting film really quite it this".split()
    out = []
    for _ in range(n):
        label = rng.randrange(3)
        toks = [rng.choice(filler) for _ in range(rng.randint(20, 100))] + [rng.choice(words[label])]
        rng.shuffle(toks)
        out.append((" ".join(toks), label))
    return out


class TorchAnchor(nn.Module):
    """The same classifier from torch.nn parts (post-LN, ReLU, mean pooling over real tokens)."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, D, padding_idx=0)
        layer = nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.head = nn.Sequential(nn.Linear(D, D), nn.LayerNorm(D), nn.ReLU(), nn.Linear(D, CLASSES))
        self.positional = PositionalEncoding(D, 512)  # the same sinusoidal table

    def forward(self, ids):
        real = ids != 0  # (B, T)
        h = self.encoder(self.positional(self.embedding(ids)), src_key_padding_mask=~real)
        m = real.unsqueeze(-1).float()
        return self.head((h * m).sum(1) / m.sum(1))


def throughput(model, batches, *, train: bool, repeats: int) -> float:
    opt = torch.optim.AdamW(model.parameters(), 1e-3)
    model.train(train)
    n, start = 0, None
    for r in range(repeats + 1):
        if r == 1:  # the first pass warms up the allocator and kernels
            n, start = 0, time.perf_counter()
        for x, y in batches:
            if train:
                loss = nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            else:
                with torch.no_grad():
                    model(x)
            n += len(y)
    return n / (time.perf_counter() - start)


def anomaly() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        start, cpu = time.perf_counter(), time.process_time()
        assert main(["train", "anomaly", "--out", f"{tmp}/run"]) == 0
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        m = json.loads(Path(f"{tmp}/run/metrics.json").read_text())
    print(f"anomaly (defaults): test_accuracy {m['test_accuracy']:.4f} (target >= 0.99), "
          f"train_seconds {m['train_seconds']:.1f}, wall {wall:.1f} s, CPU {cpu:.1f} s (one thread: "
          f"the wall time on an idle machine), steps {m['steps']}, "
          f"parameters {m['parameters']:,}")


def text(threads: int) -> None:
    data = reviews(2048)
    tok = WordTokenizer.fit([t for t, _ in data])
    ids = [tok.encode(t) for t, _ in data]
    labels = [y for _, y in data]
    train_batches = make_batches(ids, labels, 32, shuffle=True, seed=0)[:32]
    test_batches = make_batches(ids, labels, 256)
    torch.manual_seed(0)
    ours = SequenceClassifier(CLASSES, vocab_size=tok.vocab_size, model_dim=D, num_heads=HEADS,
                              num_layers=LAYERS, dim_feedforward=FF, pooling="mean")
    anchor = TorchAnchor(tok.vocab_size)
    tokens = sum(len(i) for i in ids) / len(ids)
    print(f"text: {len(data)} reviews, mean {tokens:.0f} tokens, D={D} L={LAYERS} H={HEADS}, "
          f"{threads} thread(s)")
    for mode, batches in (("train", train_batches), ("inference", test_batches)):
        # alternate the two models three times and keep each one's best: load on a shared
        # machine comes and goes, and this gives both the same chances
        a = o = 0.0
        for _ in range(3):
            a = max(a, throughput(anchor, batches, train=mode == "train", repeats=1))
            o = max(o, throughput(ours, batches, train=mode == "train", repeats=1))
        print(f"  {mode:<9}  attnlab {o:8.0f} seq/s   torch.nn {a:8.0f} seq/s   ratio {o / a:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        import csv

        with open(f"{tmp}/d.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["text", "label"])
            w.writerows((t, "pos neg meh".split()[y]) for t, y in data)
        assert main(["train", "classify", "--data", f"{tmp}/d.csv", "--out", f"{tmp}/run",
                     "--max-steps", "200", "--pooling", "mean", "--threads", str(threads)]) == 0
        m = json.loads(Path(f"{tmp}/run/metrics.json").read_text())
    print(f"  attnlab train classify (Lightning loop, 200 steps of 32): "
          f"{200 * 32 / m['train_seconds']:.0f} seq/s, test_accuracy {m['test_accuracy']:.3f}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--skip-anomaly", action="store_true")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{time.strftime('%Y-%m-%d %H:%M')}  torch {torch.__version__}  python {sys.version.split()[0]}")
    if not args.skip_anomaly:
        anomaly()
    text(args.threads)
