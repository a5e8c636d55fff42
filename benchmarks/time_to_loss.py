"""Time to nanoGPT's held-out loss: nanoGPT's recipe against ``attnlab train lm --recipe fast``.

    python -m benchmarks.time_to_loss --nanogpt /somewhere/nanoGPT [--threads 1] [--shape cpu]
                                      [--attnlab-steps 400] [--every 25] [--ablate]
                                      [--plot docs/images/time_to_loss.png] [--quick]

(``NANOGPT=DIR`` instead of ``--nanogpt``; without either it prints why it skips.)

The target is nanoGPT's held-out loss at the end of its own recipe. The corpus is
``benchmarks.nanogpt.write_corpus``'s (1.16 M characters of sentences about numbers, by
default); both sides hold out its last 10%, and one evaluator scores every model on those
characters: ``benchmarks.nanogpt.windows_loss``, non-overlapping block-long windows, each model
with its own character ids.

- **nanoGPT**: its ``prepare.py`` and ``train.py`` with the recipe's flags (``--shape cpu``: the
  README's CPU recipe, 4 layers x 128, block 64, batch 12, lr 1e-3 to 1e-4 by cosine over
  ``--iters`` 1,000, warm-up 100, no dropout; ``--shape gpu``: shakespeare-char's, 6 x 384,
  block 256, batch 64, dropout 0.2, 5,000 iterations, bf16, compiled). It runs a copy of
  ``train.py`` with two lines changed, neither of which touches training: each evaluation's
  checkpoint is kept (``ckpt-ITER.pt``, not one ``ckpt.pt`` overwritten) and its clock restarts
  after an evaluation, so the ``time`` it logs per iteration is training only. It evaluates
  every ``--every`` iterations (the recipe's 250 on the CPU) with its own 20 random batches,
  which draw from its random stream: the training batches differ from a run evaluating every
  250, as a seed would. Its curve: this script's loss of each kept checkpoint against the sum
  of its logged iteration times up to it. Its time-to-loss is that sum at the end (the target
  is its last checkpoint's loss).
- **attnlab**: ``attnlab train lm --recipe fast`` with the recipe's shape, ``--max-steps``
  ``--attnlab-steps``, a validation every ``--every`` steps over every window of the held-out
  split (``--val-batches`` large enough: the same windows as the evaluator). Its curve is
  ``logs/metrics.csv``'s ``val_loss`` against ``train_seconds`` (training only, validation
  excluded); its time-to-loss is the first validation at or below the target
  (``time_to_loss``). At the end the evaluator scores its final model too, and the script
  prints the difference from the run's own last ``val_loss`` (they should agree to float
  rounding: that is the check that the two measure the same thing).

``--ablate`` then trains attnlab once more per row of ``ABLATIONS`` (the recipe with one piece
put back to nanoGPT's), with the same steps and validations, and prints each one's
time-to-loss and final loss: which pieces buy what. One seed each.

Both sides run as new processes with ``OMP_NUM_THREADS`` = ``--threads`` (attnlab also
``--threads``), one after the other. ``--plot`` writes held-out loss against training seconds
for both (PNG).
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.nanogpt import (attnlab_val_loss, nanogpt_prepare, nanogpt_val_loss, run,
                                write_corpus)

# nanoGPT's recipes: the README's CPU one, and shakespeare-char's for a GPU
SHAPES = {
    "cpu": dict(layers=4, heads=4, width=128, block=64, batch=12, lr=1e-3, min_lr=1e-4,
                warmup=100, iters=1000, dropout=0.0, every=250, device="cpu", compile=False),
    "gpu": dict(layers=6, heads=6, width=384, block=256, batch=64, lr=1e-3, min_lr=1e-4,
                warmup=100, iters=5000, dropout=0.2, every=250, device="cuda", compile=True),
}
QUICK = dict(layers=2, heads=2, width=32, block=32, batch=8, lr=1e-3, min_lr=1e-4, warmup=5,
             iters=40, dropout=0.0, every=10, device="cpu", compile=False)

# --ablate: the recipe with one piece put back to nanoGPT's (flags given after --recipe fast,
# which win over the recipe's)
ABLATIONS = {
    "schedule: nanoGPT's cosine to min-lr": ["--schedule", "cosine", "--min-lr", "1e-4",
                                             "--warmup", "100"],
    "optimizer: AdamW (lr 1e-3)": ["--optimizer", "adamw", "--lr", "1e-3"],
    "qk-norm off": ["--no-qk-norm"],
    "positions: learned (no RoPE)": ["--positional", "learned"],
    "norm: LayerNorm": ["--norm", "layer"],
    "feed-forward: GELU MLP (no SwiGLU)": ["--ff", "mlp"],
    "precision: float32": ["--precision", "32"],
}


def time_to_loss(metrics_csv: Path, target: float) -> tuple[float, int] | None:
    """(train_seconds, step) of the first validation in ``metrics_csv`` (an attnlab run's
    ``logs/metrics.csv``) whose ``val_loss`` is at most ``target``; None if none is.

    Examples:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "metrics.csv"
        >>> _ = path.write_text("step,train_seconds,train_loss,val_loss\\n"
        ...                     "10,1.5,2.0,\\n10,1.5,,1.9\\n20,3.0,,1.4\\n30,4.5,,1.2\\n")
        >>> time_to_loss(path, 1.5), time_to_loss(path, 1.0)
        ((3.0, 20), None)
    """
    for seconds, step, loss in loss_curve(metrics_csv):
        if loss <= target:
            return seconds, step
    return None


def loss_curve(metrics_csv: Path) -> list[tuple[float, int, float]]:
    """(train_seconds, step, val_loss) of every validation row of ``metrics_csv``, in order."""
    with open(metrics_csv, newline="") as f:
        return [(float(r["train_seconds"]), int(r["step"]), float(r["val_loss"]))
                for r in csv.DictReader(f) if r.get("val_loss")]


def nanogpt_iteration_seconds(log: str) -> dict[int, float]:
    """Seconds of each iteration from nanoGPT's ``iter N: loss L, time T ms`` lines."""
    return {int(i): float(ms) / 1e3
            for i, ms in re.findall(r"^iter (\d+): loss [\d.]+, time ([\d.]+)ms", log, re.M)}


def patched_train(repo: Path, work: Path) -> Path:
    """A copy of nanoGPT's ``train.py`` (and ``model.py``, which it imports) in ``work`` that
    keeps every evaluation's checkpoint and restarts its iteration clock after an evaluation.
    Training is not touched; a line not found is an error, not a silent unpatched run."""
    text = (repo / "train.py").read_text()
    save = "torch.save(checkpoint, os.path.join(out_dir, 'ckpt.pt'))"
    after = "    if iter_num == 0 and eval_only:"
    for line in (save, after):
        if text.count(line) != 1:
            sys.exit(f"{repo / 'train.py'}: expected the line {line.strip()!r} once; this "
                     f"script patches a copy there (another nanoGPT version?)")
    text = text.replace(save, "torch.save(checkpoint, os.path.join(out_dir, "
                              "f'ckpt-{iter_num}.pt'))")
    # still inside the evaluation's `if`: the next iteration's time starts after it
    text = text.replace(after, "        t0 = time.time()\n" + after)
    shutil.copy(repo / "model.py", work / "model.py")
    path = work / "train_kept.py"
    path.write_text(text)
    return path


def nanogpt_side(repo: Path, work: Path, text_file: Path, s: dict, threads: int, val_text: str,
                 dtype: str | None = None):
    """nanoGPT's run: ([(train seconds, iteration, held-out loss)] per kept checkpoint, the
    training seconds of all ``iters`` steps)."""
    out = work / "out-nanogpt"
    shutil.rmtree(out, ignore_errors=True)
    nanogpt_prepare(repo, work, text_file, threads)
    train = patched_train(repo, work)
    flags = [f"--out_dir={out}", f"--device={s['device']}", f"--compile={s['compile']}",
             "--eval_iters=20", "--log_interval=1", f"--block_size={s['block']}",
             f"--batch_size={s['batch']}", f"--n_layer={s['layers']}", f"--n_head={s['heads']}",
             f"--n_embd={s['width']}", f"--max_iters={s['iters']}",
             f"--lr_decay_iters={s['iters']}", f"--dropout={s['dropout']}",
             f"--learning_rate={s['lr']}", f"--min_lr={s['min_lr']}",
             f"--warmup_iters={s['warmup']}", f"--eval_interval={s['every']}",
             "--always_save_checkpoint=True", "--dataset=corpus"]
    if dtype:
        flags.append(f"--dtype={dtype}")
    _, log = run([sys.executable, str(train),
                  str(repo / "config" / "train_shakespeare_char.py"), *flags], work, threads)
    dt = nanogpt_iteration_seconds(log)
    curve = []
    for ckpt in sorted(out.glob("ckpt-*.pt"), key=lambda p: int(p.stem.split("-")[1])):
        it = int(ckpt.stem.split("-")[1])  # the weights after iterations 0 .. it-1
        seconds = sum(dt[i] for i in range(it))
        curve.append((seconds, it, nanogpt_val_loss(repo, ckpt, work, val_text, s["block"])))
    return curve, sum(dt[i] for i in range(s["iters"]))


def attnlab_flags(s: dict, steps: int, every: int, threads: int) -> list[str]:
    """``attnlab train lm``'s flags for nanoGPT's shape at ``--recipe fast``, validating every
    ``every`` steps over all held-out windows."""
    flags = ["--recipe", "fast", "--model-dim", str(s["width"]), "--num-heads", str(s["heads"]),
             "--num-layers", str(s["layers"]), "--dim-feedforward", str(4 * s["width"]),
             "--block-size", str(s["block"]), "--batch-size", str(s["batch"]),
             "--max-steps", str(steps),
             "--val-every", str(every), "--val-batches", "100000", "--threads", str(threads)]
    if s["compile"]:
        flags.append("--compile")
    if s["device"] == "cuda":  # nanoGPT's --dtype bfloat16 there
        flags += ["--precision", "bf16-mixed"]
    return flags


def attnlab_side(work: Path, name: str, text_file: Path, flags: list[str], threads: int,
                 val_text: str, block: int):
    """One ``attnlab train lm`` run: (its run directory, its validation curve, the
    evaluator's loss of its final model)."""
    out = work / f"attnlab-{name}"
    shutil.rmtree(out, ignore_errors=True)
    run([sys.executable, "-m", "attnlab", "train", "lm", "--data", str(text_file), "--out",
         str(out), *flags], work, threads)
    return out, loss_curve(out / "logs" / "metrics.csv"), attnlab_val_loss(out, val_text, block)


def plot(path: Path, curves: dict[str, list[tuple[float, float]]], target: float,
         title: str) -> None:
    """Held-out loss against training seconds, one line per side, the target dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, points in curves.items():
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3,
                label=label)
    ax.axhline(target, color="grey", linestyle="--", linewidth=1,
               label=f"target: nanoGPT's final loss {target:.4f}")
    ax.set_xlabel("training seconds (validation excluded)")
    ax.set_ylabel("held-out loss (nats per character)")
    ax.set_yscale("log")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_curves(path: Path, curves: dict[str, list[tuple[float, float]]]) -> None:
    """The plotted points as CSV (side, train_seconds, val_loss), for the notebook."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["side", "train_seconds", "val_loss"])
        for side, points in curves.items():
            w.writerows([side, f"{t:.3f}", f"{loss:.5f}"] for t, loss in points)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nanogpt", type=Path, default=os.environ.get("NANOGPT"),
                    help="a nanoGPT checkout (default: $NANOGPT)")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--chars", type=int, default=1_160_000)
    ap.add_argument("--corpus", choices=["numbers", "stdlib"], default="numbers")
    ap.add_argument("--attnlab-steps", type=int, default=400,
                    help="attnlab's --max-steps (its schedule's length)")
    ap.add_argument("--every", type=int, default=25, help="attnlab's steps between validations")
    ap.add_argument("--nanogpt-every", type=int,
                    help="nanoGPT's iterations between evaluations (default: the recipe's 250)")
    ap.add_argument("--ablate", action="store_true", help="also one run per ABLATIONS row")
    ap.add_argument("--plot", type=Path, help="write the loss-vs-time PNG here (and a .csv)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: a tiny shape")
    args = ap.parse_args()
    s = dict(QUICK if args.quick else SHAPES[args.shape])
    if args.quick:
        args.chars, args.attnlab_steps, args.every = 60_000, 30, 10
    if args.nanogpt_every:
        s["every"] = args.nanogpt_every
    if args.nanogpt is None:
        print("skipped: no nanoGPT checkout; give --nanogpt DIR or set NANOGPT")
        return
    args.nanogpt = Path(args.nanogpt).resolve()
    if not (args.nanogpt / "train.py").is_file():
        sys.exit(f"--nanogpt {args.nanogpt}: no train.py there (a nanoGPT checkout)")
    load = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="attnlab-ttl-") as tmp:
        work = Path(tmp)
        text_file = work / "corpus.txt"
        text = write_corpus(text_file, args.chars, args.corpus)
        val_text = text[int(len(text) * 0.9):]  # both hold out the last 10%
        theirs, their_seconds = nanogpt_side(args.nanogpt, work, text_file, s, args.threads,
                                             val_text, "bfloat16" if s["compile"] else None)
        target = theirs[-1][2]
        print(f"nanoGPT: {s['iters']} iterations in {their_seconds:.1f} s of training; "
              f"held-out loss {target:.4f} (the target)", flush=True)
        flags = attnlab_flags(s, args.attnlab_steps, args.every, args.threads)
        rows = {"attnlab --recipe fast": []}
        if args.ablate:
            rows.update({name: extra for name, extra in ABLATIONS.items()})
        results = {}
        for name, extra in rows.items():
            out, curve, final = attnlab_side(work, str(len(results)), text_file,
                                             flags + extra, args.threads, val_text, s["block"])
            reached = time_to_loss(out / "logs" / "metrics.csv", target)
            results[name] = (curve, final, reached)
            when = (f"{reached[0]:.1f} s (step {reached[1]})" if reached
                    else "not reached")
            print(f"{name}: target at {when}; final held-out loss {final:.4f} (the run's own "
                  f"val_loss {curve[-1][2]:.4f}, differs by {abs(final - curve[-1][2]):.1e}); "
                  f"{curve[-1][0]:.1f} s for {curve[-1][1]} steps", flush=True)
    print(f"\n{started}, --shape {'quick' if args.quick else args.shape}, {len(text):,} "
          f"characters of {args.corpus}, threads {args.threads}; load average {load[0]:.2f} at "
          f"the start, {os.getloadavg()[0]:.2f} at the end")
    fast = results["attnlab --recipe fast"]
    print(f"{'side':40s} {'time-to-loss s':>14s} {'vs nanoGPT':>10s} {'final loss':>10s}")
    print(f"{'nanoGPT (its recipe, to its end)':40s} {their_seconds:14.1f} {1.0:10.2f} "
          f"{target:10.4f}")
    for name, (curve, final, reached) in results.items():
        t = f"{reached[0]:14.1f} {reached[0] / their_seconds:10.2f}" if reached else \
            f"{'not reached':>14s} {'-':>10s}"
        print(f"{name:40s} {t} {final:10.4f}")
    if args.plot:
        curves = {"nanoGPT": [(t, loss) for t, _, loss in theirs],
                  "attnlab --recipe fast": [(t, loss) for t, _, loss in fast[0]]}
        plot(args.plot, curves, target,
             f"{s['layers']} layers x {s['width']}, block {s['block']}: nanoGPT's recipe "
             f"({s['iters']} it.) vs attnlab --recipe fast")
        write_curves(args.plot.with_suffix(".csv"), curves)
        print(f"wrote {args.plot} and {args.plot.with_suffix('.csv')}")


if __name__ == "__main__":
    main()
