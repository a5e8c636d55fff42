"""Real sizes, measured: attnlab against ``transformers`` on checkpoints of
SmolLM2-135M's and Qwen2.5-0.5B's shapes, both sides in this script.

The checkpoints are built here (``benchmarks/_real_checkpoints.py``): transformers' own classes
at the published shapes, random weights from seed 0, saved as bf16 safetensors (Qwen's sharded
with its index) under ``~/.cache/attnlab-bench``. Speed and memory depend on the shapes, not
on the values.

1. load: peak memory of loading each checkpoint in bf16, each side in a fresh process:
   ``resource.getrusage`` ru_maxrss after loading (and after one forward pass, which touches
   every weight: transformers keeps them memory-mapped until then), less ru_maxrss after
   importing torch, transformers and attnlab and reading the tokenizer once (its modules,
   ~60 MiB, are not the weights), against the weights' bytes. attnlab:
   ``read_checkpoint(DIR, task="lm", dtype=...)`` (what ``generate DIR --dtype`` reads);
   transformers: ``from_pretrained(DIR, dtype=...)`` and its tokenizer. Goal: <= 1.3x in bf16.
2. speed: greedy generation at batch 1 with the KV cache, ``--prompt-tokens`` random ids then
   ``--new-tokens`` tokens (no eos), attnlab's ``CausalLM.generate`` against
   ``model.generate(do_sample=False)``, in float32 and bf16, the sides alternating,
   ``--repeats`` times each; median wall seconds and the ratio attnlab / transformers (goal
   <= 1), the same for the process's CPU seconds (steadier on a shared machine), and whether
   the two produced the same tokens.
3. int8: ``--quantize int8``'s model (``attnlab.nn.quantize`` of the float32 one) against
   float32: generation time (median, alternating), the weights' MiB (int8 linear layers; the
   embedding stays float32, and a tied head gets its own int8 copy), top-1 agreement of the
   next-token argmax with float32 over ``--positions`` random positions, and the logits'
   relative error |int8 - fp32| / |fp32| (mean over positions). Random weights give nearly
   flat logits, whose argmax a small error flips: the agreement is a floor for real weights.
4. gpu (``--device cuda``, run by ``benchmarks/gpu_check.sh`` on a lent GPU): bf16 generation
   tokens/s against transformers, and one LoRA fine-tuning step (rank 16 on the attention
   projections, AdamW, bf16 weights) against ``peft`` + transformers.

    python -m benchmarks.llama_real [--parts load speed int8] [--models smollm2-135m ...]
                                    [--dtypes float32 bfloat16] [--repeats 3]
                                    [--new-tokens 128] [--threads 1] [--quick]
    python -m benchmarks.llama_real --device cuda --parts gpu
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from benchmarks._real_checkpoints import SHAPES, checkpoint


def _rss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def load_child(side: str, directory: str, dtype: str) -> None:
    """One side's load, in this (fresh) process: prints a JSON line of its memory and time."""
    import torch
    import transformers

    import attnlab.interop.checkpoint as ckpt

    torch.set_num_threads(1)
    transformers.logging.disable_progress_bar()
    # the tokenizer's code (~60 MiB of modules both sides import) is not the weights: read
    # once before the baseline, so the figures are the model's
    transformers.AutoTokenizer.from_pretrained(directory)
    before = _rss()
    start = time.perf_counter()
    if side == "attnlab":
        model = ckpt.read_checkpoint(directory, task="lm", dtype=dtype).model
    else:
        model = transformers.AutoModelForCausalLM.from_pretrained(directory,
                                                                  dtype=getattr(torch, dtype))
        transformers.AutoTokenizer.from_pretrained(directory)
    seconds = time.perf_counter() - start
    loaded = _rss()
    with torch.inference_mode():
        model(torch.zeros(1, 8, dtype=torch.long))
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    print(json.dumps({"weights": weights, "load": loaded - before, "forward": _rss() - before,
                      "seconds": seconds}))


def load(args) -> None:
    print("\n== load: peak memory over the weights' bytes (fresh process each; bf16 goal "
          "<= 1.3x) ==")
    print(f"{'model':14} {'dtype':9} {'side':13} {'weights MiB':>11} {'load MiB':>9} "
          f"{'ratio':>6} {'+fwd MiB':>9} {'ratio':>6} {'seconds':>8}")
    for name in args.models:
        d = str(checkpoint(name))
        for dtype in args.load_dtypes:
            for side in ("attnlab", "transformers"):
                out = subprocess.run([sys.executable, "-m", "benchmarks.llama_real", "--child",
                                      side, d, dtype], capture_output=True, text=True,
                                     env={**os.environ, "PYTHONWARNINGS": "ignore"})
                if out.returncode:
                    print(f"{name} {side} failed:\n{out.stderr[-2000:]}")
                    continue
                r = json.loads(out.stdout.strip().splitlines()[-1])
                mib = 2 ** 20
                print(f"{name:14} {dtype:9} {side:13} {r['weights'] / mib:11.0f} "
                      f"{r['load'] / mib:9.0f} {r['load'] / r['weights']:6.2f} "
                      f"{r['forward'] / mib:9.0f} {r['forward'] / r['weights']:6.2f} "
                      f"{r['seconds']:8.1f}", flush=True)


def _models(d: str, dtype, device: str = "cpu"):
    """(transformers' model, attnlab's) of directory ``d`` in ``dtype``, eos off on both."""
    import torch
    import transformers

    from attnlab.interop.checkpoint import read_checkpoint

    transformers.logging.disable_progress_bar()
    name = str(dtype).removeprefix("torch.")
    hf = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=dtype).to(device).eval()
    hf.generation_config.eos_token_id = None  # random weights: never stop early, either side
    hf.generation_config.pad_token_id = 0
    ours = read_checkpoint(d, task="lm", dtype=name).model.to(device).eval()
    assert next(ours.parameters()).dtype == dtype == next(hf.parameters()).dtype
    del torch
    return hf, ours


def _prompt(vocab: int, n: int, device: str = "cpu"):
    import torch

    return torch.randint(0, vocab, (1, n), generator=torch.Generator().manual_seed(0)).to(device)


CPU_TIMES: dict[str, float] = {}  # the last ``alternating``'s median CPU seconds, by name


def alternating(fns: dict, repeats: int) -> tuple[dict, dict]:
    """Median wall seconds of each function over ``repeats`` runs, in turns whose first side
    alternates (so a change in the machine's load hits both alike), after one warm-up each;
    returns (medians, last outputs). The median process CPU seconds go to ``CPU_TIMES``: on a
    shared machine the wall time includes waiting for a core, the CPU time does not."""
    outs = {k: fn() for k, fn in fns.items()}
    times: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    names = list(fns)
    for r in range(repeats):
        for k in (names if r % 2 == 0 else names[::-1]):
            start, start_cpu = time.perf_counter(), time.process_time()
            outs[k] = fns[k]()
            times[k].append(time.perf_counter() - start)
            cpu[k].append(time.process_time() - start_cpu)
    CPU_TIMES.clear()
    CPU_TIMES.update({k: statistics.median(v) for k, v in cpu.items()})
    return {k: statistics.median(v) for k, v in times.items()}, outs


def speed(args) -> None:
    import torch

    print(f"\n== speed: greedy generation, batch 1, KV cache, {args.prompt_tokens} prompt "
          f"tokens + {args.new_tokens} new, median of {args.repeats} (goal: ratio <= 1) ==")
    print(f"{'model':14} {'dtype':9} {'hf s':>7} {'ours s':>7} {'hf tok/s':>9} "
          f"{'ours tok/s':>10} {'ratio':>6} {'hf cpu s':>8} {'ours cpu s':>10} {'cpu ratio':>9}"
          f"  same tokens")
    for name in args.models:
        d = str(checkpoint(name))
        for dtype in (getattr(torch, t) for t in args.dtypes):
            hf, ours = _models(d, dtype)
            ids = _prompt(ours.vocab_size, args.prompt_tokens)
            mask = torch.ones_like(ids)
            n = args.new_tokens
            med, outs = alternating({
                "hf": lambda: hf.generate(ids, attention_mask=mask, max_new_tokens=n,
                                          do_sample=False),
                "ours": lambda: ours.generate(ids, n)}, args.repeats)
            a, b = outs["hf"][0, ids.shape[1]:], outs["ours"][0, ids.shape[1]:]
            same = "yes" if torch.equal(a, b) else (
                f"no: first difference at new token {int((a != b).nonzero()[0])}")
            print(f"{name:14} {str(dtype)[6:]:9} {med['hf']:7.2f} {med['ours']:7.2f} "
                  f"{n / med['hf']:9.1f} {n / med['ours']:10.1f} "
                  f"{med['ours'] / med['hf']:6.2f} {CPU_TIMES['hf']:8.2f} "
                  f"{CPU_TIMES['ours']:10.2f} {CPU_TIMES['ours'] / CPU_TIMES['hf']:9.2f}  {same}",
                  flush=True)
            del hf, ours


def _mib(model) -> float:
    """MiB of ``model``'s weights: its float parameters (a tied one once) and the int8
    linear layers' packed weights with their per-channel scales."""
    import torch

    total = sum(p.numel() * p.element_size() for p in model.parameters())
    for m in model.modules():
        if isinstance(m, torch.ao.nn.quantized.dynamic.Linear):
            w = m.weight()
            total += w.numel() + 8 * w.q_per_channel_scales().numel()  # int8, fp64 scales
    return total / 2 ** 20


def int8(args) -> None:
    import torch

    from attnlab.nn.quantize import quantize

    print(f"\n== int8: --quantize int8 against float32 (generation median of {args.repeats}; "
          f"top-1 agreement over {args.positions} positions) ==")
    print(f"{'model':14} {'fp32 s':>7} {'int8 s':>7} {'int8/fp32':>9} {'hf fp32 s':>9} "
          f"{'int8/hf':>7} {'MiB fp32':>8} {'int8':>6} {'top-1 agree':>11} {'logit err':>9}")
    for name in args.models:
        d = str(checkpoint(name))
        hf, ours = _models(d, torch.float32)
        q = quantize(ours)
        ids = _prompt(ours.vocab_size, args.prompt_tokens)
        mask, n = torch.ones_like(ids), args.new_tokens
        med, _ = alternating({
            "fp32": lambda: ours.generate(ids, n), "int8": lambda: q.generate(ids, n),
            "hf": lambda: hf.generate(ids, attention_mask=mask, max_new_tokens=n,
                                      do_sample=False)}, args.repeats)
        text = _prompt(ours.vocab_size, args.positions)
        with torch.inference_mode():
            f, g = ours(text), q(text)  # (1, positions, V) each
        agree = (f.argmax(-1) == g.argmax(-1)).float().mean().item()
        err = ((g - f).norm(dim=-1) / f.norm(dim=-1)).mean().item()  # relative, per position
        print(f"{name:14} {med['fp32']:7.2f} {med['int8']:7.2f} "
              f"{med['int8'] / med['fp32']:9.2f} {med['hf']:9.2f} "
              f"{med['int8'] / med['hf']:7.2f} {_mib(ours):8.0f} {_mib(q):6.0f} "
              f"{agree:11.3f} {err:9.3f}", flush=True)
        del hf, ours, q


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", nargs="+", default=["load", "speed", "int8"],
                    choices=["load", "speed", "int8", "gpu"])
    ap.add_argument("--models", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    ap.add_argument("--load-dtypes", nargs="+", default=["bfloat16", "float32"])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"],
                    choices=["float32", "bfloat16"], help="the speed part's dtypes")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--positions", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="the gpu part's device (cuda)")
    ap.add_argument("--lora-batch", type=int, default=4)
    ap.add_argument("--lora-tokens", type=int, default=512)
    ap.add_argument("--lora-steps", type=int, default=10)
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: the smaller model, 8 new tokens, 1 repeat")
    ap.add_argument("--child", nargs=3, metavar=("SIDE", "DIR", "DTYPE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return load_child(*args.child)
    if args.quick:
        args.models, args.new_tokens, args.repeats, args.positions = (
            ["smollm2-135m"], 8, 1, 40)
        args.lora_batch, args.lora_tokens, args.lora_steps = 1, 16, 2
    import torch
    import transformers

    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; torch {torch.__version__}, "
          f"transformers {transformers.__version__}, {args.threads} thread(s); load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("weights: random at the real shapes (speed and memory depend on shapes, not values)")
    if "gpu" in args.parts:
        from benchmarks._llama_real_gpu import gpu

        gpu(args)
    for part in ("load", "speed", "int8"):
        if part in args.parts:
            globals()[part](args)


if __name__ == "__main__":
    main()
