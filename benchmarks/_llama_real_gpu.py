"""``benchmarks/llama_real.py --parts gpu``: the real-size measurements that need a GPU.

On each real-shaped checkpoint, in bf16 on ``--device`` (cuda on a lent GPU; ``--device cpu``
runs the same code as a smoke test):
- generation: greedy, batch 1, KV cache, the sides alternating; tokens/s of attnlab's
  ``CausalLM.generate`` against ``transformers``' ``generate`` (goal: attnlab >= transformers);
- one LoRA fine-tuning step: rank 16, alpha 32 on the attention projections (attnlab's
  ``add_lora``: the stacked q/k/v and the output projection; peft's ``LoraConfig`` on
  q_proj, k_proj, v_proj, o_proj), forward + next-token cross-entropy + backward + AdamW
  (lr 1e-4) on ``--lora-batch`` x ``--lora-tokens`` random ids; median milliseconds of
  ``--lora-steps`` steps after 3 warm-up steps (goal: attnlab <= peft + transformers).
Without peft the LoRA comparison prints "not measured" and the reason.
"""
from __future__ import annotations

import statistics
import time

from benchmarks._real_checkpoints import checkpoint


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def gpu(args) -> None:
    import torch

    from benchmarks.llama_real import _models, _prompt, alternating

    device = args.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("\n== gpu: not measured: no CUDA device here ==")
        return
    n = args.new_tokens
    print(f"\n== gpu ({device}): bf16 generation, batch 1, {args.prompt_tokens} + {n} tokens, "
          f"median of {args.repeats} (goal: attnlab tok/s >= transformers') ==")
    for name in args.models:
        hf, ours = _models(str(checkpoint(name)), torch.bfloat16, device)
        ids = _prompt(ours.vocab_size, args.prompt_tokens, device)
        mask = torch.ones_like(ids)

        def timed(fn):
            def run():
                out = fn()
                _sync(device)
                return out
            return run

        med, outs = alternating({
            "hf": timed(lambda: hf.generate(ids, attention_mask=mask, max_new_tokens=n,
                                            do_sample=False)),
            "ours": timed(lambda: ours.generate(ids, n))}, args.repeats)
        same = torch.equal(outs["hf"].cpu(), outs["ours"].cpu())
        print(f"{name}: transformers {n / med['hf']:.1f} tok/s, attnlab {n / med['ours']:.1f} "
              f"tok/s, ratio {med['hf'] / med['ours']:.2f} (attnlab / transformers tok/s), "
              f"same tokens {same}", flush=True)
        lora(args, name, hf, ours)
        del hf, ours
        if device.startswith("cuda"):
            torch.cuda.empty_cache()


def _step_ms(model, logits_of, ids, steps: int, device: str) -> float:
    """Median ms of forward + cross-entropy + backward + AdamW on ``model``'s trainable
    parameters, after 3 warm-up steps."""
    import torch
    import torch.nn.functional as F

    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    times = []
    for i in range(3 + steps):
        _sync(device)
        start = time.perf_counter()
        logits = logits_of(ids[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        _sync(device)
        if i >= 3:
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def lora(args, name: str, hf, ours) -> None:
    import torch

    from attnlab.nn.lora import add_lora

    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, ours.vocab_size, (args.lora_batch, args.lora_tokens + 1),
                        generator=g).to(args.device)
    ours.train()
    add_lora(ours, rank=16, alpha=32)
    ours_ms = _step_ms(ours, ours, ids, args.lora_steps, args.device)
    trainable = sum(p.numel() for p in ours.parameters() if p.requires_grad)
    try:
        import peft
    except ImportError:
        print(f"{name} LoRA step: attnlab {ours_ms:.1f} ms ({trainable} trainable); peft: "
              f"not measured (peft is not installed here)")
        return
    config = peft.LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    theirs = peft.get_peft_model(hf.train(), config)
    hf_ms = _step_ms(theirs, lambda x: theirs(input_ids=x).logits, ids, args.lora_steps,
                     args.device)
    theirs_trainable = sum(p.numel() for p in theirs.parameters() if p.requires_grad)
    print(f"{name} LoRA step ({args.lora_batch} x {args.lora_tokens} tokens): attnlab "
          f"{ours_ms:.1f} ms ({trainable} trainable), peft + transformers {hf_ms:.1f} ms "
          f"({theirs_trainable} trainable), ratio {ours_ms / hf_ms:.2f} (goal <= 1)",
          flush=True)
