"""Peak memory of one training step of a language model with and without
``--checkpoint-activations``, on the CPU.

Each side runs in a fresh subprocess: its peak resident memory (VmHWM) minus the resident
memory just before the step (the model, its batch and a warm-up on a short input already
there) is what the step's forward and backward held at their worst: the activations kept for
backward, the gradients, and the recomputation's working set with checkpointing. Both sides
run the same model, batch and seed; the script prints each side's peak, its step time and the
ratios. (Not ru_maxrss: a child inherits its parent's high-water mark.)

    python -m benchmarks.checkpoint_memory [--layers 8] [--block 256] [--batch 16]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, sys, time, torch
from attnlab.models import CausalLM
from attnlab.nn.stacks import checkpoint_activations
from attnlab.training.lm import lm_loss
checkpointed, layers, T, B, D = sys.argv[1] == "1", *map(int, sys.argv[2:6])
torch.set_num_threads(1)
torch.manual_seed(0)
model = CausalLM(512, model_dim=D, num_heads=D // 64, num_layers=layers, dim_feedforward=4 * D,
                 max_len=T, dropout=0.1).train()
if checkpointed:
    checkpoint_activations(model)
ids = torch.randint(0, 512, (B, T + 1))
lm_loss(model, ids[:2, :17], ids[:2, 1:18]).backward()  # warm-up: kernels, gradient buffers
model.zero_grad(set_to_none=False)
def status_kb(field):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(field))
base = status_kb("VmRSS:")
start = time.perf_counter()
lm_loss(model, ids[:, :-1], ids[:, 1:]).backward()
seconds = time.perf_counter() - start
print(json.dumps({"peak_mib": (status_kb("VmHWM:") - base) / 1024, "seconds": seconds}))
"""


def measure(checkpointed: bool, layers: int, block: int, batch: int, width: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, "1" if checkpointed else "0", str(layers),
                          str(block), str(batch), str(width)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--block", type=int, default=256)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args()
    import torch

    print(f"machine: torch {torch.__version__}, 1 thread per side; CausalLM width {args.width}, "
          f"{args.layers} layers, vocabulary 512, batch {args.batch} x {args.block} tokens, "
          f"dropout 0.1; forward + backward of one step")
    sides = {}
    for _ in range(args.repeats):  # interleaved, the best of each
        for name, on in (("kept", False), ("checkpointed", True)):
            got = measure(on, args.layers, args.block, args.batch, args.width)
            best = sides.setdefault(name, got)
            sides[name] = {k: min(best[k], got[k]) for k in got}
    for name, got in sides.items():
        print(f"  {name:<13} peak {got['peak_mib']:8.1f} MiB   step {got['seconds']:.2f} s")
    kept, ckpt = sides["kept"], sides["checkpointed"]
    print(f"checkpointed / kept: memory {ckpt['peak_mib'] / kept['peak_mib']:.2f}x, "
          f"time {ckpt['seconds'] / kept['seconds']:.2f}x")


if __name__ == "__main__":
    main()
