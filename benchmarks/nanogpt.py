"""nanoGPT's CPU recipe against ``attnlab train lm``, whole runs, same corpus, same threads.

    git clone https://github.com/karpathy/nanoGPT /somewhere/nanoGPT    # outside this project
    python -m benchmarks.nanogpt --nanogpt /somewhere/nanoGPT [--threads 1] [--rounds 2]
                                 [--corpus numbers|stdlib] [--seeds 1 2]
                                 [--iters 1000] [--variants fp32 bf16 default] [--quick]

(``NANOGPT=/somewhere/nanoGPT`` instead of ``--nanogpt``; without either it prints why it
skips, so ``python -m benchmarks`` still runs the rest.)

The corpus is made here: ``--chars`` characters (default 1.16 M) of English sentences about
numbers (``num2words``, fixed seed), so every run sees the same text and nothing is downloaded.
Each round runs, as new processes, in turns:

- **nanoGPT**: its own ``data/shakespeare_char/prepare.py`` on the corpus (a copy next to the
  text, so its download never runs), then ``train.py config/train_shakespeare_char.py`` with the
  README's CPU flags (``--device=cpu --compile=False --eval_iters=20 --log_interval=1
  --block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 --dropout=0.0``),
  ``--max_iters`` = ``--lr_decay_iters`` = ``--iters`` and ``--always_save_checkpoint=True`` (so
  its checkpoint is the last step's);
- **attnlab** (each of ``--variants``: ``fp32``, ``bf16`` = ``--precision bf16-mixed``, ``default``
  = no ``--precision``, lm's ``auto``):
  ``attnlab train lm --data corpus.txt`` with the same shape, batch, learning rate, warm-up and
  steps (``--model-dim 128 --num-heads 4 --num-layers 4 --dim-feedforward 512 --block-size 64
  --batch-size 12 --lr 1e-3 --warmup 100 --dropout 0``), nanoGPT's schedule (``--schedule
  cosine --min-lr 1e-4``: a linear warm-up, then a cosine from the end of the warm-up that
  reaches min_lr = lr/10 as the last step ends, as its ``get_lr`` does at its extra iteration
  ``max_iters``; docs/schedules.md) and nanoGPT's optimiser settings for
  this config (``--weight-decay 0.1 --beta2 0.99 --grad-clip 1.0``: train.py's weight decay
  and clipping, train_shakespeare_char.py's beta2; lm's defaults too, given here so
  that the comparison does not move with them) and its architecture (``--no-bias``: train.py's
  ``bias = False``, no biases in the linear layers nor the LayerNorms), tokenising the text
  itself. What stays
  different: nanoGPT decays its position table too, attnlab does not decay learned positions;
  nanoGPT warms up as ``lr * (it + 1) / (warmup + 1)``, attnlab as ``lr * step / warmup``
  (the course's; its first step at 0), the same line a step apart. Both run eagerly: ``torch.compile`` is not measured here (on this
  CPU it takes minutes to start for each side; ``benchmarks/gpu_lm.py`` compiles both).

First, in this process, the training step alone of both models (same batch, float32 and under
bf16 autocast). Both sides get ``OMP_NUM_THREADS`` = ``--threads`` (attnlab also ``--threads``). The whole-run
time is the wall time of the processes (prepare + train for nanoGPT; one ``train`` for attnlab,
which also tests and draws its figures). Validation loss is then computed here for every final
model on the same text: the corpus' last 10% (both sides hold it out), cut into non-overlapping
65-character windows, each model with its own character ids, mean cross-entropy over every
predicted character (nats). Target: attnlab's float32 whole run <= 0.9x nanoGPT's with a
validation loss no worse.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

SHAPE = dict(block=64, batch=12, layers=4, heads=4, width=128, lr=1e-3, warmup=100)


def write_corpus(path: Path, chars: int, kind: str = "numbers") -> str:
    """About ``chars`` characters of text: ``numbers``, English sentences about sums of numbers
    (seeded); ``stdlib``, the Python standard library's own source (its ``.py`` files in sorted
    order: English comments and docstrings among code; depends on the Python version)."""
    if kind == "stdlib":
        import sysconfig

        parts, size = [], 0
        for file in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
            part = file.read_text(encoding="utf-8", errors="replace")
            parts.append(part)
            size += len(part)
            if size >= chars:
                break
        text = "".join(parts)[:chars]
        path.write_text(text, encoding="utf-8")
        return text
    from num2words import num2words

    rng = random.Random(1234)
    verbs = ["and", "plus", "added to"]
    lines, size = [], 0
    while size < chars:
        a, b = rng.randrange(1, 2000), rng.randrange(1, 2000)
        line = (f"{num2words(a).capitalize()} {rng.choice(verbs)} {num2words(b)} "
                f"{rng.choice(['makes', 'is', 'gives'])} {num2words(a + b)}.\n")
        lines.append(line)
        size += len(line)
    text = "".join(lines)
    path.write_text(text, encoding="utf-8")
    return text


def run(cmd: list[str], cwd: Path, threads: int) -> tuple[float, str]:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    env.pop("ATTNLAB_RUN_DIR", None)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr[-3000:]}")
    return seconds, done.stdout + done.stderr


def nanogpt_prepare(repo: Path, work: Path, text_file: Path, threads: int) -> float:
    """Seconds of nanoGPT's own ``data/shakespeare_char/prepare.py`` run on ``text_file`` as
    ``work/data/corpus`` (a copy next to the text, so its download never runs); ``train.py
    --dataset=corpus`` run in ``work`` then reads it."""
    data = work / "data" / "corpus"
    if data.exists():
        shutil.rmtree(data)
    data.mkdir(parents=True)
    shutil.copy(text_file, data / "input.txt")
    shutil.copy(repo / "data" / "shakespeare_char" / "prepare.py", data / "prepare.py")
    shutil.copy(repo / "configurator.py", work / "configurator.py")  # train.py opens it from cwd
    return run([sys.executable, str(data / "prepare.py")], work, threads)[0]


def nanogpt_classes(repo: Path):
    """nanoGPT's ``GPT`` and ``GPTConfig``, imported from the checkout's ``model.py``."""
    sys.path.insert(0, str(repo))
    try:
        from model import GPT, GPTConfig
    finally:
        sys.path.remove(str(repo))
    return GPT, GPTConfig


def nanogpt_run(repo: Path, work: Path, text_file: Path, iters: int, threads: int):
    """(seconds, checkpoint path, nanoGPT's own last val-loss estimate) of prepare + train."""
    out = work / "out-nanogpt"
    shutil.rmtree(out, ignore_errors=True)
    t_prep = nanogpt_prepare(repo, work, text_file, threads)
    s = SHAPE
    t_train, log = run([sys.executable, str(repo / "train.py"),
                        str(repo / "config" / "train_shakespeare_char.py"), "--dataset=corpus",
                        f"--out_dir={out}", "--device=cpu", "--compile=False", "--eval_iters=20",
                        "--log_interval=1", f"--block_size={s['block']}",
                        f"--batch_size={s['batch']}", f"--n_layer={s['layers']}",
                        f"--n_head={s['heads']}", f"--n_embd={s['width']}",
                        f"--max_iters={iters}", f"--lr_decay_iters={iters}", "--dropout=0.0",
                        f"--eval_interval={min(250, iters)}",  # the recipe's 250; a --quick run's last
                        "--always_save_checkpoint=True"], work, threads)
    estimates = re.findall(r"step (\d+): train loss [\d.]+, val loss ([\d.]+)", log)
    return t_prep + t_train, out / "ckpt.pt", float(estimates[-1][1]) if estimates else None


def attnlab_run(work: Path, text_file: Path, iters: int, threads: int, variant: str,
                seed: int = 42):
    """(seconds, run directory, the run's own val_loss, train_seconds, the --precision it ran) of
    ``attnlab train lm``."""
    out = work / f"attnlab-{variant}-{seed}"
    shutil.rmtree(out, ignore_errors=True)
    s = SHAPE
    cmd = [sys.executable, "-m", "attnlab", "train", "lm", "--data", str(text_file),
           "--out", str(out), "--model-dim", str(s["width"]), "--num-heads", str(s["heads"]),
           "--num-layers", str(s["layers"]), "--dim-feedforward", str(4 * s["width"]),
           "--block-size", str(s["block"]), "--batch-size", str(s["batch"]), "--lr", str(s["lr"]),
           "--warmup", str(s["warmup"]), "--schedule", "cosine", "--min-lr", str(s["lr"] / 10),
           "--dropout", "0", "--max-steps", str(iters),
           "--weight-decay", "0.1", "--beta2", "0.99", "--grad-clip", "1.0", "--no-bias",
           "--threads", str(threads), "--seed", str(seed)]
    if variant != "default":  # default: what a user gets, lm's --precision auto
        cmd += ["--precision", "bf16-mixed" if variant == "bf16" else "32"]
    seconds, _ = run(cmd, work, threads)
    import json

    import yaml

    metrics = json.loads((out / "metrics.json").read_text())
    chosen = yaml.safe_load((out / "config.yaml").read_text()).get("precision")
    return seconds, out, metrics.get("val_loss"), metrics.get("train_seconds"), chosen


def step_times(repo: Path, vocab: int = 65, repeats: int = 5, steps: int = 20) -> dict[str, float]:
    """ms per training step of the two models alone, in this process, same batch: nanoGPT's
    ``GPT`` and attnlab's ``CausalLM`` of the recipe's shape (forward, loss, backward, clipping,
    AdamW), each in float32 and under bf16 autocast; median of ``repeats`` x ``steps``, in turns."""
    import contextlib
    import io

    from attnlab.models import CausalLM

    GPT, GPTConfig = nanogpt_classes(repo)
    s = SHAPE
    torch.manual_seed(0)
    with contextlib.redirect_stdout(io.StringIO()):
        theirs = GPT(GPTConfig(block_size=s["block"], vocab_size=vocab, n_layer=s["layers"],
                               n_head=s["heads"], n_embd=s["width"], dropout=0.0, bias=False))
    ours = CausalLM(vocab, model_dim=s["width"], num_heads=s["heads"], num_layers=s["layers"],
                    dim_feedforward=4 * s["width"], max_len=s["block"], dropout=0.0, bias=False)
    x = torch.randint(0, vocab, (s["batch"], s["block"]))
    y = torch.randint(0, vocab, (s["batch"], s["block"]))

    def trainer(model, loss_of, bf16: bool):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def step():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = loss_of(model)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    def ours_loss(m):
        return F.cross_entropy(m(x).flatten(0, 1).float(), y.flatten())

    fns = {"nanoGPT fp32": trainer(theirs, lambda m: m(x, y)[1], False),
           "attnlab fp32": trainer(ours, ours_loss, False),
           "nanoGPT bf16": trainer(theirs, lambda m: m(x, y)[1], True),
           "attnlab bf16": trainer(ours, ours_loss, True)}
    for fn in fns.values():
        for _ in range(3):
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t = time.perf_counter()
            for _ in range(steps):
                fn()
            times[name].append((time.perf_counter() - t) / steps * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def eval_device() -> str:
    """Where the evaluator scores a model: the GPU when there is one (on the CPU the held-out
    evaluations of a GPU run take minutes while the GPU waits), else the CPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"


@contextlib.contextmanager
def full_float32():
    """Matrix products in full float32 inside, TF32 off: ``gpu_lm`` switches TF32 on for the
    whole process (as nanoGPT's train.py does), and a score must not depend on which benchmark
    ran before it, nor differ between the two sides it compares."""
    flags = (torch.backends.cuda.matmul, torch.backends.cudnn)
    saved = [f.allow_tf32 for f in flags]
    for f in flags:
        f.allow_tf32 = False
    try:
        yield
    finally:
        for f, was in zip(flags, saved):
            f.allow_tf32 = was


def windows_loss(logits_of, ids: list[int], T: int, device: str = "cpu") -> float:
    """Mean next-token cross-entropy over non-overlapping (T + 1)-token windows of ``ids``,
    the windows on ``device`` (where the model is), in float32 without TF32."""
    n = (len(ids) - 1) // T
    x = torch.tensor(ids[: n * T + 1], device=device)
    inputs, targets = x[:-1].view(n, T), x[1:].view(n, T)
    total = 0.0
    with torch.inference_mode(), full_float32():
        for i in range(0, n, 64):
            logits = logits_of(inputs[i:i + 64])  # (b, T, V)
            total += float(F.cross_entropy(logits.flatten(0, 1).float(),
                                           targets[i:i + 64].flatten(), reduction="sum"))
    return total / (n * T)


def nanogpt_val_loss(repo: Path, ckpt: Path, work: Path, val_text: str,
                     T: int = SHAPE["block"]) -> float:
    """``windows_loss`` of nanoGPT's checkpoint ``ckpt`` on ``val_text`` (its own character ids,
    from the ``meta.pkl`` its prepare.py wrote in ``work``)."""
    import pickle

    import io

    GPT, GPTConfig = nanogpt_classes(repo)

    device = eval_device()
    state = torch.load(ckpt, map_location=device, weights_only=False)
    with contextlib.redirect_stdout(io.StringIO()):  # its "number of parameters" line
        model = GPT(GPTConfig(**state["model_args"]))
    model.load_state_dict({k.removeprefix("_orig_mod."): v for k, v in state["model"].items()})
    model.to(device).eval()
    stoi = pickle.loads((work / "data" / "corpus" / "meta.pkl").read_bytes())["stoi"]

    def logits_of(x):  # nanoGPT returns every position's logits when given targets
        return model(x, x)[0]

    return windows_loss(logits_of, [stoi[c] for c in val_text], T, device)


def attnlab_val_loss(run_dir: Path, val_text: str, T: int = SHAPE["block"]) -> float:
    """``windows_loss`` of the run in ``run_dir`` on ``val_text`` (its own tokenizer)."""
    import attnlab

    model, tokenizer = attnlab.load(run_dir)
    device = eval_device()
    return windows_loss(model.to(device), tokenizer.encode(val_text), T, device)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nanogpt", type=Path, default=os.environ.get("NANOGPT"),
                    help="a nanoGPT checkout (default: $NANOGPT)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--chars", type=int, default=1_160_000)
    ap.add_argument("--corpus", choices=["numbers", "stdlib"], default="numbers")
    ap.add_argument("--seeds", type=int, nargs="*", default=[],
                    help="after the timed rounds, train attnlab again with these seeds (val "
                         "loss only): how much the loss moves with the seed alone")
    ap.add_argument("--variants", nargs="+", default=["fp32", "default"],
                    choices=["fp32", "bf16", "default"],
                    help="attnlab runs: fp32 (--precision 32), bf16 (--precision bf16-mixed), "
                         "default (no --precision: lm's auto, bf16-mixed on a CPU with bf16 "
                         "instructions)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 30 iterations, 1 round")
    args = ap.parse_args()
    if args.quick:
        args.iters, args.rounds, args.chars = 30, 1, 200_000
    if args.nanogpt is None:  # `python -m benchmarks` runs every script: say why, do not fail
        print("skipped: no nanoGPT checkout; give --nanogpt DIR or set NANOGPT (git clone "
              "https://github.com/karpathy/nanoGPT outside this project)")
        return
    args.nanogpt = Path(args.nanogpt).resolve()  # train.py runs in a temporary directory
    if not (args.nanogpt / "train.py").is_file():
        sys.exit(f"--nanogpt {args.nanogpt}: no train.py there (a nanoGPT checkout)")
    torch.set_num_threads(args.threads)
    load = os.getloadavg()
    step = step_times(args.nanogpt)
    print("the training step alone, this process, same batch (ms, median of 5 x 20): " +
          ", ".join(f"{k} {v:.1f}" for k, v in step.items()) +
          f"; bf16 autocast speeds nanoGPT's step {step['nanoGPT fp32'] / step['nanoGPT bf16']:.2f}x"
          f", attnlab's {step['attnlab fp32'] / step['attnlab bf16']:.2f}x", flush=True)
    with tempfile.TemporaryDirectory(prefix="attnlab-nanogpt-") as tmp:
        work = Path(tmp)
        text_file = work / "corpus.txt"
        text = write_corpus(text_file, args.chars, args.corpus)
        val_text = text[int(len(text) * 0.9):]  # both hold out the last 10%
        sides = ["nanoGPT"] + [f"attnlab {v}" for v in args.variants]
        times = {s: [] for s in sides}
        losses, own, train_s, precision = {}, {}, {}, {}
        for r in range(args.rounds):
            for side in sides:
                if side == "nanoGPT":
                    seconds, ckpt, estimate = nanogpt_run(args.nanogpt, work, text_file,
                                                          args.iters, args.threads)
                    losses[side] = nanogpt_val_loss(args.nanogpt, ckpt, work, val_text)
                    own[side] = estimate
                else:
                    variant = side.split()[1]
                    seconds, out, val, tsec, chosen = attnlab_run(work, text_file, args.iters,
                                                                  args.threads, variant)
                    losses[side], own[side] = attnlab_val_loss(out, val_text), val
                    train_s[side], precision[side] = tsec, chosen
                times[side].append(seconds)
                print(f"round {r + 1}: {side:14s} {seconds:6.1f} s  val loss {losses[side]:.4f}",
                      flush=True)
        by_seed = {v: {42: losses[f"attnlab {v}"]} for v in args.variants}
        for seed in args.seeds:
            for v in args.variants:
                out = attnlab_run(work, text_file, args.iters, args.threads, v, seed)[1]
                by_seed[v][seed] = attnlab_val_loss(out, val_text)
                print(f"seed {seed}: attnlab {v} val loss {by_seed[v][seed]:.4f}", flush=True)
    base = statistics.median(times["nanoGPT"])
    print(f"\nnanoGPT CPU recipe, {args.iters} iterations, {len(text):,} characters of "
          f"{args.corpus}, threads "
          f"{args.threads}, torch {torch.__version__}; load average {load[0]:.2f} at the start, "
          f"{os.getloadavg()[0]:.2f} at the end")
    print(f"{'side':14s} {'whole run s':>11s} {'vs nanoGPT':>10s} {'val loss':>8s} "
          f"{'own estimate':>12s} {'runs':>s}")
    for side in sides:
        t = statistics.median(times[side])
        extra = (f"  train_seconds {train_s[side]:.1f}, --precision {precision[side]}"
                 if side in train_s else "")
        print(f"{side:14s} {t:11.1f} {t / base:10.2f} {losses[side]:8.4f} "
              f"{own[side] if own[side] is not None else float('nan'):12.4f} "
              f"{', '.join(f'{x:.1f}' for x in times[side])}{extra}")
    print("val loss: this script's, on the same held-out text for every model; own estimate: "
          "what the run printed (nanoGPT: 20 random batches; attnlab: its val_batches)")
    for v, losses_v in by_seed.items():
        if len(losses_v) > 1:
            vals = list(losses_v.values())
            print(f"attnlab {v} val loss by seed: " + ", ".join(
                f"{s}: {x:.4f}" for s, x in losses_v.items()) +
                f" (range {max(vals) - min(vals):.4f})")


if __name__ == "__main__":
    main()
