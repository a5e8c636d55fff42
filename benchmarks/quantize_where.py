"""Where ``--quantize int8`` is faster than float32, and where slower.

    python -m benchmarks.quantize_where [--threads 1] [--repeats 3] [--quick]

``benchmarks/quantize_int8.py`` measured one shape: a 384-wide, 6-layer GPT-2 (int8 faster at
batch 1). A user's trained translate run (64 wide, 500 lines) was slower in int8
(benchmarks/RESULTS.md, "quantize_where", has both numbers). This
script times, in turns in one process (random weights, greedy, best of ``--repeats``):

1. ``CausalLM.generate`` in float32 and through ``attnlab.nn.quantize``, for model widths
   32 .. 512 (4 heads, 4 layers, feed-forward 4x the width, vocabulary 256) at batch 1, 8
   and 64: what ``attnlab generate --quantize int8`` runs (one prompt per call; many prompts
   are one batch).
2. ``attnlab translate``'s decoding of N texts (12-token sources, 24 new tokens) with a
   ``Seq2SeqTransformer`` (2+2 layers, feed-forward 2x, vocabularies 64/128) of widths
   64 .. 512: float32 decodes the N texts as one batch, int8 one text at a time (its
   dynamic rounding is by each call's range, so a batch would make a text's translation
   depend on its neighbours: ``attnlab/tasks/translate_runtime.py``).

It prints each case's int8/float32 speed ratio (> 1: int8 faster). The rule
``attnlab/commands/quantize.py`` applies at run time is checked against these rows: the last
column says whether the command prints its "int8 will be slower" note for the case.
"""
from __future__ import annotations

import argparse
import os
import time

import torch

from attnlab.commands.quantize import int8_slower
from attnlab.models import CausalLM, Seq2SeqTransformer
from attnlab.nn import quantize

from .generate_lm import timed_alternating


def lm_rows(args) -> None:
    print(f"lm: CausalLM.generate, 4 layers, 4 heads, ff 4x, vocab 256, {args.new_tokens} new "
          f"tokens after 16, best of {args.repeats}, threads {args.threads}")
    print(f"{'width':>5} {'params':>9} {'batch':>5} {'fp32 tok/s':>10} {'int8 tok/s':>10} "
          f"{'int8/fp32':>9} {'note':>5}")
    for D in args.widths:
        torch.manual_seed(0)
        fp32 = CausalLM(256, model_dim=D, num_heads=4, num_layers=4, dim_feedforward=4 * D,
                        max_len=16 + args.new_tokens).eval()
        int8 = quantize(fp32)
        params = sum(p.numel() for p in fp32.parameters())
        for B in args.batches:
            ids = torch.randint(4, 256, (B, 16))
            n = args.new_tokens
            seconds, _ = timed_alternating({"fp32": lambda: fp32.generate(ids, n),
                                            "int8": lambda: int8.generate(ids, n)}, args.repeats)
            t32, t8 = seconds["fp32"], seconds["int8"]
            note = int8_slower("lm", D, B)
            print(f"{D:>5} {params:>9,} {B:>5} {B * n / t32:>10.0f} {B * n / t8:>10.0f} "
                  f"{t32 / t8:>9.2f} {'yes' if note else 'no':>5}", flush=True)


def translate_rows(args) -> None:
    S, n = 12, 24
    print(f"translate: Seq2SeqTransformer 2+2 layers, 4 heads, ff 2x, vocab 64/128, {S}-token "
          f"sources, {n} new tokens; fp32 all texts in one batch, int8 one text at a time "
          f"(as `attnlab translate` runs), best of {args.repeats}")
    print(f"{'width':>5} {'params':>9} {'texts':>5} {'fp32 s':>8} {'int8 s':>8} "
          f"{'int8/fp32':>9} {'note':>5}")
    for D in args.widths:
        torch.manual_seed(0)
        fp32 = Seq2SeqTransformer(64, 128, model_dim=D, num_heads=4, num_layers=2,
                                  dim_feedforward=2 * D, max_len=64).eval()
        int8 = quantize(fp32)
        params = sum(p.numel() for p in fp32.parameters())
        for N in args.texts:
            src = torch.randint(4, 64, (N, S))

            def one_by_one():
                return [int8.generate(src[i : i + 1], n) for i in range(N)]

            seconds, _ = timed_alternating({"fp32": lambda: fp32.generate(src, n),
                                            "int8": one_by_one}, args.repeats)
            t32, t8 = seconds["fp32"], seconds["int8"]
            note = int8_slower("translate", D, N)
            print(f"{D:>5} {params:>9,} {N:>5} {t32:>8.3f} {t8:>8.3f} {t32 / t8:>9.2f} "
                  f"{'yes' if note else 'no':>5}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--widths", type=int, nargs="+", default=[32, 64, 128, 256, 384, 512])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 64])
    ap.add_argument("--texts", type=int, nargs="+", default=[1, 8, 100])
    ap.add_argument("--quick", action="store_true", help="a smoke run: 8 tokens, 1 repeat")
    args = ap.parse_args()
    if args.quick:
        args.new_tokens, args.repeats = 8, 1
        args.widths, args.batches, args.texts = [32, 256], [1, 8], [1, 8]
    torch.set_num_threads(args.threads)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, torch {torch.__version__}, "
          f"quantized engine {torch.backends.quantized.engine}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    lm_rows(args)
    translate_rows(args)
    print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
