"""The course's story, measured: an RNN encoder–decoder without attention against the same
with additive or bilinear attention and against the Transformer, by source length.

    python -m benchmarks.history [--minutes 4] [--max-number 1000000000000] [--quick]
    python -m benchmarks.history --minutes 2 --max-number 1000000 --lr 5e-3 --batch-size 64
    python -m benchmarks.history --steps 400 --max-number 1000000 --lr 5e-3 --batch-size 64

The data is spelled-out numbers up to ``--max-number`` (English → German, num2words), whose
sources run from 1 to ~25 words. The German side is cut into BPE pieces (``--tgt-tokenizer
bpe``): above a million it is written as several words, so ``auto`` would choose whole words,
and most held-out numbers would hold a word never seen in training. Each arch trains in its own process for the same wall-clock
budget (its steps are set from a 20-step probe of its own speed), with a parameter count near
the Transformer's (the RNNs' width is chosen to match it). Then ``attnlab evaluate --by-length``
scores each on the same numbers, spread evenly over 1 to 12 digits (``by_digits.csv``; the
short ones are few, so the models will have seen some of them in training), and one figure
draws the exact match of every arch per source-length bucket: the shape Bahdanau et al. (2015, figure 2) reported is an
attention-less RNN that degrades with length and attentive models that do not.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARCHS = ("rnn", "rnn-additive", "rnn-bilinear", "transformer")
RNN_WIDTHS = (64, 96, 128, 160, 192, 224, 256, 320)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=4.0, help="training time per arch")
    p.add_argument("--max-number", type=int, default=10**12, help="numbers below N")
    p.add_argument("--test-size", type=int, default=2000)
    p.add_argument("--steps", type=int,
                   help="the same number of steps for every arch instead of the same minutes")
    p.add_argument("--lr", type=float, help="every arch's --lr (default: the task's)")
    p.add_argument("--batch-size", type=int, help="every arch's --batch-size (default: the task's)")
    p.add_argument("--dir", type=Path, default=HERE / "_history", help="the runs")
    p.add_argument("--quick", action="store_true", help="--minutes 0.5 --test-size 300")
    args = p.parse_args(argv)
    if args.quick:
        args.minutes, args.test_size = 0.5, 300
    return args


def train(args, arch: str, out: Path, steps: int, width: int | None = None) -> dict:
    """``attnlab train translate --arch ARCH`` in its own process; its metrics and config."""
    cmd = [sys.executable, "-m", "attnlab", "train", "translate", "--arch", arch,
           "--max-number", str(args.max_number), "--test-size", str(args.test_size),
           "--max-steps", str(steps), "--val-every", str(max(1, steps // 4)),
           "--checkpoint-every", str(max(1, steps // 2)), "--warmup", str(min(200, steps // 5)),
           "--tgt-tokenizer", "bpe", "--threads", "1", "--out", str(out)]
    if width is not None:
        cmd += ["--model-dim", str(width)]
    for flag, value in (("--lr", args.lr), ("--batch-size", args.batch_size)):
        if value is not None:
            cmd += [flag, str(value)]
    if out.exists():
        import shutil

        shutil.rmtree(out)
    print("$", " ".join(cmd[2:]), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import yaml

    return {"metrics": json.loads((out / "metrics.json").read_text()),
            "config": yaml.safe_load((out / "config.yaml").read_text())}


def rnn_width(cfg: dict, target: int) -> tuple[int, int]:
    """The RNN width from ``RNN_WIDTHS`` whose parameter count is nearest ``target``."""
    from attnlab.models.rnn_seq2seq import RNNSeq2Seq

    def count(width):
        model = RNNSeq2Seq(cfg["src_vocab_size"], cfg["tgt_vocab_size"], model_dim=width,
                           num_layers=cfg["num_layers"], attention="additive")
        return sum(p.numel() for p in model.parameters())

    best = min(RNN_WIDTHS, key=lambda w: abs(count(w) - target))
    return best, count(best)


def length_test_file(path: Path, max_number: int, count: int, seed: int = 7) -> Path:
    """``count`` (English, German) numbers spread evenly over the digit counts 1 .. digits of
    ``max_number - 1`` (the run's own held-out numbers are uniform below ``max_number``, so
    nearly all of them are long): a source/target CSV for ``evaluate --data``."""
    import csv
    import random

    from attnlab.data.numbers import spell

    rng, digits = random.Random(seed), len(str(max_number - 1))
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["source", "target"])
        for i in range(count):
            d = 1 + i % digits
            n = rng.randrange(0 if d == 1 else 10 ** (d - 1), min(10**d, max_number))
            writer.writerow([spell(n, "en"), spell(n, "de")])
    return path


def by_length(run: Path, data: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "attnlab", "evaluate", str(run), "--data",
                          str(data), "--by-length"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def main(argv=None) -> int:
    args = parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    budget = args.minutes * 60
    each = f"{args.steps} steps" if args.steps else f"{args.minutes:g} min of training"
    print(f"history: numbers below {args.max_number:,}, {args.test_size} test pairs; "
          f"{each} per arch; lr {args.lr or 'default'}, batch "
          f"{args.batch_size or 'default'}; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    lengths = length_test_file(args.dir / "by_digits.csv", args.max_number, args.test_size)
    probe = train(args, "transformer", args.dir / "probe-transformer", 20)
    target = probe["metrics"]["parameters"]
    width, rnn_params = rnn_width(probe["config"], target)
    print(f"transformer: {target:,} parameters; rnn width {width}: {rnn_params:,} parameters "
          f"(additive)", flush=True)
    results = {}
    for arch in ARCHS:
        w = None if arch == "transformer" else width
        if args.steps:
            steps = args.steps
        else:
            speed = probe if arch == "transformer" else train(args, arch,
                                                              args.dir / f"probe-{arch}", 20, w)
            per_step = speed["metrics"]["train_seconds"] / speed["metrics"]["steps"]
            steps = max(20, int(budget / per_step))
            print(f"{arch}: {per_step * 1000:.0f} ms per step -> --max-steps {steps}", flush=True)
        start = time.perf_counter()
        found = train(args, arch, args.dir / arch, steps, w)
        found["seconds"] = time.perf_counter() - start
        found["by_length"] = by_length(args.dir / arch, lengths)
        results[arch] = found
    report(args, results)
    return 0


def report(args, results: dict) -> None:
    from attnlab.viz import plot_by_length

    buckets = [r["lengths"] for r in next(iter(results.values()))["by_length"]["by_length"]]
    print(f"\nscored on {args.test_size} numbers spread over the digit counts (by_digits.csv)")
    print(f"| arch | parameters | steps | train s | exact match | chrF | "
          + " | ".join(f"EM {b}" for b in buckets) + " |")
    print("|---" * (6 + len(buckets)) + "|")
    for arch, r in results.items():
        m, rows = r["metrics"], r["by_length"]["by_length"]
        e = r["by_length"]
        print(f"| {arch} | {m['parameters']:,} | {m['steps']} | {m['train_seconds']:.0f} | "
              f"{e['test_exact_match']:.4f} | {e['test_chrf']:.2f} | "
              + " | ".join(f"{row['exact_match']:.3f}" for row in rows) + " |")
    pairs = [row["pairs"] for row in next(iter(results.values()))["by_length"]["by_length"]]
    print(f"pairs per bucket: {pairs}")
    path = plot_by_length({arch: [row["exact_match"] for row in r["by_length"]["by_length"]]
                           for arch, r in results.items()}, buckets, args.dir / "history.png",
                          title="exact match by source length ("
                                + (f"{args.steps} steps" if args.steps else f"{args.minutes:g} min")
                                + " each)",
                          ylabel="exact match")
    print(f"figure: {path}")


if __name__ == "__main__":
    sys.exit(main())
