"""Fine-tuning a BERT encoder for text classification: `attnlab train classify --init` against a
plain `transformers` loop, on the same split with the same hyper-parameters.

    .venv/bin/python -m benchmarks.finetune [--train 600] [--steps 150] [--seeds 3]
        [--threads 1] [--lora-rank 8] [--model DIR]

Data: synthetic three-class reviews generated here (two words of the class among 8-20 filler
words, as `benchmarks/classify_speed.py`'s reviews but shorter), written as train / val / test CSV files that both sides
read, so the split is the same. Model: `--model DIR` (a BERT directory on disk), or else a tiny
BERT with random weights built here (width 64, 2 layers, 4 heads, a WordPiece vocabulary trained
on the training texts) and saved with `save_pretrained`: no pretrained encoder is installed on
this machine, and none is downloaded.

Each seed runs, in turns, in fresh processes with the same `--threads`:
1. attnlab: `attnlab train classify --init DIR` (the whole command: imports, training with
   validation each epoch, the test split, the run directory);
2. reference: `transformers`' `AutoModelForSequenceClassification` trained by a plain loop (AdamW,
   the same learning rate, batch size, steps, warm-up and cosine schedule, gradient clipping at
   1.0, dropout from the checkpoint), validated each epoch and tested as attnlab does;
3. attnlab with `--lora-rank R`.
Reported: test accuracy (mean and spread over seeds) and wall time of each, and the ratios.
Not a test: timings depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LABELS = ("positive", "negative", "mixed")
WORDS = ("good great lovely superb".split(), "bad awful poor dull".split(),
         "okay average plain fair".split())
FILLER = "the movie was a and plot acting film really quite it this".split()


def reviews(n: int, seed: int = 0) -> list[tuple[str, int]]:
    """``n`` generated reviews (text, class): two words of the class among 8-20 filler words
    (``benchmarks/classify_speed.py``'s reviews, shorter and with a second class word)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        label = rng.randrange(3)
        words = [rng.choice(FILLER) for _ in range(rng.randint(8, 20))]
        words += [rng.choice(WORDS[label]) for _ in range(2)]
        rng.shuffle(words)
        out.append((" ".join(words), label))
    return out


def write_split(root: Path, n_train: int) -> dict[str, Path]:
    """train / val / test CSV files of generated reviews (val and test a fifth of train each)."""
    rows = reviews(n_train + 2 * (n_train // 5), seed=0)
    parts = {"train": rows[:n_train], "val": rows[n_train:n_train + n_train // 5],
             "test": rows[n_train + n_train // 5:]}
    paths = {}
    for name, part in parts.items():
        paths[name] = root / f"{name}.csv"
        paths[name].write_text("text,label\n" + "".join(f"{t},{LABELS[y]}\n" for t, y in part))
    return paths


def tiny_bert(root: Path, train_csv: Path) -> Path:
    """A random BERT (width 64, 2 layers) and a WordPiece tokenizer trained on the training
    texts, saved as a Hugging Face directory."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers import processors, trainers

    texts = [line.split(",")[0] for line in train_csv.read_text().splitlines()[1:]]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(
        vocab_size=200, show_progress=False,
        special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=64,
                                     num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=128, max_position_embeddings=128)
    out = root / "tiny-bert"
    transformers.utils.logging.disable_progress_bar()
    transformers.BertModel(config).save_pretrained(out)
    transformers.BertTokenizerFast(tokenizer_object=tok).save_pretrained(out)
    return out


def reference(args) -> None:
    """The plain `transformers` loop (run in its own process by the benchmark); prints JSON."""
    start = time.perf_counter()
    import torch
    import transformers

    from attnlab.schedulers import cosine_warmup_factor

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    transformers.logging.set_verbosity_error()
    read = lambda p: [(t, y) for t, y in (line.rsplit(",", 1) for line in  # noqa: E731
                                          Path(p).read_text().splitlines()[1:])]
    train, val, test = read(args.train_csv), read(args.val_csv), read(args.test_csv)
    names = sorted({y for _, y in train})
    tok = transformers.AutoTokenizer.from_pretrained(args.model)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        args.model, num_labels=len(names))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: cosine_warmup_factor(s, args.warmup, args.steps) if args.warmup else
        0.5 * (1 + math.cos(math.pi * s / args.steps)))

    def batch(rows):
        enc = tok([t for t, _ in rows], padding=True, truncation=True,
                  max_length=args.max_len, return_tensors="pt")
        return enc, torch.tensor([names.index(y) for _, y in rows])

    @torch.no_grad()
    def accuracy(rows):
        model.eval()
        right = sum(int((model(**enc).logits.argmax(-1) == y).sum())
                    for enc, y in (batch(rows[i:i + 256]) for i in range(0, len(rows), 256)))
        model.train()
        return right / len(rows)

    rng, step = random.Random(args.seed), 0
    model.train()
    loop_start = time.perf_counter()
    while step < args.steps:
        order = list(range(len(train)))
        rng.shuffle(order)
        for i in range(0, len(order), args.batch_size):
            enc, y = batch([train[j] for j in order[i:i + args.batch_size]])
            model(**enc, labels=y).loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            step += 1
            if step == args.steps:
                break
        accuracy(val)  # validation once an epoch, as attnlab's default
    train_seconds = time.perf_counter() - loop_start
    print(json.dumps({"test_accuracy": accuracy(test), "train_seconds": train_seconds,
                      "in_process_seconds": time.perf_counter() - start}))


def _timed(argv: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - start, done.stdout


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", type=int, default=600)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--lora-rank", type=int, default=8)
    p.add_argument("--model", default=None, help="a BERT directory (default: a tiny random one)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=15)
    p.add_argument("--max-len", type=int, default=128)
    # the reference loop's own process
    p.add_argument("--reference", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    for name in ("train_csv", "val_csv", "test_csv"):
        p.add_argument(f"--{name.replace('_', '-')}", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.reference:
        return reference(args)
    import os

    import torch

    root = Path(tempfile.mkdtemp(prefix="finetune-"))
    split = write_split(root, args.train)
    model = Path(args.model) if args.model else tiny_bert(root, split["train"])
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, torch "
          f"{torch.__version__}, {args.threads} threads; model {model.name}; "
          f"{args.train} train / {args.train // 5} val / {args.train // 5} test reviews; "
          f"{args.steps} steps, batch {args.batch_size}, lr {args.lr:g}, warm-up {args.warmup}")
    common = ["--max-steps", str(args.steps), "--batch-size", str(args.batch_size),
              "--lr", str(args.lr), "--warmup", str(args.warmup), "--max-len", str(args.max_len),
              "--threads", str(args.threads), "--data", str(split["train"]),
              "--val", str(split["val"]), "--test", str(split["test"])]
    results: dict[str, list[tuple[float, float, float]]] = {"attnlab": [], "reference": [],
                                                             "lora": []}
    for seed in range(args.seeds):
        for side in results:
            if side == "reference":
                argv = [sys.executable, "-m", "benchmarks.finetune", "--reference",
                        "--seed", str(seed), "--model", str(model),
                        *(f"--{k}={v}" for k, v in (("train-csv", split["train"]),
                                                   ("val-csv", split["val"]),
                                                   ("test-csv", split["test"]),
                                                   ("steps", args.steps),
                                                   ("batch-size", args.batch_size),
                                                   ("lr", args.lr), ("warmup", args.warmup),
                                                   ("max-len", args.max_len),
                                                   ("threads", args.threads)))]
                seconds, out = _timed(argv)
                metrics = json.loads(out.splitlines()[-1])
            else:
                run = root / f"{side}-{seed}"
                lora = ["--lora-rank", str(args.lora_rank)] if side == "lora" else []
                seconds, _ = _timed([sys.executable, "-m", "attnlab", "train", "classify",
                                     "--init", str(model), "--out", str(run), "--seed", str(seed),
                                     *common, *lora])
                metrics = json.loads((run / "metrics.json").read_text())
            acc, loop = metrics["test_accuracy"], metrics["train_seconds"]
            results[side].append((acc, seconds, loop))
            print(f"seed {seed} {side:9s} test accuracy {acc:.4f}  {seconds:6.1f} s "
                  f"(training loop {loop:5.1f} s)", flush=True)
    print()
    summary = {}
    for side, rows in results.items():
        accs, secs, loops = ([row[i] for row in rows] for i in range(3))
        spread = statistics.stdev(accs) if len(accs) > 1 else 0.0
        summary[side] = (statistics.mean(accs), spread, statistics.median(secs),
                         statistics.median(loops))
        print(f"{side:9s} accuracy {summary[side][0]:.4f} ± {spread:.4f} (mean ± sd over "
              f"{len(accs)} seeds), median wall time {summary[side][2]:.1f} s, training loop "
              f"{summary[side][3]:.1f} s")
    a, r, lo = summary["attnlab"], summary["reference"], summary["lora"]
    print(f"wall time attnlab / reference: {a[2] / r[2]:.2f} (target <= 0.8); training loop "
          f"alone {a[3] / r[3]:.2f}")
    print(f"accuracy attnlab - reference: {a[0] - r[0]:+.4f} (reference's sd {r[1]:.4f})")
    print(f"accuracy lora - full: {lo[0] - a[0]:+.4f} (target within 0.01); "
          f"wall time lora / full {lo[2] / a[2]:.2f}")


if __name__ == "__main__":
    main()
