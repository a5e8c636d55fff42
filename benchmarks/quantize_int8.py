"""int8 weights against float32 for greedy generation.

    python -m benchmarks.quantize_int8 [--threads 1] [--train-steps 300] [--run DIR] [--quick]

Two questions, both sides in this process:

1. **Speed**, on ``benchmarks/generate_lm.py``'s GPT-2 shape (n_embd 384,
   6 layers, 6 heads, vocab 1024, 512 positions, random weights): new tokens/s of greedy
   generation (256 new tokens after a 16-token prompt, best of ``--repeats``, run in turns) for
   Hugging Face's ``GPT2LMHeadModel.generate``, attnlab's ``CausalLM.generate`` in float32, and
   the same model through ``attnlab.nn.quantize`` (int8 weights). It also sets each cached step
   against its matrix products alone (every linear layer once at batch B, nothing between
   them): the step's float32 products, and the int8 products through the same int8 layers.
2. **What int8 costs**, on a trained model of the same width, depth and vocabulary: an
   ``attnlab train lm`` run (BPE, vocabulary 1024, 128-token windows) on spelled-out numbers,
   ``--train-steps`` steps, then ``attnlab evaluate``'s validation perplexity in float32 and in
   int8 (the runtime's ``evaluate(..., quantize="int8")``, what ``evaluate --quantize int8``
   prints), and how many of 100 greedy tokens the int8 model picks as float32 does. ``--run
   DIR`` skips the training and uses an lm run of yours.

Targets: int8 at least 1.5x attnlab's float32 tokens/s at batch 1 with perplexity within 1%;
the float32 step within 1.1x of its matrix products.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from .generate_lm import matmul_only_ms, timed_alternating


def int8_matmul_only_ms(model, B: int, repeats: int = 20) -> float:
    """ms per step of the int8 model's linear layers alone, each called once at batch B."""
    layers = [m for m in model.modules() if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)]
    xs = {m.in_features: torch.randn(B, m.in_features) for m in layers}
    with torch.inference_mode():
        for m in layers:
            m(xs[m.in_features])
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(repeats):
                for m in layers:
                    m(xs[m.in_features])
            best = min(best, (time.perf_counter() - t) / repeats)
    return best * 1e3


def speed(args) -> None:
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel

    from attnlab.interop import from_hf
    from attnlab.nn import quantize

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    hf = GPT2LMHeadModel(GPT2Config(vocab_size=1024, n_embd=384, n_layer=6, n_head=6,
                                    n_positions=512, bos_token_id=None, eos_token_id=None)).eval()
    fp32 = from_hf(hf).eval()
    int8 = quantize(fp32)
    n = args.new_tokens
    print(f"speed: GPT-2 shape (n_embd 384, 6 layers, 6 heads, vocab 1024), random weights, "
          f"greedy, {n} new tokens after 16, best of {args.repeats}, threads {args.threads}")
    print(f"{'batch':>5} {'hf tok/s':>9} {'fp32 tok/s':>10} {'int8 tok/s':>10} {'int8/fp32':>9} "
          f"{'int8/hf':>8} {'fp32 ms/step':>12} {'fp32 matmul':>11} {'step/mm':>7} "
          f"{'int8 ms/step':>12} {'int8 matmul':>11} {'step/mm':>7} {'same':>5}")
    for B in args.batches:
        ids = torch.randint(0, 1024, (B, 16))

        def run_hf():
            with torch.inference_mode():
                return hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                                   min_new_tokens=n, do_sample=False, pad_token_id=0)

        seconds, outs = timed_alternating({"hf": run_hf, "fp32": lambda: fp32.generate(ids, n),
                                           "int8": lambda: int8.generate(ids, n)}, args.repeats)
        t_hf, t32, t8 = seconds["hf"], seconds["fp32"], seconds["int8"]
        mm32, mm8 = matmul_only_ms(fp32, B), int8_matmul_only_ms(int8, B)
        s32, s8 = t32 / n * 1e3, t8 / n * 1e3
        print(f"{B:>5} {B * n / t_hf:>9.0f} {B * n / t32:>10.0f} {B * n / t8:>10.0f} "
              f"{t32 / t8:>9.2f} {t_hf / t8:>8.2f} {s32:>12.2f} {mm32:>11.2f} {s32 / mm32:>7.2f} "
              f"{s8:>12.2f} {mm8:>11.2f} {s8 / mm8:>7.2f} "
              f"{str(torch.equal(outs['hf'], outs['fp32'])):>5}")
    print("  same: Hugging Face and attnlab fp32 produce the same tokens")


def numbers_text(path: Path, count: int) -> Path:
    from num2words import num2words

    with open(path, "w", encoding="utf-8") as f:
        for i in range(1, count + 1):
            n = (i * 7919) % 1_000_000  # spread over six digits, deterministic
            f.write(f"{n} is {num2words(n)}.\n")
    return path


def train_run(tmp: Path, args) -> Path:
    text = numbers_text(tmp / "numbers.txt", args.lines)
    run = tmp / "lm"
    cmd = [sys.executable, "-m", "attnlab", "train", "lm", "--data", str(text), "--out", str(run),
           "--tokenizer", "bpe", "--vocab-size", "1024", "--block-size", "128",
           "--model-dim", "384", "--num-layers", "6", "--num-heads", "6",
           "--dim-feedforward", "1536", "--dropout", "0", "--batch-size", str(args.batch_size),
           "--max-steps", str(args.train_steps), "--warmup", "30", "--lr", "1e-3",
           "--val-batches", "20", "--threads", str(args.train_threads)]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    print(f"trained {run.name}: {args.train_steps} steps in {time.perf_counter() - start:.0f} s "
          f"({' '.join(cmd[3:])})")
    return run


def cost(run: Path, args) -> None:
    import attnlab
    from attnlab.nn import quantize
    from attnlab.loading import check_run_dir
    from attnlab.tasks import get_task

    run_dir, cfg = check_run_dir(run)
    task = get_task(cfg.task)
    fp32 = task.runtime().evaluate(task, run_dir, cfg, None)
    int8 = task.runtime().evaluate(task, run_dir, cfg, None, quantize="int8")
    model, tokenizer = attnlab.load(run_dir)
    qmodel = quantize(model)
    prompt = torch.tensor([tokenizer.encode("342 is three hundred")[: model.max_len // 2]])
    n = min(100, model.max_len - prompt.shape[1])  # what fits the context
    a, b = model.generate(prompt, n)[0, prompt.shape[1]:], qmodel.generate(prompt, n)[0, prompt.shape[1]:]
    first = int((a != b).nonzero()[0]) if not torch.equal(a, b) else n
    print(f"cost on {run} ({cfg['model_dim']} wide, {cfg['num_layers']} layers, vocab "
          f"{cfg['vocab_size']}): val_perplexity fp32 {fp32['val_perplexity']:.4f}, int8 "
          f"{int8['val_perplexity']:.4f} ({(int8['val_perplexity'] / fp32['val_perplexity'] - 1) * 100:+.2f}%); "
          f"greedy tokens equal {int((a == b).sum())}/{n}, first difference at {first}")
    print(f"  fp32: {tokenizer.decode(a.tolist())[:90]!r}")
    print(f"  int8: {tokenizer.decode(b.tolist())[:90]!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1, help="torch threads for the timings")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--run", type=Path, help="an lm run to measure the cost on (no training)")
    ap.add_argument("--train-steps", type=int, default=300)
    ap.add_argument("--train-threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lines", type=int, default=20_000, help="lines of the numbers corpus")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 32 tokens, 20 steps")
    args = ap.parse_args()
    if args.quick:
        args.new_tokens, args.repeats, args.train_steps, args.lines = 32, 1, 20, 2000
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, quantized engine {torch.backends.quantized.engine}")
    speed(args)
    if args.run is not None:
        cost(args.run, args)
        return
    with tempfile.TemporaryDirectory(prefix="attnlab-int8-") as tmp:
        run = train_run(Path(tmp), args)
        torch.set_num_threads(args.threads)
        cost(run, args)


if __name__ == "__main__":
    main()
