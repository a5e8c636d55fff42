"""attnlab's ``CausalLM`` against nanoGPT's ``GPT`` on one GPU: the training step in one process,
then whole runs of ``attnlab train lm`` against nanoGPT's ``train.py``.

    python -m benchmarks.gpu_lm --nanogpt DIR [--iters 1000] [--runs eager compiled]
                                [--skip-step] [--skip-runs] [--skip-recompiles] [--json FILE]
                                [--peak-tflops 989]
    python -m benchmarks.gpu_lm --quick --nanogpt DIR      # a smoke run of the script on a CPU

(``NANOGPT=DIR`` instead of ``--nanogpt``; without either, nanoGPT's side is skipped with the
reason printed. ``benchmarks/gpu_check.sh`` is the prepared script for a lent GPU machine.)

The shape is nanoGPT's shakespeare-char (6 layers, 6 heads, width 384, block 256, batch 64,
dropout 0.2, bf16 autocast, fused AdamW); ``--quick`` makes it tiny. Without CUDA the full shape
is not run at all (it says so), so ``python -m benchmarks`` stays short on a CPU.

Part 1, this process, the same random batch for both models: attnlab's model is the
``CausalLM`` that ``attnlab train lm`` builds for the recipe's flags (``lm_runtime.build_model``
on the task's configuration), nanoGPT's its ``GPT`` (``bias=False``, as its train.py). One step
is forward + cross-entropy, backward, clipping at 1.0 and nanoGPT's optimiser for both (fused
AdamW, weight decay 0.1 on 2-D tensors, β = (0.9, 0.99)), so only the models differ. Each of
the four variants (side x eager / ``torch.compile``) is timed in turn, round after round, with
CUDA events (``perf_counter`` on a CPU), warm-up excluded; the first compiled step's time is
the compile time. Also: graphs and breaks of each training forward (``torch._dynamo.explain``),
host synchronisations in one forward + backward (``torch.cuda.set_sync_debug_mode("warn")``),
peak memory of each variant (``torch.cuda.max_memory_allocated`` less what was allocated
before it was built), MFU, and how many graphs the compiled attnlab model compiles for a
training step, an eval forward and shorter last batches (dynamo's ``unique_graphs``).

MFU, as nanoGPT's ``estimate_mfu`` (PaLM, appendix B): 6N + 12·L·H·Q·T flops per token (N: the
parameters less the position table, Q: head width, T: block), against ``--peak-tflops``
(default 989: the dense bf16 peak of an H100 SXM, and of an H200 SXM, the same chip with more
memory; an H100 PCIe's is 756, an A100's 312, which nanoGPT's own log uses). The device found
is printed first, and saved with the numbers.

Part 2, whole runs as new processes on the same corpus (``benchmarks.nanogpt.write_corpus``,
default 1.1 M characters of the standard library's source, character level): nanoGPT's
prepare.py + ``train.py`` with the flags of /work/shared/GPU.md, and ``attnlab train lm`` with
the same recipe's flags that it has (those it lacks are printed); each eager and compiled.
Reported: wall seconds, the training loop's seconds (nanoGPT: the sum of its logged iteration
times; attnlab: ``train_seconds`` of metrics.json), nanoGPT's median ms/iter and MFU, and the
validation loss of every final model on the same held-out text (the corpus' last 10%,
``benchmarks.nanogpt.windows_loss`` over block-long windows, each model with its own ids).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.nanogpt import (attnlab_val_loss, nanogpt_classes, nanogpt_prepare,
                                nanogpt_val_loss, run, write_corpus)

FULL = dict(layers=6, heads=6, width=384, block=256, batch=64, dropout=0.2, lr=1e-3, warmup=100,
            vocab=96, chars=1_100_000, rounds=5, steps=20, warm=5, eval_iters=50)
QUICK = dict(layers=2, heads=2, width=64, block=32, batch=8, dropout=0.2, lr=1e-3, warmup=5,
             vocab=96, chars=60_000, rounds=3, steps=3, warm=2, eval_iters=5)
NO_CUDA = "n/a (no CUDA)"


# ---- the recipe, once: attnlab's flags, and the configuration part 1 builds from them ------
def recipe(s: dict) -> dict:
    """nanoGPT's settings by attnlab's setting names (its flags with ``-`` for ``_``)."""
    return dict(block_size=s["block"], batch_size=s["batch"], num_layers=s["layers"],
                num_heads=s["heads"], model_dim=s["width"], dim_feedforward=4 * s["width"],
                lr=s["lr"], warmup=s["warmup"], dropout=s["dropout"],
                attention_dropout=s["dropout"], weight_decay=0.1, beta2=0.99, min_lr=s["lr"] / 10,
                bias=False)


def attnlab_flags() -> set[str]:
    """The setting names ``attnlab train lm`` takes as flags (read from its ``--help``)."""
    done = subprocess.run([sys.executable, "-m", "attnlab", "train", "lm", "--help"],
                          capture_output=True, text=True, check=True)
    return {m.replace("-", "_") for m in re.findall(r"--(?:no-)?([a-z][a-z0-9-]*)", done.stdout)}


def as_flags(settings: dict) -> list[str]:
    """``{"model_dim": 384, "bias": False}`` -> ``["--model-dim", "384", "--no-bias"]``."""
    flags = []
    for name, value in settings.items():
        flag = name.replace("_", "-")
        flags += ([f"--{flag}" if value else f"--no-{flag}"] if isinstance(value, bool)
                  else [f"--{flag}", str(value)])
    return flags


def attnlab_model(settings: dict, vocab: int):
    """The ``CausalLM`` ``attnlab train lm`` builds for these flags on a ``vocab``-symbol corpus."""
    from attnlab.tasks import get_task
    from attnlab.tasks.lm.runtime import build_model

    return build_model(get_task("lm").config(**settings, vocab_size=vocab))


def nanogpt_model(repo: Path, s: dict):
    GPT, GPTConfig = nanogpt_classes(repo)
    with contextlib.redirect_stdout(io.StringIO()):  # its "number of parameters" line
        return GPT(GPTConfig(block_size=s["block"], vocab_size=s["vocab"], n_layer=s["layers"],
                             n_head=s["heads"], n_embd=s["width"], dropout=s["dropout"],
                             bias=False))


def flops_per_token(model, s: dict) -> float:
    """nanoGPT's ``estimate_mfu`` count: 6N + 12·L·H·Q·T, N without the position table."""
    n = sum(p.numel() for name, p in model.named_parameters()
            if not name.startswith(("transformer.wpe.", "positional_encoding.")))
    return 6 * n + 12 * s["layers"] * s["width"] * s["block"]  # H·Q = width


def mfu(ms: float | None, flops: float, s: dict, peak_tflops: float) -> float | None:
    """Percent of ``peak_tflops`` that steps of ``ms`` milliseconds reach."""
    if ms is None:
        return None
    return 100 * flops * s["batch"] * s["block"] / (ms / 1e3) / (peak_tflops * 1e12)


# What fresh_caches and main set in os.environ for the processes they start; put back as it
# was when main ends, so that a caller's later compiles (a test in the same pytest process) do
# not write into the removed cache directory, which they would make again, left in /tmp.
SET_FOR_THE_RUNS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "PYTHONUTF8")


@contextlib.contextmanager
def environment_kept(names=SET_FOR_THE_RUNS):
    """Restores the variables ``names`` of os.environ (set, changed or unset) on the way out."""
    kept = {name: os.environ.get(name) for name in names}
    try:
        yield
    finally:
        for name, value in kept.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def fresh_caches(root: Path, name: str) -> None:
    """Empty inductor and Triton caches for what compiles next (here, and in the processes
    started after): every compile time is a fresh machine's, not a second run's."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(root / name / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(root / name / "triton")


# ---- part 1: the training step, same process ------------------------------------------------
def adamw(model, lr: float):
    """nanoGPT's ``configure_optimizers`` for either model: decay on 2-D tensors, fused."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.99), fused=True)


def loss_fn(side: str, x, y):
    if side == "nanoGPT":
        return lambda m: m(x, y)[1]  # its forward takes the targets and returns the loss
    return lambda m: F.cross_entropy(m(x).flatten(0, 1), y.flatten())  # attnlab's lm_loss


class Clock:
    """Elapsed milliseconds on the device: CUDA events, or ``perf_counter`` on a CPU."""

    def __init__(self, cuda: bool):
        self.cuda = cuda

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def time(self, fn, n: int) -> float:
        """ms per call of ``fn`` over ``n`` calls."""
        if not self.cuda:
            start = time.perf_counter()
            for _ in range(n):
                fn()
            return (time.perf_counter() - start) * 1e3 / n
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / n


def explain(model, inputs: tuple, ctx) -> dict:
    with ctx():
        found = torch._dynamo.explain(model)(*inputs)
    reasons = sorted({r.reason.splitlines()[0][:120] for r in found.break_reasons})
    return {"graphs": found.graph_count, "breaks": found.graph_break_count, "reasons": reasons}


def host_syncs(model, loss_of, ctx) -> dict:
    """Synchronising CUDA calls in one forward + backward, and where (file:line) they happen."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with ctx():
                loss = loss_of(model)
            loss.backward()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    model.zero_grad(set_to_none=True)
    syncs = [w for w in seen if "synchroniz" in str(w.message)]
    return {"count": len(syncs), "where": sorted({f"{Path(w.filename).name}:{w.lineno}"
                                                  for w in syncs})}


def graphs_so_far() -> int:
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def recompiles(model, x, ctx) -> dict:
    """Graphs the compiled ``model`` adds for an eval forward, then for two shorter batches
    (a validation set's last batch; a second size shows whether each new size compiles)."""
    added = {}
    model.eval()
    with torch.no_grad(), ctx():
        for name, batch in (("eval forward", x), (f"eval batch of {len(x) // 2 + 1}",
                                                  x[: len(x) // 2 + 1]),
                            (f"eval batch of {len(x) // 2 - 1}", x[: len(x) // 2 - 1])):
            before = graphs_so_far()
            model(batch)
            added[name] = graphs_so_far() - before
    model.train()
    return added


def step_part(args, s: dict, device: torch.device, settings: dict, done=None) -> dict:
    """Part 1's numbers; ``done(out)`` is called with them before the recompilations are
    counted (each compiles again: at GPT-2's size a minute or more)."""
    cuda = device.type == "cuda"
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True  # as train.py
    clock = Clock(cuda)
    ctx = lambda: torch.autocast(device.type, dtype=torch.bfloat16,  # noqa: E731
                                 enabled=args.dtype == "bfloat16")
    torch.manual_seed(0)
    x = torch.randint(0, s["vocab"], (s["batch"], s["block"]), device=device)
    y = torch.randint(0, s["vocab"], (s["batch"], s["block"]), device=device)
    build = {"attnlab": lambda: attnlab_model(settings, s["vocab"])}
    if args.nanogpt:
        build["nanoGPT"] = lambda: nanogpt_model(args.nanogpt, s)
    out: dict = {side: {} for side in build}
    for side, make in build.items():  # explain and syncs on eager models, before any compile
        torch.manual_seed(0)
        model = make().to(device).train()
        out[side]["flops_per_token"] = flops_per_token(model, s)
        out[side]["explain"] = explain(model, (x, y) if side == "nanoGPT" else (x,), ctx)
        if cuda:
            host_syncs(model, loss_fn(side, x, y), ctx)  # the first call's lazy set-up
            out[side]["syncs"] = host_syncs(model, loss_fn(side, x, y), ctx)
        del model
    torch._dynamo.reset()
    steps, kept = {}, {}
    for side, make in build.items():
        for compiled in (False, True):
            name = f"{side} {'compiled' if compiled else 'eager'}"
            base = torch.cuda.memory_allocated() if cuda else 0
            torch.manual_seed(0)
            model = make().to(device).train()
            if compiled and side == "nanoGPT":  # as its train.py does
                model = torch.compile(model)
            elif compiled:  # in place, as `attnlab train --compile` does
                model.compile()
            opt, loss_of = adamw(model, s["lr"]), loss_fn(side, x, y)

            def step(model=model, opt=opt, loss_of=loss_of):
                with ctx():
                    loss = loss_of(model)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)

            if cuda:
                torch.cuda.reset_peak_memory_stats()
            graphs, start = graphs_so_far(), time.perf_counter()
            step()
            clock.sync()
            first = time.perf_counter() - start
            for _ in range(s["warm"]):
                step()
            clock.sync()
            out[side][name.split()[1]] = {
                "first_step_s": first, "graphs_compiled": graphs_so_far() - graphs,
                "peak_mib": (torch.cuda.max_memory_allocated() - base) / 2**20 if cuda else None}
            steps[name], kept[name] = step, model
    times = {name: [] for name in steps}
    names = list(steps)
    for r in range(s["rounds"]):  # in turns, the order rotated each round
        for name in names[r % len(names):] + names[: r % len(names)]:
            times[name].append(clock.time(steps[name], s["steps"]))
    for name, samples in times.items():
        side, mode = name.split()
        out[side][mode]["ms"] = statistics.median(samples)
        out[side][mode]["mfu"] = mfu(out[side][mode]["ms"], out[side]["flops_per_token"], s,
                                     args.peak_tflops)
    if done:
        done(out)
    if not args.skip_recompiles:
        out["attnlab"]["recompiles"] = recompiles(kept["attnlab compiled"], x, ctx)
    return out


# ---- part 2: whole runs ----------------------------------------------------------------------
def nanogpt_train(args, s: dict, work: Path, compiled: bool, device: str, dtype: str) -> dict:
    out = work / f"out-nanogpt-{'compiled' if compiled else 'eager'}"
    cmd = [sys.executable, str(args.nanogpt / "train.py"), "--dataset=corpus", f"--out_dir={out}",
           f"--device={device}", f"--dtype={dtype}", f"--block_size={s['block']}",
           f"--batch_size={s['batch']}", f"--n_layer={s['layers']}", f"--n_head={s['heads']}",
           f"--n_embd={s['width']}", f"--dropout={s['dropout']}", f"--learning_rate={s['lr']}",
           f"--min_lr={s['lr'] / 10}", "--beta2=0.99", f"--warmup_iters={s['warmup']}",
           f"--max_iters={args.iters}", f"--lr_decay_iters={args.iters}",
           f"--eval_interval={args.iters}", f"--eval_iters={s['eval_iters']}",
           "--gradient_accumulation_steps=1", f"--compile={compiled}"]
    wall, log = run(cmd, work, args.threads)
    iters = [(int(i), float(ms)) for i, ms in
             re.findall(r"iter (\d+): loss [\d.]+, time ([\d.]+)ms", log)]
    steady = [ms for i, ms in iters if i >= 10 and i % args.iters]  # no compile, no evaluation
    own = re.findall(r"step \d+: train loss [\d.]+, val loss ([\d.]+)", log)
    return {"wall_s": wall, "train_s": sum(ms for _, ms in iters) / 1e3,
            "ms_per_iter": statistics.median(steady) if steady else None,
            "own_val": float(own[-1]) if own else None, "ckpt": out / "ckpt.pt"}


def attnlab_train(args, work: Path, text_file: Path, settings: dict, compiled: bool,
                  precision: str) -> dict:
    out = work / f"attnlab-{'compiled' if compiled else 'eager'}"
    cmd = [sys.executable, "-m", "attnlab", "train", "lm", "--data", str(text_file), "--out",
           str(out), "--max-steps", str(args.iters), "--precision", precision,
           "--threads", str(args.threads), *as_flags(settings)]
    wall, _ = run(cmd + (["--compile"] if compiled else []), work, args.threads)
    metrics = json.loads((out / "metrics.json").read_text())
    # train_seconds leaves out --compile's first step, which nanoGPT's iteration times hold:
    # added back (compile_seconds), so the ratio compares the same work
    train_s = metrics.get("train_seconds")
    if train_s is not None:
        train_s += metrics.get("compile_seconds") or 0.0
    return {"wall_s": wall, "train_s": train_s,
            "own_val": metrics.get("val_loss"), "run": out}


def runs_part(args, s: dict, device: str, settings: dict, caches: Path, done=None) -> dict:
    """Part 2's numbers; ``done(found)`` is called with them so far after each run, so a
    machine taken back part way keeps what was measured (``--json``)."""
    dtype = args.dtype if device == "cuda" else "float32"  # nanoGPT autocasts on CUDA only
    precision = "bf16-mixed" if dtype == "bfloat16" else "32"
    found: dict = {"dtype": dtype, "precision": precision}
    with tempfile.TemporaryDirectory(prefix="attnlab-gpu-lm-") as tmp:
        work = Path(tmp)
        text_file = work / "corpus.txt"
        text = write_corpus(text_file, s["chars"], args.corpus)
        val_text = text[int(len(text) * 0.9):]  # both hold out the last 10%
        found["corpus"] = {"chars": len(text), "symbols": len(set(text)), "kind": args.corpus}
        if args.nanogpt:
            found["nanoGPT prepare_s"] = nanogpt_prepare(args.nanogpt, work, text_file,
                                                         args.threads)
        for mode in args.runs:
            compiled = mode == "compiled"
            if args.nanogpt:
                fresh_caches(caches, f"nanoGPT-{mode}")
                r = nanogpt_train(args, s, work, compiled, device, dtype)
                r["val"] = nanogpt_val_loss(args.nanogpt, r.pop("ckpt"), work, val_text,
                                            s["block"])
                found[f"nanoGPT {mode}"] = r
                print(f"nanoGPT {mode}: {r['wall_s']:.1f} s, val {r['val']:.4f}", flush=True)
                if done:
                    done(found)
            fresh_caches(caches, f"attnlab-{mode}")
            r = attnlab_train(args, work, text_file, settings, compiled, precision)
            r["val"] = attnlab_val_loss(r.pop("run"), val_text, s["block"])
            found[f"attnlab {mode}"] = r
            print(f"attnlab {mode}: {r['wall_s']:.1f} s, val {r['val']:.4f}", flush=True)
            if done:
                done(found)
    return found


# ---- the report ------------------------------------------------------------------------------
def num(x, fmt: str = ".2f", unit: str = "") -> str:
    return "–" if x is None else f"{x:{fmt}}{unit}"


def ratio(ours, theirs) -> str:
    return f"{ours / theirs:.2f}×" if ours is not None and theirs else "–"


def step_rows(p: dict, args, cuda: bool) -> list[tuple[str, str, str, str]]:
    ours, theirs = p["attnlab"], p.get("nanoGPT")
    gone = "skipped" if theirs is None else None
    rows = []

    def row(label, get, fmt=".2f", unit="", compare=True, cuda_only=False):
        if cuda_only and not cuda:
            return rows.append((label, NO_CUDA, NO_CUDA, ""))
        a, b = get(ours), None if theirs is None else get(theirs)
        rows.append((label, gone or num(b, fmt, unit), num(a, fmt, unit),
                     ratio(a, b) if compare else ""))

    row("model step, same process, eager (ms)", lambda d: d["eager"]["ms"])
    row("model step, `torch.compile` (ms)", lambda d: d["compiled"]["ms"])
    row("compile: the first compiled step (s)", lambda d: d["compiled"]["first_step_s"], ".1f")

    def graphs(d):
        return f"{d['explain']['graphs']} / {d['explain']['breaks']}"

    rows.append(("graphs / breaks in the training forward (`torch._dynamo.explain`)",
                 gone or graphs(theirs), graphs(ours), ""))
    if cuda:
        rows.append(("host syncs in one forward + backward (`set_sync_debug_mode`)",
                     gone or str(theirs["syncs"]["count"]), str(ours["syncs"]["count"]), ""))
    else:
        rows.append(("host syncs in one forward + backward", NO_CUDA, NO_CUDA, ""))
    row("peak memory, eager step (MiB)", lambda d: d["eager"]["peak_mib"], ".0f",
        cuda_only=True)
    row("peak memory, compiled step (MiB)", lambda d: d["compiled"]["peak_mib"], ".0f",
        cuda_only=True)
    for mode in ("eager", "compiled"):
        row(f"MFU, {mode} step (of {args.peak_tflops:g} TFLOPS)", lambda d, m=mode: d[m]["mfu"],
            ".1f", " %", compare=False)
    r = ours.get("recompiles", {})  # none with --skip-recompiles
    rows.append(("graphs the compiled attnlab model compiles: training step" +
                 "".join(f"; {name}" for name in r), "",
                 f"{ours['compiled']['graphs_compiled']}" +
                 "".join(f"; +{n}" for n in r.values()), ""))
    return rows


def run_rows(p: dict, args, s: dict) -> list[tuple[str, str, str, str]]:
    rows = []
    for mode in args.runs:
        a, b = p[f"attnlab {mode}"], p.get(f"nanoGPT {mode}")
        gone = "skipped" if b is None else None
        title = f"whole run, {args.iters:,} iterations, {mode}"
        a_ms = None if a["train_s"] is None else 1e3 * a["train_s"] / args.iters
        b_ms = None if b is None else b["ms_per_iter"]
        for label, x, y, fmt in (
                (f"{title}: wall (s)", a["wall_s"], b and b["wall_s"], ".1f"),
                ("  training loop (s; nanoGPT: its iterations' times summed; attnlab: "
                 "train_seconds + compile_seconds)", a["train_s"], b and b["train_s"], ".1f"),
                ("  ms/iter (nanoGPT: median of its log; attnlab: (train_seconds + "
                 "compile_seconds) / iters, compile and validation included: no ratio)",
                 a_ms, b_ms, ".2f"),
                ("  validation loss, same held-out text", a["val"], b and b["val"], ".4f"),
                ("  the run's own validation estimate", a["own_val"], b and b["own_val"], ".4f")):
            rows.append((label, gone or num(y, fmt), num(x, fmt),
                         "" if "no ratio" in label else ratio(x, y)))
        flops = p.get("flops_per_token")  # from part 1's models
        if flops:
            rows.append((f"  MFU from ms/iter (of {args.peak_tflops:g} TFLOPS)",
                         gone or num(mfu(b_ms, flops["nanoGPT"], s, args.peak_tflops), ".1f", " %"),
                         num(mfu(a_ms, flops["attnlab"], s, args.peak_tflops), ".1f", " %"), ""))
    return rows


def table(rows) -> str:
    lines = ["| | nanoGPT | attnlab | attnlab / nanoGPT |", "|---|---|---|---|"]
    return "\n".join(lines + [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows])


def device_line(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name()} (CUDA {torch.version.cuda})"
    from benchmarks.__main__ import machine  # the CPU, cores, threads and load

    return machine().split(", torch")[0] + " (no CUDA)"


def main() -> None:
    with environment_kept():
        _main()


def _main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nanogpt", type=Path, default=os.environ.get("NANOGPT"),
                    help="a nanoGPT checkout (default: $NANOGPT)")
    for key in ("layers", "heads", "width", "block", "batch", "vocab"):
        ap.add_argument(f"--{key}", type=int, help=f"default {FULL[key]} ({QUICK[key]} quick)")
    ap.add_argument("--dropout", type=float, help=f"default {FULL['dropout']}")
    ap.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16",
                    help="bfloat16: autocast (nanoGPT --dtype, attnlab --precision bf16-mixed)")
    ap.add_argument("--iters", type=int, help="whole runs' iterations (default 1000; 20 quick)")
    ap.add_argument("--runs", nargs="+", choices=["eager", "compiled"],
                    default=["eager", "compiled"])
    ap.add_argument("--corpus", choices=["stdlib", "numbers"], default="stdlib")
    ap.add_argument("--peak-tflops", type=float, default=989.0,
                    help="the accelerator's peak for MFU (default 989: the dense bf16 peak "
                         "of an H100 SXM and of an H200 SXM; 756 on an H100 PCIe, 312 on an "
                         "A100)")
    ap.add_argument("--threads", type=int, help="CPU threads (default: 1 on a CPU, all with CUDA)")
    ap.add_argument("--skip-step", action="store_true", help="no part 1 (the step)")
    ap.add_argument("--skip-runs", action="store_true", help="no part 2 (the whole runs)")
    ap.add_argument("--skip-recompiles", action="store_true",
                    help="part 1 without the graphs an eval forward and shorter batches add")
    ap.add_argument("--json", type=Path, help="also write the numbers to this file")
    ap.add_argument("--quick", action="store_true",
                    help="a tiny shape and 20 iterations: a smoke run that fits a CPU")
    args = ap.parse_args()
    cuda = torch.cuda.is_available()
    if not cuda and not args.quick:  # `python -m benchmarks` on a CPU: say why, do not fail
        print("skipped: no CUDA device; this benchmark is for a GPU (--quick: a CPU smoke run)")
        return
    s = dict(QUICK if args.quick else FULL)
    s.update({k: v for k in ("layers", "heads", "width", "block", "batch", "vocab", "dropout")
              if (v := getattr(args, k)) is not None})
    args.iters = args.iters or (20 if args.quick else 1000)
    args.threads = args.threads or (os.cpu_count() if cuda else 1)
    torch.set_num_threads(args.threads)
    os.environ["PYTHONUTF8"] = "1"  # nanoGPT's prepare.py reads the corpus in the locale's encoding
    if args.nanogpt is None:
        print("nanoGPT: skipped: no checkout; give --nanogpt DIR or set NANOGPT "
              "(benchmarks/gpu_check.sh says how to fetch one)")
    elif not (args.nanogpt / "train.py").is_file():
        sys.exit(f"--nanogpt {args.nanogpt}: no train.py there (a nanoGPT checkout)")
    else:
        args.nanogpt = args.nanogpt.resolve()  # train.py runs in a work directory elsewhere
    device = torch.device("cuda" if cuda else "cpu")
    load, date = os.getloadavg(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    wanted = recipe(s)
    have = attnlab_flags()
    settings = {k: v for k, v in wanted.items() if k in have}
    lacking = {k: v for k, v in wanted.items() if k not in have}
    # meta first: a JSON saved part way (a machine taken back) still says what it measured on
    found: dict = {"meta": {"device": device_line(device), "torch": torch.__version__,
                            "date": date, "load_start": load},
                   "shape": s, "iters": args.iters, "dtype": args.dtype,
                   "peak_tflops": args.peak_tflops, "attnlab_flags": as_flags(settings),
                   "recipe_not_in_attnlab": lacking}
    print(f"device: {found['meta']['device']}; MFU against --peak-tflops "
          f"{args.peak_tflops:g}", flush=True)
    with tempfile.TemporaryDirectory(prefix="gpu-lm-caches-") as caches:
        if not args.skip_step:
            fresh_caches(Path(caches), "step")
            found["step"] = step_part(args, s, device, settings,
                                      lambda step: save({**found, "step": step}, args.json))
            print("the step, ms: " + ", ".join(
                f"{side} {mode} {p[mode]['ms']:.2f}" for side, p in found["step"].items()
                for mode in ("eager", "compiled")), flush=True)
            save(found, args.json)  # what a time limit in part 2 would otherwise lose
        if not args.skip_runs:
            found["runs"] = runs_part(args, s, device.type, settings, Path(caches),
                                      lambda runs: save({**found, "runs": runs}, args.json))
            if "step" in found:  # the MFU of the whole runs counts part 1's models' flops
                found["runs"]["flops_per_token"] = {k: v["flops_per_token"]
                                                    for k, v in found["step"].items()}
    found["meta"]["load_end"] = os.getloadavg()
    report(found, args, s, cuda)
    save(found, args.json)


def save(found: dict, path: Path | None) -> None:
    if path:
        path.write_text(json.dumps(found, indent=1, default=str))


def report(found: dict, args, s: dict, cuda: bool) -> None:
    m = found["meta"]
    print(f"\n{'SMOKE RUN (--quick: a tiny shape, not a result) — ' if args.quick else ''}"
          f"{m['device']}, torch {m['torch']}, {m['date']}, load average "
          f"{m['load_start'][0]:.2f} at the start, {m['load_end'][0]:.2f} at the end")
    print(f"shape: {s['layers']} layers, {s['heads']} heads, width {s['width']}, block "
          f"{s['block']}, batch {s['batch']}, dropout {s['dropout']}, vocab {s['vocab']}, "
          f"{args.dtype}{' autocast' if args.dtype == 'bfloat16' else ''}, fused AdamW; "
          f"MFU against {args.peak_tflops:g} TFLOPS")
    print(f"attnlab train lm flags: {' '.join(found['attnlab_flags'])}")
    if found["recipe_not_in_attnlab"]:
        print("nanoGPT's recipe, not settable in attnlab train lm (it trains without): " +
              ", ".join(f"{k} {v}" for k, v in found["recipe_not_in_attnlab"].items()))
    rows = []
    if "step" in found:
        rows += step_rows(found["step"], args, cuda)
    if "runs" in found:
        r = found["runs"]
        print(f"corpus: {r['corpus']['chars']:,} characters of {r['corpus']['kind']}, "
              f"{r['corpus']['symbols']} symbols; whole runs: nanoGPT --dtype={r['dtype']}, "
              f"attnlab --precision {r['precision']}")
        rows += run_rows(r, args, s)
    print("\n" + table(rows))
    for side, p in found.get("step", {}).items():
        for reason in p["explain"]["reasons"]:
            print(f"{side} graph break: {reason}")
        if p.get("syncs", {}).get("where"):
            print(f"{side} host syncs at: {', '.join(p['syncs']['where'])}")


if __name__ == "__main__":
    main()
