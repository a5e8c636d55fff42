"""Peak memory of attention against sequence length: fused (SDPA) vs reference path.

Each (path, T) runs in a fresh subprocess; its peak resident memory (VmHWM) minus the
resident memory just before the attention call is the attention's own peak. (Not ru_maxrss:
on Linux a child started from a large parent inherits the parent's high-water mark.) The reference path
builds the (B, H, T, T) score matrix (and its softmax); the fused path should not.

    python -m benchmarks.attention_memory [--quick]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, sys, torch
from attnlab.nn import MultiheadAttention, padding_mask
path, T, B, D, H, masked, backward = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "1", sys.argv[7] == "1"
torch.manual_seed(0)
mha = MultiheadAttention(D, D, H)
x = torch.randn(B, T, D, requires_grad=backward)
mask = padding_mask(torch.tensor([T - T // 8] * B), T) if masked else None
with torch.set_grad_enabled(backward):  # warm the kernels up on a short input first
    mha(x[:, :16], None if mask is None else mask[..., :16], return_attention=(path == "reference"))
def status_kb(field):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(field))
base = status_kb("VmRSS:")
with torch.set_grad_enabled(backward):
    out = mha(x, mask, return_attention=(path == "reference"))
    out = out[0] if isinstance(out, tuple) else out
    if backward:
        out.sum().backward()
peak = status_kb("VmHWM:")
print(json.dumps({"peak_mib": (peak - base) / 1024}))
"""


def measure(path: str, T: int, B: int, D: int, H: int, masked: bool, backward: bool) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, path, str(T), str(B), str(D), str(H),
                          str(int(masked)), str(int(backward))],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_mib"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="T up to 1024 only")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    args = ap.parse_args()
    lengths = [256, 512, 1024] if args.quick else [256, 512, 1024, 2048, 4096]
    B, D, H = args.batch, args.dim, args.heads
    print(f"attention peak memory (MiB above the inputs), B={B} D={D} H={H} fp32")
    print(f"{'mode':<22}{'T':>6}{'fused':>10}{'reference':>11}{'ratio':>8}{'B*H*T*T*4':>11}")
    for backward in (False, True):
        for masked in (False, True):
            mode = ("train" if backward else "infer") + (" +pad mask" if masked else "")
            for T in lengths:
                fused = measure("fused", T, B, D, H, masked, backward)
                ref = measure("reference", T, B, D, H, masked, backward)
                scores = B * H * T * T * 4 / 2**20
                ratio = ref / fused if fused > 0 else float("inf")
                print(f"{mode:<22}{T:>6}{fused:>10.1f}{ref:>11.1f}{ratio:>8.1f}{scores:>11.1f}",
                      flush=True)


if __name__ == "__main__":
    main()
