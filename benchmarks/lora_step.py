"""A LoRA fine-tuning step: attnlab's ``LoRALinear`` against peft + transformers on one model.

    python -m benchmarks.lora_step [--quick] [--threads 2] [--repeats 5] [--steps 5]
        [--device cpu|cuda] [--targets attention|all-linear] [--layers]

A random Llama-shaped ``LlamaForCausalLM`` (width 512, 8 layers, 8 heads of which 2 key/value
heads, SwiGLU width 1408, vocabulary 8000; ``--quick``: width 256, 4 layers) is converted with
``attnlab.interop.from_hf``. Both sides get rank-8 LoRA (alpha 16) on the same layers: the
attention projections (peft: q, k, v, o_proj; attnlab: the stacked qkv_proj and o_proj) or every
linear layer of the blocks. A step is a forward over (batch 8, 256 tokens; ``--quick``: 4, 128),
the next-token cross-entropy, the backward and an AdamW step over the trainable parameters.

Three sides run in turns in this process, with the same threads: attnlab, attnlab with the
forward it had before (the merged weight W₀ + (α/r) B A formed every step, then one
product), and peft over transformers. Each turn times ``--steps`` steps after one warm-up step;
the best turn of ``--repeats`` counts. Printed: ms per step of each and the ratios to peft's.

With ``--layers`` it times one ``LoRALinear`` alone instead (rank 8, forward and backward of
the update, the input not trained), both forwards in turns, at a few (tokens, in, out) shapes:
where forming the merged weight costs most (few tokens, wide layers) and least.

Not a test: timings depend on the machine and its load (benchmarks/RESULTS.md).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import time

import torch
import torch.nn.functional as F

SIZES = {"full": dict(hidden=512, layers=8, heads=8, kv_heads=2, ffn=1408, vocab=8000,
                      batch=8, tokens=256),
         "quick": dict(hidden=256, layers=4, heads=4, kv_heads=2, ffn=704, vocab=4000,
                       batch=4, tokens=128)}
RANK, ALPHA = 8, 16.0
PEFT_TARGETS = {"attention": ["q_proj", "k_proj", "v_proj", "o_proj"],
                "all-linear": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                               "down_proj"]}


def hf_model(size: dict):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=size["hidden"], num_hidden_layers=size["layers"],
                         num_attention_heads=size["heads"], num_key_value_heads=size["kv_heads"],
                         intermediate_size=size["ffn"], vocab_size=size["vocab"],
                         max_position_embeddings=size["tokens"], tie_word_embeddings=False)
    return LlamaForCausalLM(config).float()


def _merged_forward(self, x):
    """``LoRALinear.forward`` before the thin products: form W, then one product."""
    return F.linear(x, self.weight, self.bias)


class OldLoRA(torch.nn.Module):
    """An attnlab model whose LoRA layers run the pre-issue-39 forward (the class is patched
    for the duration of each call only, so the other attnlab side is untouched)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        from attnlab.nn.lora import LoRALinear

        new = LoRALinear.forward
        LoRALinear.forward = _merged_forward
        try:
            return self.model(ids)
        finally:
            LoRALinear.forward = new


def make_step(model, logits_of, ids):
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4)

    def step():
        logits = logits_of(model, ids)  # (B, T, V)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step, sum(p.numel() for p in params)


def best_ms(step, steps: int, sync) -> float:
    step()  # warm-up: allocator, optimiser state
    sync()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.perf_counter() - t) / steps * 1e3


LAYER_SHAPES = ((64, 512, 1536), (2048, 512, 1536), (2048, 2048, 2048))


def layer_times(device, repeats: int, sync) -> None:
    """Best ms of one LoRALinear's forward and backward, thin products against the merged
    weight, per shape of LAYER_SHAPES."""
    from attnlab.nn.lora import LoRALinear

    for n, d_in, d_out in LAYER_SHAPES:
        layer = LoRALinear(torch.nn.Linear(d_in, d_out), rank=RANK, alpha=ALPHA).to(device)
        x = torch.randn(n, d_in, device=device)
        best = {}
        for _ in range(repeats):
            for name, forward in (("thin", LoRALinear.forward), ("merged", _merged_forward)):
                sync()
                t = time.perf_counter()
                forward(layer, x).sum().backward()
                sync()
                best[name] = min(best.get(name, float("inf")), time.perf_counter() - t)
                layer.lora_A.grad = layer.lora_B.grad = None
        print(f"  {n} tokens, {d_in} -> {d_out}: thin products {best['thin'] * 1e3:.1f} ms, "
              f"merged weight {best['merged'] * 1e3:.1f} ms, ratio "
              f"{best['thin'] / best['merged']:.2f}")


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--targets", choices=tuple(PEFT_TARGETS), default="attention")
    parser.add_argument("--layers", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if args.layers:
        print(f"machine: {uptime()} ({os.cpu_count()} CPUs); device {device}, "
              f"{torch.get_num_threads()} thread(s); one LoRALinear, rank {RANK}")
        layer_times(device, args.repeats, sync)
        print(f"after: {uptime()}")
        return
    from peft import LoraConfig, get_peft_model

    from attnlab.interop import from_hf
    from attnlab.nn import add_lora

    size = SIZES["quick" if args.quick else "full"]
    hf = hf_model(size)
    ours = from_hf(hf).train()
    old = from_hf(hf).train()
    hf.config.use_cache = False
    peft_model = get_peft_model(hf.train(), LoraConfig(
        r=RANK, lora_alpha=ALPHA, lora_dropout=0.0, target_modules=PEFT_TARGETS[args.targets]))
    add_lora(ours, RANK, ALPHA, targets=args.targets)
    add_lora(old, RANK, ALPHA, targets=args.targets)
    ids = torch.randint(0, size["vocab"], (size["batch"], size["tokens"]), device=device)
    sides = {
        "attnlab": make_step(ours.to(device), lambda m, x: m(x), ids),
        "attnlab, merged-weight forward (before)": make_step(
            OldLoRA(old).to(device), lambda m, x: m(x), ids),
        "peft + transformers": make_step(peft_model.to(device),
                                         lambda m, x: m(input_ids=x, use_cache=False).logits, ids),
    }
    print(f"machine: {uptime()} ({os.cpu_count()} CPUs); device {device}, "
          f"{torch.get_num_threads()} thread(s), torch {torch.__version__}")
    print(f"model: Llama shape {size}; LoRA rank {RANK}, alpha {ALPHA:g}, "
          f"targets {args.targets}; trainable: "
          + ", ".join(f"{name} {n:,}" for name, (_, n) in sides.items()))
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.repeats):  # the sides in turns, so a change of load reaches each
        for name, (step, _) in sides.items():
            times[name].append(best_ms(step, args.steps, sync))
    reference = min(times["peft + transformers"])
    for name, ms in times.items():
        print(f"  {name:<45} {min(ms):9.1f} ms/step (best of {args.repeats}; median "
              f"{sorted(ms)[len(ms) // 2]:.1f})   x{min(ms) / reference:.2f} of peft's")
    print(f"after: {uptime()}")


if __name__ == "__main__":
    main()
