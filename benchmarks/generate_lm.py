"""Greedy generation speed: attnlab CausalLM vs Hugging Face GPT-2 ``generate``, same weights.

A random GPT-2 (n_embd 384, 6 layers, 6 heads, vocab 1024) is converted with
``attnlab.interop.from_hf``; both generate 256 new tokens after a 16-token prompt, greedy, at
batch 1 and 8, in this process with the same ``torch.set_num_threads``. Prints new tokens/s
(B x new tokens / seconds, best of --repeats, the two run in turns) and the ratio, checks
that both produce the same tokens, and works out two floors per decoding step:
- bytes: every step reads all weights once, so ms/step >= weight bytes / read bandwidth, the
  bandwidth measured here as a matrix-vector product over a 256 MiB matrix (DRAM-bound);
- matmul-only: the step's matrix-vector products alone (each weight once, batch B, no
  attention, no Python between them), timed in a loop; what any implementation that keeps the
  weights in fp32 must spend.
At batch 1 it also times those products through PyTorch's lower-precision CPU kernels (bf16,
oneDNN-packed bf16, fbgemm fp16 weights and int8 dynamic quantisation) and prints the step time
that 5x Hugging Face would need, to show whether any kernel leaves room for it.

With ``--compile`` it also times the cached step through ``torch.compile`` against the eager one.

    python -m benchmarks.generate_lm [--threads 1] [--repeats 5] [--profile] [--compile] [--quick]
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F


def bandwidth_gbs(mib: int = 256, repeats: int = 5) -> float:
    """Read bandwidth (GB/s) of a matrix-vector product over a matrix far larger than L2."""
    W = torch.empty(mib * 2**20 // 4 // 4096, 4096).normal_()
    x = torch.randn(4096)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        torch.mv(W, x)
        best = min(best, time.perf_counter() - t)
    return W.numel() * 4 / best / 1e9


def _step_weights(model) -> list[tuple]:
    """(weight, bias) of every matrix product in one decoding step: each Linear, then the head."""
    linears = [m for m in model.decoder.modules() if isinstance(m, torch.nn.Linear)]
    return [(m.weight, m.bias) for m in linears] + [(model.lm_head.weight, None)]


def _best_ms(step, repeats: int) -> float:
    step()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(repeats):
            step()
        best = min(best, (time.perf_counter() - t) / repeats)
    return best * 1e3


def matmul_only_ms(model, B: int, repeats: int = 20) -> float:
    """ms per step of the step's fp32 matrix products alone (every weight once, batch B, no
    attention, no Python between them), in the layout the step uses: up to
    ``attnlab.nn.quantize.SMALL_BATCH`` rows, x W with W laid out (in, out) (``addmm``, the
    faster kernel on the CPU at batch 1); above it, ``F.linear`` with W as (out, in)."""
    from attnlab.nn.quantize import SMALL_BATCH

    weights = _step_weights(model)
    xs = {w.shape[1]: torch.randn(B, w.shape[1]) for w, _ in weights}
    with torch.inference_mode():
        if B > SMALL_BATCH:
            return _best_ms(lambda: [F.linear(xs[w.shape[1]], w, b) for w, b in weights],
                            repeats)
        in_out = [(w.t().contiguous(), b) for w, b in weights]
        return _best_ms(lambda: [torch.mm(xs[w.shape[0]], w) if b is None else
                                 torch.addmm(b, xs[w.shape[0]], w) for w, b in in_out], repeats)


def low_precision_matmul_ms(model, B: int = 1, repeats: int = 20) -> dict[str, float]:
    """The same matrix products with fewer bytes per weight, through each of PyTorch's CPU
    kernels that take them: what a lower-precision decode step would spend at the least.

    - bf16: weights and input in bfloat16, ``F.linear`` (2 bytes/weight);
    - bf16 packed: oneDNN with the weight reordered once for batch B (the kernel
      ``torch.compile`` uses on CPU; needs a oneDNN build);
    - fp16 weights / int8 dynamic: fbgemm's dynamic-quantised linear (``quantize_dynamic``)
      with fp16 weights, or int8 per-tensor weights and int8 activations quantised per call.
    """
    import warnings

    weights = _step_weights(model)
    xs = {w.shape[1]: torch.randn(B, w.shape[1]) for w, _ in weights}
    out = {}
    with torch.inference_mode():
        wb = [(w.bfloat16(), None if b is None else b.bfloat16()) for w, b in weights]
        xb = {k: x.bfloat16() for k, x in xs.items()}
        out["bf16"] = _best_ms(lambda: [F.linear(xb[w.shape[1]], w, b) for w, b in wb], repeats)
        try:
            packed = [(w.shape[1], torch.ops.mkldnn._reorder_linear_weight(w, B), b) for w, b in wb]
            out["bf16 packed"] = _best_ms(lambda: [
                torch.ops.mkldnn._linear_pointwise(xb[k], p, b, "none", [], "")
                for k, p, b in packed], repeats)
        except (RuntimeError, AttributeError):  # no oneDNN bf16 kernel in this build
            pass
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation notices
            for name, dtype in (("fp16 weights", torch.float16), ("int8 dynamic", torch.qint8)):
                mods = []
                for w, b in weights:
                    lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=b is not None)
                    lin.weight.data.copy_(w)
                    if b is not None:
                        lin.bias.data.copy_(b)
                    mods.append(lin)
                q = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(*mods),
                                                           {torch.nn.Linear}, dtype=dtype)
                out[name] = _best_ms(lambda: [m(xs[m.in_features]) for m in q], repeats)
    return out


def step_ms(model, step, new: int = 200) -> tuple[float, torch.Tensor]:
    """Median ms of ``step`` (``CausalLM.step`` or a compiled one) over ``new`` greedy tokens at
    batch 1 after a 16-token prompt, the cache filled by ``LMStep``; and the tokens."""
    import statistics

    from attnlab.models.lm_generation import LMStep

    ids = torch.randint(0, model.lm_head.out_features, (1, 16),
                        generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        state = LMStep(model, None, 16 + new)
        logits, tokens, times = state(ids), ids, []
        for t in range(new - 1):
            tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], 1)
            start = time.perf_counter()
            logits = step(tokens[:, -1:], state.cache, positions=state.pos[:, t : t + 1])
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3, tokens


def compiled_step(model) -> None:
    """The cached step through ``torch.compile`` (inductor, dynamic shapes for the growing
    cache) against the eager step, batch 1: does compiling remove the step's time outside its
    matrix products?"""
    eager_ms, eager_tokens = step_ms(model, model.step)
    compiled = torch.compile(model.step, dynamic=True)
    start = time.perf_counter()
    step_ms(model, compiled, new=8)
    compile_s = time.perf_counter() - start
    compiled_ms, compiled_tokens = step_ms(model, compiled)
    eager_again, _ = step_ms(model, model.step)
    print(f"torch.compile of the cached step (batch 1, median of 199 steps): eager "
          f"{eager_ms:.2f} / {eager_again:.2f} ms, compiled {compiled_ms:.2f} ms "
          f"({compiled_ms / min(eager_ms, eager_again):.2f}x eager; compiled in "
          f"{compile_s:.1f} s), matmul-only {matmul_only_ms(model, 1):.2f} ms, same tokens "
          f"{torch.equal(eager_tokens, compiled_tokens)}")


def timed_alternating(fns: dict, repeats: int) -> tuple[dict, dict]:
    """Best-of-``repeats`` seconds of each function, run in turns (A, B, A, B, ...) so that a
    change in the machine's load hits both alike; returns (seconds, last outputs)."""
    outs = {name: fn() for name, fn in fns.items()}  # warm-up (allocator, kernels)
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            t = time.perf_counter()
            outs[name] = fn()
            best[name] = min(best[name], time.perf_counter() - t)
    return best, outs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--profile", action="store_true", help="torch.profiler table of attnlab at batch 1")
    ap.add_argument("--compile", action="store_true",
                    help="also time the cached step through torch.compile (compiles for ~10 s)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 32 new tokens, 1 repeat")
    args = ap.parse_args()
    if args.quick:
        args.new_tokens, args.repeats = 32, 1

    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel

    from attnlab.interop import from_hf

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    hf = GPT2LMHeadModel(GPT2Config(vocab_size=1024, n_embd=384, n_layer=6, n_head=6,
                                    n_positions=512, bos_token_id=None, eos_token_id=None)).eval()
    ours = from_hf(hf).eval()
    n = args.new_tokens
    weight_bytes = sum(p.numel() * p.element_size() for name, p in ours.named_parameters()
                       if "positional_encoding" not in name)  # one position row is read per step
    bw = bandwidth_gbs()
    floor_ms = weight_bytes / (bw * 1e9) * 1e3
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"threads {args.threads}")
    print(f"weights {weight_bytes / 2**20:.1f} MiB; read bandwidth (256 MiB GEMV) {bw:.1f} GB/s "
          f"-> bytes floor {floor_ms:.2f} ms/step ({1e3 / floor_ms:.0f} steps/s)")
    print(f"{'batch':>5} {'hf tok/s':>9} {'ours tok/s':>10} {'ratio':>6} {'hf ms/step':>10} "
          f"{'ours ms/step':>12} {'matmul-only':>11} {'bytes floor':>11} {'same':>5}")
    for B in args.batches:
        ids = torch.randint(0, 1024, (B, 16))
        mask = torch.ones_like(ids)
        def run_hf():
            with torch.inference_mode():
                return hf.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n,
                                   do_sample=False, pad_token_id=0)

        seconds, outs = timed_alternating({"hf": run_hf, "ours": lambda: ours.generate(ids, n)},
                                          args.repeats)
        (t_hf, t_ours), (out_hf, out_ours) = seconds.values(), outs.values()
        mm = matmul_only_ms(ours, B)
        if B == 1:
            hf_step_1 = t_hf / n * 1e3
        print(f"{B:>5} {B * n / t_hf:>9.0f} {B * n / t_ours:>10.0f} {t_hf / t_ours:>6.2f} "
              f"{t_hf / n * 1e3:>10.2f} {t_ours / n * 1e3:>12.2f} {mm:>11.2f} {floor_ms:>11.2f} "
              f"{str(torch.equal(out_hf, out_ours)):>5}")
    if 1 in args.batches:
        # How far a lower-precision step could go: its matrix products alone, per kernel.
        need = hf_step_1 / 5
        print(f"5x Hugging Face at batch 1 needs <= {need:.2f} ms/step; matrix products alone "
              f"at batch 1 (ms/step): fp32 {matmul_only_ms(ours, 1):.2f}, " + ", ".join(
                  f"{k} {v:.2f}" for k, v in low_precision_matmul_ms(ours).items()))
    # Per-step overhead alone: the same 6 layers and 6 heads but 12 wide (weights ~nothing), so
    # ms/step is Python, dispatch and bookkeeping, not arithmetic.
    tiny_hf = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=12, n_layer=6, n_head=6,
                                         n_positions=512, bos_token_id=None,
                                         eos_token_id=None)).eval()
    tiny = from_hf(tiny_hf).eval()
    ids = torch.randint(0, 64, (1, 16))

    def run_tiny_hf():
        with torch.inference_mode():
            return tiny_hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                                    min_new_tokens=n, do_sample=False, pad_token_id=0)

    seconds, outs = timed_alternating({"hf": run_tiny_hf, "ours": lambda: tiny.generate(ids, n)},
                                      args.repeats)
    print(f"overhead only (n_embd 12, batch 1): hf {seconds['hf'] / n * 1e3:.2f} ms/step, "
          f"attnlab {seconds['ours'] / n * 1e3:.2f} ms/step, ratio "
          f"{seconds['hf'] / seconds['ours']:.2f}, same {torch.equal(outs['hf'], outs['ours'])}")
    if args.compile:
        compiled_step(ours)
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        ids = torch.randint(0, 1024, (1, 16))
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            ours.generate(ids, 64)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


if __name__ == "__main__":
    main()
