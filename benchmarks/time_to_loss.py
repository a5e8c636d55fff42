"""Time to nanoGPT's held-out loss: nanoGPT's recipe against ``attnlab train lm --recipe fast``.

    python -m benchmarks.time_to_loss --nanogpt /somewhere/nanoGPT [--threads 1] [--shape cpu]
                                      [--nanogpt-from CSV] [--seeds 42 7]
                                      [--attnlab-steps 300] [--every 25] [--ablate]
                                      [--same-flags]
                                      [--attnlab-shape LAYERSxWIDTHxHEADS]
                                      [--plot docs/images/time_to_loss.png] [--quick]

(``NANOGPT=DIR`` instead of ``--nanogpt``; without either it prints why it skips.)

The target is nanoGPT's held-out loss at the end of its own recipe. The corpus is
``benchmarks.nanogpt.write_corpus``'s (1.16 M characters of sentences about numbers, by
default); both sides hold out its last 10%, and one evaluator scores every model on those
characters: ``benchmarks.nanogpt.windows_loss``, non-overlapping block-long windows, each model
with its own character ids.

Time-to-loss = steps to the target x seconds per step. The steps do not depend on the
machine's load (a seed fixes them); the seconds do, and on a shared machine the load moves
within seconds. So the seconds per step of both sides are timed in this one process, in
turns (``step_seconds``: two steps of nanoGPT's, two of attnlab's, over and over, the median
of each), and each side's time is its steps times its seconds per step. The two runs'
own clocks (wall seconds of training, validation excluded) are printed too, for reference.

- **nanoGPT**: its ``prepare.py`` and ``train.py`` with the recipe's flags (``--shape cpu``: the
  README's CPU recipe, 4 layers x 128, block 64, batch 12, lr 1e-3 to 1e-4 by cosine over
  ``--iters`` 1,000, warm-up 100, no dropout; ``--shape gpu``: shakespeare-char's, 6 x 384,
  block 256, batch 64, dropout 0.2, 5,000 iterations, bf16, compiled). It runs a copy of
  ``train.py`` with two lines changed, neither of which touches training: each evaluation's
  checkpoint is kept (``ckpt-ITER.pt``, not one ``ckpt.pt`` overwritten) and its clock restarts
  after an evaluation, so the ``time`` it logs per iteration is training only. It evaluates
  every ``--every`` iterations (the recipe's 250 on the CPU) with its own 20 random batches,
  which draw from its random stream: the training batches differ from a run evaluating every
  250, as a seed would. Its curve: this script's loss of each kept checkpoint. Its steps to
  the target are its iterations (the target is its last checkpoint's loss).
  ``--nanogpt-from CSV`` reads that curve from an earlier run's ``--plot`` CSV instead of
  training nanoGPT again (its step is still timed here).
- **attnlab**: ``attnlab train lm --recipe fast`` with the recipe's shape (SwiGLU's
  ``--dim-feedforward`` is ``swiglu_width``: GPT-2's parameters), ``--max-steps``
  ``--attnlab-steps``, a validation every ``--every`` steps over every window of the held-out
  split (``--val-batches`` large enough: the same windows as the evaluator), once per
  ``--seeds``. Its steps to the target: the first validation at or below it
  (``time_to_loss``), so they are exact to ``--every``. At the end the evaluator scores its
  final model too, and the script prints the difference from the run's own last
  ``val_loss`` (they should agree to float rounding: the two measure the same thing).
  ``--attnlab-shape`` trains attnlab at another size than nanoGPT's (layers x width x heads,
  e.g. ``2x96x3``; SwiGLU's width follows the width): a run of a few hundred steps sees far
  fewer tokens than a model of nanoGPT's size could use, so a smaller one may reach the target
  in more steps but less time. nanoGPT keeps its recipe's shape either way.
- **The step**, timed on the CPU shapes: nanoGPT's model and its optimiser as ``train.py``
  builds them (``nanogpt_step``), attnlab's as ``attnlab train`` builds them from the same
  flags (``attnlab_step``), forward, loss, backward, clipping, update, on one fixed batch
  each; data loading and the loops around the step are not timed on either side.

On ``--shape gpu`` (CUDA only: without it the script says so and stops) the step is not
timed in this process; the times are each run's own training clock instead, compile included
on both sides (nanoGPT's logged iteration times, whose first holds its compile; attnlab's
``train_seconds`` + ``compile_seconds``), on a GPU no other work shares.

The table (and ``--plot``'s PNG and CSV) is printed as soon as the ``--recipe fast`` seeds are
done, and again at the end: a run cut short in the rows after them (a GPU call's cap) still
leaves the time-to-loss. Each attnlab run's line gives its compile seconds; its checkpoints
are saved at its end only (``--checkpoint-every`` beyond its steps), off its clock, as
nanoGPT's are. On the GPU shape the table's times count compile on both sides, and a line
per run gives the ratio without compile too (nanoGPT's compile: its first iteration's time
beyond its median iteration's).

``--same-flags`` then trains attnlab once more with nanoGPT's own recipe (its flags as
``benchmarks.gpu_lm`` gives them, those attnlab has) for nanoGPT's iterations, validating when
nanoGPT evaluates, and prints its final held-out loss beside nanoGPT's: the loss at equal
iterations, from the same nanoGPT run (on the GPU: nanoGPT's 5,000 iterations, its own
recipe on both sides).

``--ablate`` then trains attnlab once more per row of ``ABLATIONS`` (the recipe with one piece
put back to nanoGPT's), with the same steps and validations and the first seed, and times each
row's step in the same turns: which pieces buy what, in steps and in seconds per step.

Both sides use ``--threads`` threads (``OMP_NUM_THREADS`` for the runs, attnlab also
``--threads``). ``--plot`` writes held-out loss against steps x seconds per step for nanoGPT
and the first seed (PNG, and the points as CSV).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.nanogpt import (attnlab_val_loss, nanogpt_classes, nanogpt_prepare,
                                nanogpt_val_loss, run, write_corpus)

# nanoGPT's recipes: the README's CPU one, and shakespeare-char's for a GPU
SHAPES = {
    "cpu": dict(layers=4, heads=4, width=128, block=64, batch=12, lr=1e-3, min_lr=1e-4,
                warmup=100, iters=1000, dropout=0.0, every=250, device="cpu", compile=False),
    "gpu": dict(layers=6, heads=6, width=384, block=256, batch=64, lr=1e-3, min_lr=1e-4,
                warmup=100, iters=5000, dropout=0.2, every=250, device="cuda", compile=True),
}
QUICK = dict(layers=2, heads=2, width=32, block=32, batch=8, lr=1e-3, min_lr=1e-4, warmup=5,
             iters=40, dropout=0.0, every=10, device="cpu", compile=False)

SAME = "attnlab at nanoGPT's flags"  # --same-flags' row
STEPS = 300  # --attnlab-steps: where the recipe reached the target at the CPU shape (RESULTS.md)

# --ablate: the recipe with one piece put back to nanoGPT's (flags given after --recipe fast,
# which win over the recipe's); a function of the shape where the flag is a size
ABLATIONS = {
    "schedule: nanoGPT's cosine to min-lr": ["--schedule", "cosine", "--min-lr", "1e-4",
                                             "--warmup", "100"],
    "learning rate: nanoGPT's 1e-3": ["--lr", "1e-3"],
    "qk-norm off": ["--no-qk-norm"],
    "positions: learned (no RoPE)": ["--positional", "learned"],
    "feed-forward: GELU MLP of 4·D (no SwiGLU)":
        lambda s: ["--ff", "mlp", "--dim-feedforward", str(4 * s["width"])],
    "feed-forward: SwiGLU of 4·D (1.5x the matrices)":
        lambda s: ["--dim-feedforward", str(4 * s["width"])],
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
    training seconds of all ``iters`` steps, the seconds its first iteration took beyond the
    median iteration: its compile, which those training seconds hold)."""
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
    return (curve, sum(dt[i] for i in range(s["iters"])),
            max(dt[0] - statistics.median(dt.values()), 0.0))


def swiglu_width(width: int) -> int:
    """SwiGLU's feed-forward width with the parameters (and multiply-adds) of GPT-2's 4·D MLP:
    three matrices of 8/3·D where GPT-2 has two of 4·D (Llama's rule), rounded up to a
    multiple of 8.

    Examples:
        >>> swiglu_width(128), swiglu_width(384)
        (344, 1024)
    """
    return -(-8 * width // 3 // 8) * 8


def attnlab_shape(s: dict, text: str | None) -> dict:
    """Shape ``s`` with attnlab's layers, width and heads from ``--attnlab-shape`` ``text``
    (``LAYERSxWIDTHxHEADS``); ``s`` itself without one. A malformed value, or a width the
    heads do not divide, is refused here, before anything is trained.

    Examples:
        >>> a = attnlab_shape(SHAPES["cpu"], "2x96x3")
        >>> a["layers"], a["width"], a["heads"], a["block"]
        (2, 96, 3, 64)
    """
    if text is None:
        return s
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        sys.exit(f"--attnlab-shape {text}: expected LAYERSxWIDTHxHEADS, three positive "
                 f"integers (e.g. 2x96x3)")
    layers, width, heads = map(int, parts)
    if width % heads:
        sys.exit(f"--attnlab-shape {text}: the width {width} is not a multiple of the "
                 f"heads {heads}")
    return dict(s, layers=layers, width=width, heads=heads)


def attnlab_flags(s: dict, steps: int, every: int, threads: int) -> list[str]:
    """``attnlab train lm``'s flags for shape ``s`` at ``--recipe fast``, validating every
    ``every`` steps over all held-out windows."""
    flags = ["--recipe", "fast", "--model-dim", str(s["width"]), "--num-heads", str(s["heads"]),
             "--num-layers", str(s["layers"]), "--dim-feedforward", str(swiglu_width(s["width"])),
             "--block-size", str(s["block"]), "--batch-size", str(s["batch"])]
    return flags + run_flags(s, steps, every, threads)


def nanogpt_recipe_flags(s: dict, threads: int) -> list[str]:
    """``attnlab train lm``'s flags for nanoGPT's own recipe at shape ``s`` (the settings of
    ``benchmarks.gpu_lm.recipe`` that attnlab has), for nanoGPT's iterations, validating
    when nanoGPT evaluates: ``--same-flags``, the loss at equal iterations."""
    from benchmarks.gpu_lm import as_flags, recipe
    from benchmarks.gpu_lm import attnlab_flags as settable

    have = settable()
    return (as_flags({k: v for k, v in recipe(s).items() if k in have}) +
            run_flags(s, s["iters"], s["every"], threads))


def run_flags(s: dict, steps: int, every: int, threads: int) -> list[str]:
    """The flags every attnlab run here takes: its steps, a validation every ``every`` steps
    over all held-out windows, threads, and the shape's device settings."""
    flags = ["--max-steps", str(steps), "--val-every", str(every), "--val-batches", "100000",
             "--threads", str(threads),
             # nanoGPT's saves are off its clock; attnlab's every 500 steps would be on its
             # own: none until the run's end, which both sides leave off their clocks
             "--checkpoint-every", str(steps + 1)]
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


def compile_seconds(run_dir: Path) -> float:
    """``compile_seconds`` of an attnlab run's metrics.json (0 for a run not compiled): the
    first compiled step, which ``train_seconds`` leaves out and nanoGPT's first iteration
    time holds."""
    return json.loads((run_dir / "metrics.json").read_text()).get("compile_seconds") or 0.0


def nanogpt_step(repo: Path, s: dict, vocab: int):
    """One training step of nanoGPT's ``GPT`` at shape ``s``, as its ``train.py`` takes it on
    a CPU: forward with targets, backward, clipping to 1.0, the AdamW of its
    ``configure_optimizers`` (weight decay 0.1, betas 0.9/0.99), gradients dropped. One
    fixed random batch: the data loading of neither side is timed."""
    import contextlib
    import io

    import torch

    GPT, GPTConfig = nanogpt_classes(repo)
    torch.manual_seed(0)
    with contextlib.redirect_stdout(io.StringIO()):  # its parameter count, its optimizer note
        model = GPT(GPTConfig(block_size=s["block"], vocab_size=vocab, n_layer=s["layers"],
                              n_head=s["heads"], n_embd=s["width"], dropout=s["dropout"],
                              bias=False))
        opt = model.configure_optimizers(0.1, s["lr"], (0.9, 0.99), "cpu")
    x, y = (torch.randint(0, vocab, (s["batch"], s["block"])) for _ in range(2))

    def step():
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def attnlab_step(text_file: Path, flags: list[str], vocab: int):
    """One training step of what ``attnlab train lm --data text_file FLAGS`` trains, built by
    attnlab's own code from those flags (the recipe, flags over it, the model, the optimiser
    groups, the optimiser and its schedule) and taken as ``engine.Loop.train_step`` takes it
    in float32 on one CPU process: the task's loss, backward, clipping, the update, the
    schedule. One fixed random batch of the run's --batch-size x --block-size."""
    import contextlib
    import io

    import torch

    from attnlab.cli import build_parser
    from attnlab.commands.train import build_config
    from attnlab.tasks.lm.runtime import build_model
    from attnlab.training.hardware import auto_precision
    from attnlab.training.lm import LMModule
    from attnlab.training.module import make_optimizer, optimizer_groups

    args = build_parser().parse_args(["train", "lm", "--data", str(text_file), "--out",
                                      str(text_file.parent / "unused"), *flags])
    given = {k: v for k, v in vars(args).items() if k not in ("func", "command")}
    with contextlib.redirect_stderr(io.StringIO()):  # the recipe's "used instead" line
        cfg = build_config("lm", given).derive(vocab_size=vocab)
    precision = str(cfg.precision)
    if precision == "auto":  # what the run resolves it to on this CPU
        precision = auto_precision("cpu", int(cfg.model_dim))
    if precision not in ("32", "bf16-mixed"):
        sys.exit(f"attnlab_step: --precision {precision} is not timed here (32, bf16-mixed)")
    steps = int(cfg.max_steps)
    torch.manual_seed(0)
    module = LMModule(build_model(cfg), cfg, steps)
    opt, schedule = make_optimizer(optimizer_groups(module, cfg), cfg,
                                   model_dim=int(cfg.model_dim), max_steps=steps)
    params = [p for group in opt.param_groups for p in group["params"]]
    x, y = (torch.randint(0, vocab, (int(cfg.batch_size), int(cfg.block_size)))
            for _ in range(2))
    clip = float(cfg.grad_clip or 0.0)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16-mixed"):
            loss, _ = module.loss((x, y))
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip, error_if_nonfinite=False)
        opt.step()
        opt.zero_grad(set_to_none=True)
        schedule.step()
    return step


def step_seconds(steps: dict, threads: int, repeats: int, chunk: int = 2) -> dict[str, float]:
    """Median seconds per step of each of ``steps`` (name -> step function), all in this
    process with ``threads`` threads, in turns: ``chunk`` steps of the first, ``chunk`` of the
    second, ..., ``repeats`` times over. On a shared machine the load moves within seconds;
    turns that short put every side under the same load, and the median drops the turns a
    burst of someone else's work fell into."""
    import torch

    torch.set_num_threads(threads)
    for step in steps.values():  # warm-up: first calls allocate
        for _ in range(3):
            step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(chunk):
                step()
            times[name].append((time.perf_counter() - start) / chunk)
    return {name: statistics.median(t) for name, t in times.items()}


def plot(path: Path, curves: dict[str, list[tuple[float, float]]], target: float,
         title: str, xlabel: str) -> None:
    """Held-out loss against training seconds (``xlabel`` says which), one line per side, the
    target dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, points in curves.items():
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3,
                label=label)
    ax.axhline(target, color="grey", linestyle="--", linewidth=1,
               label=f"target: nanoGPT's final loss {target:.4f}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("held-out loss (nats per character)")
    ax.set_yscale("log")
    for set_formatter in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
        set_formatter(FormatStrFormatter("%g"))  # 1.4, not 1.4×10⁰, on the log axis
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_curves(path: Path, curves: dict[str, list[tuple[int, float, float]]]) -> None:
    """The plotted points as CSV (side, step, train_seconds, val_loss; the seconds are the
    step times the side's seconds per step), for the notebook and for ``--nanogpt-from``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["side", "step", "train_seconds", "val_loss"])
        for side, points in curves.items():
            w.writerows([side, step, f"{t:.3f}", f"{loss:.5f}"] for step, t, loss in points)


def read_nanogpt_curve(path: Path) -> list[tuple[int, float]]:
    """(iteration, held-out loss) of the ``nanoGPT`` rows of a CSV ``write_curves`` wrote."""
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["side"] == "nanoGPT"]
    if not rows or "step" not in rows[0]:
        sys.exit(f"--nanogpt-from {path}: no nanoGPT rows with a step column (a CSV that "
                 f"--plot wrote)")
    return [(int(r["step"]), float(r["val_loss"])) for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nanogpt", type=Path, default=os.environ.get("NANOGPT"),
                    help="a nanoGPT checkout (default: $NANOGPT)")
    ap.add_argument("--nanogpt-from", type=Path,
                    help="nanoGPT's curve from an earlier run's --plot CSV instead of training "
                         "it again (its last row's loss is the target); its step is still timed")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--chars", type=int, default=1_160_000)
    ap.add_argument("--corpus", choices=["numbers", "stdlib"], default="numbers")
    ap.add_argument("--attnlab-steps", type=int, default=STEPS,
                    help="attnlab's --max-steps (its schedule's length)")
    ap.add_argument("--every", type=int, default=25, help="attnlab's steps between validations")
    ap.add_argument("--attnlab-shape", metavar="LAYERSxWIDTHxHEADS",
                    help="attnlab's model size, e.g. 2x96x3 (default: nanoGPT's shape)")
    ap.add_argument("--nanogpt-every", type=int,
                    help="nanoGPT's iterations between evaluations (default: the recipe's 250)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[42],
                    help="attnlab's --seed, one run each (steps to the target per seed)")
    ap.add_argument("--repeats", type=int, default=15,
                    help="turns of the step timing (each side 2 steps a turn)")
    ap.add_argument("--ablate", action="store_true", help="also one run per ABLATIONS row")
    ap.add_argument("--same-flags", action="store_true",
                    help="also attnlab with nanoGPT's own recipe for its iterations (the loss "
                         "at equal iterations), after the --recipe fast runs")
    ap.add_argument("--time-only", action="store_true",
                    help="only time the steps (nanoGPT's, the recipe's, with --ablate each "
                         "row's): no training")
    ap.add_argument("--plot", type=Path, help="write the loss-vs-time PNG here (and a .csv)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: a tiny shape")
    args = ap.parse_args()
    s = dict(QUICK if args.quick else SHAPES[args.shape])
    if args.quick:
        args.chars, args.attnlab_steps, args.every, args.repeats = 60_000, 30, 10, 3
    if args.nanogpt_every:
        s["every"] = args.nanogpt_every
    a = attnlab_shape(s, args.attnlab_shape)
    if s["device"] == "cuda":
        import torch

        if not torch.cuda.is_available():
            print(f"skipped: --shape {args.shape} trains on a CUDA device and there is none here "
                  f"(--shape cpu runs on this CPU)")
            return
    if args.nanogpt is None:
        print("skipped: no nanoGPT checkout; give --nanogpt DIR or set NANOGPT")
        return
    args.nanogpt = Path(args.nanogpt).resolve()
    if not (args.nanogpt / "train.py").is_file():
        sys.exit(f"--nanogpt {args.nanogpt}: no train.py there (a nanoGPT checkout)")
    if args.time_only and s["device"] != "cpu":
        sys.exit(f"--time-only: the step is timed on the CPU shapes only, not --shape "
                 f"{args.shape}")
    fast = "attnlab --recipe fast" + ("" if a is s else f" {args.attnlab_shape}")
    load = [os.getloadavg()[0]]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="attnlab-ttl-") as tmp:
        work = Path(tmp)
        text_file = work / "corpus.txt"
        text = write_corpus(text_file, args.chars, args.corpus)
        val_text = text[int(len(text) * 0.9):]  # both hold out the last 10%
        their_clock = None  # nanoGPT's own training seconds at each kept iteration
        if args.time_only:
            theirs, their_wall = [(s["iters"], float("nan"))], None  # no target needed
            their_compile = None
        elif args.nanogpt_from:
            theirs = read_nanogpt_curve(args.nanogpt_from)
            their_wall = their_compile = None
            print(f"nanoGPT: its curve from {args.nanogpt_from} (not trained again)")
        else:
            curve, their_wall, their_compile = nanogpt_side(args.nanogpt, work, text_file, s, args.threads,
                                             val_text, "bfloat16" if s["compile"] else None)
            theirs = [(it, loss) for _, it, loss in curve]
            their_clock = {it: seconds for seconds, it, _ in curve}
            print(f"nanoGPT: {s['iters']} iterations in {their_wall:.1f} s of training",
                  flush=True)
        target = theirs[-1][1]
        if not args.time_only:
            print(f"target: nanoGPT's held-out loss after {theirs[-1][0]} iterations, "
                  f"{target:.4f}", flush=True)
        flags = attnlab_flags(a, args.attnlab_steps, args.every, args.threads)
        rows = {fast: flags}  # each row's whole flags
        if args.ablate:
            rows.update({name: flags + (extra(a) if callable(extra) else extra)
                         for name, extra in ABLATIONS.items()})
        if args.same_flags:
            rows[SAME] = nanogpt_recipe_flags(s, args.threads)
        vocab = len(set(text))
        timed = s["device"] == "cpu"
        cost = None
        if timed:
            steps = {"nanoGPT": nanogpt_step(args.nanogpt, s, vocab)}
            steps.update({name: attnlab_step(text_file, row, vocab)
                          for name, row in rows.items()})
            cost = step_seconds(steps, args.threads, args.repeats)
            load.append(os.getloadavg()[0])
            print("seconds per step, in this process, in turns: " + ", ".join(
                f"{name} {c * 1e3:.1f} ms ({c / cost['nanoGPT']:.2f}x)"
                for name, c in cost.items()), flush=True)
            if args.time_only:
                print(f"load average {' / '.join(f'{x:.2f}' for x in load)} (start / end)")
                return
        results = {}
        nanogpt = dict(theirs=theirs, clock=their_clock, wall=their_wall,
                       compile=their_compile, cost=cost)

        def report():  # the table, and the plot and its CSV, of the runs done so far
            load_now = [*load, os.getloadavg()[0]]
            print(f"\n{started}, --shape {'quick' if args.quick else args.shape}, "
                  f"{len(text):,} characters of {args.corpus}, threads {args.threads}; load "
                  f"average {' / '.join(f'{x:.2f}' for x in load_now)} (start"
                  f"{' / after the step timing' if timed else ''} / now)")
            table(fast, nanogpt, results)
            if args.plot and (timed or their_clock):
                write_plot(args.plot, s, a, fast, args.seeds[0], nanogpt,
                           results[fast, args.seeds[0]])

        for name, row in rows.items():
            for seed in args.seeds if name == fast else args.seeds[:1]:
                out, curve, final = attnlab_side(work, f"{len(results)}", text_file,
                                                 row + ["--seed", str(seed)],
                                                 args.threads, val_text, s["block"])
                reached = time_to_loss(out / "logs" / "metrics.csv", target)
                compiled = compile_seconds(out)
                results[name, seed] = (curve, final, reached, compiled)
                when = (f"at step {reached[1]} ({reached[0]:.1f} s of training)" if reached
                        else "not reached")
                print(f"{name}, seed {seed}: target {when}; final held-out loss "
                      f"{final:.4f} (the run's own val_loss {curve[-1][2]:.4f}, differs by "
                      f"{abs(final - curve[-1][2]):.1e}); {curve[-1][0]:.1f} s for "
                      f"{curve[-1][1]} steps, compile {compiled:.1f} s", flush=True)
                if name == SAME:
                    print(f"loss at equal iterations ({curve[-1][1]:,}): {SAME} {final:.4f}, "
                          f"nanoGPT {target:.4f} (attnlab / nanoGPT {final / target:.3f})",
                          flush=True)
            if name == fast and len(rows) > 1:
                # the rows after these may be cut short (a GPU call's cap): what the recipe's
                # seeds measured is printed and written now, and again at the end
                report()
        report()


def table(fast: str, nanogpt: dict, results: dict) -> None:
    """The time to the target of each run in ``results`` against nanoGPT's (``nanogpt``:
    its curve ``theirs``, ``wall`` and ``compile`` seconds of its own clock, and ``cost``,
    the seconds per step timed here, None on a shape not timed here)."""
    cost, base = nanogpt["cost"], nanogpt["wall"]
    timed = cost is not None
    their_steps = nanogpt["theirs"][-1][0]
    # the time to the target: steps x the seconds per step timed here, or on a shape not timed
    # here (the GPU's) each run's own clock with its compile (see the docstring); "wall s" is
    # each run's own clock, compile included on both sides
    print(f"{'side':48s} {'seed':>4s} {'steps':>6s} {'ms/step':>8s} "
          f"{'steps x s' if timed else 'own s':>9s} {'vs nanoGPT':>10s} {'final loss':>10s} "
          f"{'wall s':>7s}")
    if timed:
        base = their_steps * cost["nanoGPT"]

    def line(name, seed, steps_, c, final, wall, own=None):
        t = steps_ * c if steps_ is not None and c is not None else own

        def cell(value, width, fmt):  # "-": not reached, not timed, not run here
            return f"{'-' if value is None else format(value, fmt):>{width}}"
        print(f"{name:48s} {seed:>4} {cell(steps_, 6, 'd')} {cell(c and c * 1e3, 8, '.1f')} "
              f"{cell(t, 9, '.1f')} {cell(t and base and t / base, 10, '.3f')} "
              f"{final:10.4f} {cell(wall, 7, '.1f')}")

    line("nanoGPT (its recipe, to its end)", "-", their_steps,
         cost["nanoGPT"] if timed else None, nanogpt["theirs"][-1][1], nanogpt["wall"],
         own=base)
    for (name, seed), (curve, final, reached, compiled) in results.items():
        line(name, seed, reached[1] if reached else None, cost[name] if timed else None,
             final, reached[0] + compiled if reached else None,
             own=reached[0] + compiled if reached and not timed else None)
    if timed or not base or nanogpt["compile"] is None:
        return
    # a compile's seconds depend on the machine's compiler cache, not on the recipe: the
    # ratio of the training alone too (nanoGPT's compile: its first iteration beyond the median)
    their_train = base - nanogpt["compile"]
    for (name, seed), (_, _, reached, compiled) in results.items():
        if reached:
            print(f"{name}, seed {seed}: to the target {reached[0] + compiled:.1f} s with "
                  f"compile ({compiled:.1f} s), {reached[0]:.1f} s without; nanoGPT "
                  f"{base:.1f} s with ({nanogpt['compile']:.1f} s), {their_train:.1f} s "
                  f"without; attnlab / nanoGPT {(reached[0] + compiled) / base:.3f} with "
                  f"compile, {reached[0] / their_train:.3f} without")


def write_plot(path: Path, s: dict, a: dict, fast: str, seed: int, nanogpt: dict,
               result: tuple) -> None:
    """``--plot``'s PNG and its CSV: nanoGPT's curve and ``fast``'s first seed's ``result``."""
    ours, _, _, compiled = result
    cost, theirs = nanogpt["cost"], nanogpt["theirs"]
    timed = cost is not None
    their_steps = theirs[-1][0]
    if timed:
        curves = {"nanoGPT": [(it, it * cost["nanoGPT"], loss) for it, loss in theirs],
                  fast: [(st, st * cost[fast], loss) for _, st, loss in ours]}
    else:
        curves = {"nanoGPT": [(it, nanogpt["clock"][it], loss) for it, loss in theirs],
                  fast: [(st, seconds + compiled, loss) for seconds, st, loss in ours]}
    title = (f"{s['layers']} layers x {s['width']}, block {s['block']}: nanoGPT's recipe "
             f"({their_steps} it.) vs {fast} (seed {seed})" if a is s else  # both sizes:
             f"block {s['block']}: nanoGPT {s['layers']}x{s['width']}x{s['heads']}, "
             f"{their_steps} it. vs {fast}, seed {seed}")  # a title that fits the figure
    plot(path, {k: [(t, loss) for _, t, loss in v] for k, v in curves.items()},
         theirs[-1][1], title, "training seconds: steps x seconds per step, both timed in one "
         "process" if timed else "training seconds, each run's own clock, compile included")
    write_curves(path.with_suffix(".csv"), curves)
    print(f"wrote {path} and {path.with_suffix('.csv')}", flush=True)


if __name__ == "__main__":
    main()
