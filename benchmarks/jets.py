"""Top-quark tagging: the tagger against the physics baselines on the same test jets.

    .venv/bin/python -m benchmarks.jets                    # full size: over an hour on 2 cores
    .venv/bin/python -m benchmarks.jets --train 2000 --test 1000 --minutes 2    # a small run
    .venv/bin/python -m benchmarks.jets --quick            # the same small run

1. Generate ``--train`` top + ``--train`` QCD particle-level jets with seed ``--seed`` and a
   separate test set of ``--test`` + ``--test`` with ``--test-seed`` (attnlab's Pythia 8 +
   FastJet generator, ``attnlab.tasks.jets.generate``): generation jets/s. Files already in
   ``--dir`` with the same settings are reused.
2. Time a few training steps of each model on those jets and choose ``--max-steps`` so that
   training takes about ``--minutes`` (85% of it: validation and the Lightning loop cost the
   rest).
3. ``attnlab train jets --data train.h5 --test test.h5`` for the default tagger (with
   ``--baselines``: the jet mass, τ3/τ2, their likelihood ratio, and a PFN trained on the same
   jets for the same steps), which has ParT's pairwise bias on the attention logits, and for
   ``--no-pair-bias`` (the course's plain set classifier): AUC, accuracy, 1/ε_B at ε_S = 0.3
   and 0.5, training jets/s. ``--models`` picks either.

Target: the default tagger's AUC >= 0.985 and its 1/ε_B at ε_S = 0.5 at least 1.5x
the (mass, τ3/τ2) likelihood's. Not a test: timings depend on the machine and its load.
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
TARGET_AUC, TARGET_RATIO = 0.985, 1.5
# the models a run can train: their options and run directories (under --dir)
MODELS = {"default tagger": ["--baselines"], "course model": ["--no-pair-bias"]}
DIRS = {"default tagger": "default_tagger", "course model": "course_model"}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", type=int, default=50_000, help="training jets per class")
    p.add_argument("--test", type=int, default=25_000, help="test jets per class")
    p.add_argument("--minutes", type=float, default=30.0, help="training time per model")
    p.add_argument("--seed", type=int, default=1, help="generator seed of the training jets")
    p.add_argument("--test-seed", type=int, default=2, help="generator seed of the test jets")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="generator processes")
    p.add_argument("--threads", type=int, default=None, help="torch threads for training")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--dir", type=Path, default=HERE / "_jets", help="jets files and runs")
    p.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS),
                   help="which to train (default: both)")
    p.add_argument("--quick", action="store_true", help="--train 2000 --test 1000 --minutes 2")
    args = p.parse_args(argv)
    if args.quick:
        args.train, args.test, args.minutes = 2000, 1000, 2.0
    return args


def generate(path: Path, n: int, seed: int, jobs: int) -> float | None:
    """Write ``n`` top + ``n`` QCD jets to ``path``; jets per second, or None when a file
    with these settings was there already."""
    from attnlab.tasks.jets.data import read_settings, write_jets
    from attnlab.tasks.jets.generate import JetSettings, generate_jets

    settings = JetSettings(signal=n, background=n, seed=seed, jobs=jobs)
    if path.is_file():
        old = read_settings(path) or {}
        if all(old.get(k) == v for k, v in (("signal", n), ("background", n), ("seed", seed),
                                            ("jobs", jobs))):
            return None
    start = time.perf_counter()
    p4, labels = generate_jets(settings)
    seconds = time.perf_counter() - start
    write_jets(path, p4, labels, settings.as_dict())
    return 2 * n / seconds


def seconds_per_step(train: Path, options: list[str], batch_size: int, threads: int | None,
                     steps: int = 12) -> float:
    """A training step's seconds (forward, backward, AdamW) on the task's own batches of
    ``train`` (grouped by length), after two warm-up steps: what ``--minutes`` buys."""
    import torch

    from attnlab.tasks.jets.data import count_jets
    from attnlab.models import JetTagger
    from attnlab.tasks.jets.runtime import JetBatches, Split

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = JetTagger(model_dim=64, num_heads=4, num_layers=2, dim_feedforward=128,
                      pair_bias="--no-pair-bias" not in options,
                      class_token="--class-token" in options)
    opt = torch.optim.AdamW(model.parameters(), 1e-3)
    cfg = {"batch_size": batch_size, "seed": 0, "max_constituents": 200, "chunk_size": 8192}
    batches = iter(JetBatches(Split(str(train), 0, count_jets(train)), cfg))
    for i in range(steps + 2):
        if i == 2:
            start = time.perf_counter()
        p4, labels = next(batches)
        loss = torch.nn.functional.cross_entropy(model(p4), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return (time.perf_counter() - start) / steps


def train(args, name: str, options: list[str], steps: int) -> dict:
    """One ``attnlab train jets`` in its own process; its metrics (and baselines)."""
    out = args.dir / name
    cmd = [sys.executable, "-m", "attnlab", "train", "jets", "--data", str(args.dir / "train.h5"),
           "--test", str(args.dir / "test.h5"), "--out", str(out), "--max-steps", str(steps),
           "--batch-size", str(args.batch_size), "--val-every", str(max(1, steps // 5)),
           "--checkpoint-every", str(max(1, steps // 2)),
           "--warmup", str(min(200, max(1, steps // 10))), *options]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if out.exists():
        import shutil

        shutil.rmtree(out)
    print("$", " ".join(cmd), flush=True)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    found = {"metrics": json.loads((out / "metrics.json").read_text()),
             "seconds": time.perf_counter() - start}
    if (out / "baselines.json").is_file():
        found["baselines"] = json.loads((out / "baselines.json").read_text())
    return found


def table(runs: dict[str, dict], batch_size: int) -> list[str]:
    rows = [f"  {'model':<28} {'AUC':>7} {'accuracy':>9} {'1/eB@0.3':>9} {'1/eB@0.5':>9} "
            f"{'train jets/s':>12}"]

    def row(name, m, speed=""):
        rows.append(f"  {name:<28} {m['test_auc']:7.4f} {m['test_accuracy']:9.4f} "
                    f"{m['test_rejection_30']:9.1f} {m['test_rejection_50']:9.1f} {speed:>12}")

    for name, run in runs.items():
        m = run["metrics"]
        row(name, m, f"{m['steps'] * batch_size / max(m['train_seconds'], 1e-9):,.0f}")
    baselines = next((r["baselines"] for r in runs.values() if "baselines" in r), {})
    names = {"mass": "jet mass alone", "tau32": "tau3/tau2 alone",
             "likelihood": "(mass, tau32) likelihood", "pfn": "PFN, same jets and steps"}
    for key, name in names.items():
        if key in baselines:
            row(name, baselines[key])
    return rows


def verdict(runs: dict[str, dict]) -> str:
    tagger = runs["default tagger"]
    m, likelihood = tagger["metrics"], tagger["baselines"]["likelihood"]
    ratio = m["test_rejection_50"] / likelihood["test_rejection_50"]
    met = m["test_auc"] >= TARGET_AUC and ratio >= TARGET_RATIO
    return (f"target (AUC >= {TARGET_AUC}, 1/eB@0.5 >= {TARGET_RATIO}x the likelihood's): "
            f"AUC {m['test_auc']:.4f}, ratio {ratio:.2f} -> {'met' if met else 'NOT met'}")


def main(argv=None) -> int:
    args = parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    print(f"jets: {args.train:,} + {args.train:,} training (seed {args.seed}), {args.test:,} + "
          f"{args.test:,} test (seed {args.test_seed}); {args.minutes:g} min of training per "
          f"model; load average {os.getloadavg()[0]:.1f}", flush=True)
    for name, n, seed in (("train", args.train, args.seed), ("test", args.test, args.test_seed)):
        rate = generate(args.dir / f"{name}.h5", n, seed, args.jobs)
        print(f"generation, {name}: " + ("reused the file in --dir" if rate is None else
                                         f"{rate:,.1f} jets/s with --jobs {args.jobs}"), flush=True)
    runs = {}
    for name in args.models:
        options = MODELS[name]
        per_step = seconds_per_step(args.dir / "train.h5", options, args.batch_size, args.threads)
        steps = max(10, int(0.85 * args.minutes * 60 / per_step))
        print(f"{name}: {per_step * 1000:.0f} ms per step -> --max-steps {steps}", flush=True)
        runs[name] = train(args, DIRS[name], options, steps)
    print(f"\non {2 * args.test:,} test jets (particle level; load average "
          f"{os.getloadavg()[0]:.1f} at the end):")
    print("\n".join(table(runs, args.batch_size)))
    if "default tagger" in runs:
        print(verdict(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
