"""The key/value cache of a sliding-window model: bounded by the window vs keeping every token.

A random Mistral-shaped ``CausalLM`` (RoPE, RMSNorm, SwiGLU, grouped-query attention,
``sliding_window`` W) generates N new tokens greedily after a 16-token prompt, twice in this
process: once with its own caches (``make_cache``: ``KVCache(window=W)``, which keeps the last
W − 1 keys beside the new ones, in at most 2·W steps) and once with plain ``KVCache()``s that
keep every token (what every cache did before). Both must give the same tokens (asserted). It
prints, per side, the bytes the caches' buffers hold at the end (``KVCache.nbytes``: allocated,
not only filled) and their largest over the run, new tokens/s (best of --repeats, the two in
turns), and the ratios.

    python -m benchmarks.sliding_window_cache [--quick] [--threads 1] [--repeats 3]
"""
from __future__ import annotations

import argparse
import time

import torch


def _model(window: int, max_len: int):
    from attnlab.models import CausalLM

    torch.manual_seed(0)
    return CausalLM(1024, model_dim=256, num_heads=8, num_kv_heads=2, num_layers=4,
                    dim_feedforward=683, max_len=max_len, positional="rope", norm="rms",
                    ff="swiglu", bias=False, sliding_window=window).eval()


def _generate(model, prompt: torch.Tensor, n: int, keep_all: bool):
    """(tokens, seconds, the caches' bytes at the end, their largest after any step)."""
    from attnlab.models.lm_generation import LMStep
    from attnlab.nn import KVCache

    if keep_all:  # what every cache did before: no window, every key kept
        model.decoder.make_cache = lambda: [KVCache() for _ in model.decoder.layers]
    step, seq, largest = LMStep(model, None, prompt.shape[1] + n), prompt, 0
    try:
        start = time.perf_counter()
        with torch.inference_mode():
            for _ in range(n):
                seq = torch.cat([seq, step(seq).argmax(-1, keepdim=True)], 1)
                largest = max(largest, sum(c.nbytes() for c in step.cache))
        seconds = time.perf_counter() - start
    finally:
        model.decoder.__dict__.pop("make_cache", None)  # the stack's own method again
    return seq, seconds, sum(c.nbytes() for c in step.cache), largest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="512 new tokens, W 64, one repeat")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=4096)
    ap.add_argument("--window", type=int, default=256)
    args = ap.parse_args()
    n, W, repeats = args.new_tokens, args.window, args.repeats
    if args.quick:
        n, W, repeats = 512, 64, 1
    torch.set_num_threads(args.threads)
    model = _model(W, 16 + n)
    prompt = torch.randint(0, 1024, (1, 16), generator=torch.Generator().manual_seed(1))
    print(f"CausalLM 256 wide, 4 layers, 8 heads (2 key/value heads of 32), sliding window {W}; "
          f"{n} new tokens after 16, greedy, batch 1, {args.threads} thread(s), fp32")
    best = {}
    for _ in range(repeats):
        for keep_all in (False, True):
            seq, seconds, end, largest = _generate(model, prompt, n, keep_all)
            old = best.get(keep_all)
            if old is None or seconds < old[1]:
                best[keep_all] = (seq, seconds, end, largest)
    assert torch.equal(best[False][0], best[True][0]), "the two caches gave different tokens"
    print(f"{'cache':<28}{'end KiB':>10}{'largest KiB':>13}{'tokens/s':>10}")
    for keep_all, name in ((False, "windowed (KVCache(window))"), (True, "every token (KVCache())")):
        _, seconds, end, largest = best[keep_all]
        print(f"{name:<28}{end / 1024:>10.0f}{largest / 1024:>13.0f}{n / seconds:>10.1f}")
    w, a = best[False], best[True]
    print(f"ratio windowed / every token: memory at the end {w[2] / a[2]:.3f}, largest "
          f"{w[3] / a[3]:.3f}, tokens/s {a[1] / w[1]:.2f}x; same tokens: yes")


if __name__ == "__main__":
    main()
