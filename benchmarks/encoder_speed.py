"""Training and inference speed of attnlab's TransformerEncoder against torch.nn and Hugging Face.

Three encoders of the same architecture (BERT-like: post-LN, GELU):
  ours   attnlab.nn.TransformerEncoder
  torch  torch.nn.TransformerEncoder(TransformerEncoderLayer(batch_first=True))
  hf     transformers.BertModel(attn_implementation="sdpa"), built from a BertConfig (no
         download) and fed ``inputs_embeds``, so it also adds position embeddings and a LayerNorm
         (under 1% of the work).

Dropout is 0 by default, so that the three compute the same function and training uses the
fused attention kernels. With ``--dropout 0.1`` the work differs: attention-weight dropout sends
every model to the unfused "math" attention, and BERT has no dropout inside its feed-forward
network (3 dropout sites per layer) where attnlab and torch.nn have one (4 sites, the largest
on the (B, T, FF) hidden activations).

Training step = forward, loss (mean square of the output), backward, AdamW step. Inference =
eval mode under no_grad; there torch.nn takes its "fast path" (fused encoder-layer kernel, and
nested tensors that skip padding when a padding mask is given). The models run in turn, round
after round, in one process; times are medians over rounds and each ratio is the median of the
per-round ratios. The machine this was written on has 2 cores that other jobs share: alternating
puts every model under the same load, and medians discard the rounds a burst of load hit.

FLOPs (multiply-add = 2), with P = 4·D² + 2·D·FF the matmul weights of one layer:
  forward, per token per layer:  2·P            (Q, K, V, output projections and the FFN)
                                + 2·2·T·D       (QKᵀ and the weighted sum AV, T keys each)
  training = 3 × forward          (backward costs two forwards: grads of inputs and of weights)
LayerNorm, softmax, GELU, dropout and AdamW are left out (memory-bound, not FLOPs-bound).
The machine's peak is the median rate of a 2048×2048 fp32 matmul timed in the same rounds.
Padded runs pass a padding mask (lengths uniform in [T/2, T]) but count all B·T positions.

    python -m benchmarks.encoder_speed            # D=256 H=8 L=4 FF=1024 T=128 B=32, fp32
    python -m benchmarks.encoder_speed --quick    # a small smoke run
"""
from __future__ import annotations

import argparse
import statistics
import time
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from attnlab.nn import TransformerEncoder, padding_mask


@dataclass(frozen=True)
class Shape:
    D: int = 256
    H: int = 8
    L: int = 4
    FF: int = 1024
    T: int = 128
    B: int = 32

    @property
    def tokens(self) -> int:
        return self.B * self.T

    def forward_flops_per_token(self) -> float:
        P = 4 * self.D**2 + 2 * self.D * self.FF
        return self.L * (2 * P + 2 * 2 * self.T * self.D)


QUICK = Shape(D=64, H=4, L=2, FF=128, T=32, B=8)


# ---- the three models, each as (module, forward(x, lengths or None) -> (B, T, D)) ------------
def build_ours(s: Shape, dropout: float):
    model = TransformerEncoder(s.L, input_dim=s.D, num_heads=s.H, dim_feedforward=s.FF,
                               dropout=dropout, attention_dropout=dropout, activation="gelu")

    def forward(x, lengths=None):
        return model(x, None if lengths is None else padding_mask(lengths, s.T))
    return model, forward


def build_torch(s: Shape, dropout: float):
    layer = nn.TransformerEncoderLayer(s.D, s.H, s.FF, dropout, activation="gelu",
                                       batch_first=True)
    model = nn.TransformerEncoder(layer, s.L, enable_nested_tensor=True)

    def forward(x, lengths=None):
        if lengths is None:
            return model(x)
        pad = torch.arange(s.T)[None, :] >= lengths[:, None]  # torch's convention: True = pad
        return model(x, src_key_padding_mask=pad)
    return model, forward


def build_hf(s: Shape, dropout: float):
    from transformers import BertConfig, BertModel  # optional dependency: imported only here
    from transformers.utils import logging
    logging.set_verbosity_error()
    config = BertConfig(vocab_size=8, hidden_size=s.D, num_hidden_layers=s.L,
                        num_attention_heads=s.H, intermediate_size=s.FF, hidden_act="gelu",
                        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
                        max_position_embeddings=s.T, attn_implementation="sdpa")
    model = BertModel(config, add_pooling_layer=False)

    def forward(x, lengths=None):
        mask = None if lengths is None else (torch.arange(s.T)[None, :] < lengths[:, None]).long()
        return model(inputs_embeds=x, attention_mask=mask).last_hidden_state
    return model, forward


BUILDERS = {"ours": build_ours, "torch": build_torch, "hf": build_hf}


# ---- timing ----------------------------------------------------------------------------------
def training_step(forward: Callable, optimizer, x: torch.Tensor, lengths) -> Callable:
    def step():
        optimizer.zero_grad(set_to_none=True)
        forward(x, lengths).square().mean().backward()
        optimizer.step()
    return step


def inference_step(forward: Callable, x: torch.Tensor, lengths) -> Callable:
    def step():
        with torch.no_grad():
            forward(x, lengths)
    return step


def matmul_step(n: int) -> Callable:
    """An (n, n) @ (n, n) fp32 matmul: 2·n³ FLOPs, the machine's best case."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    return lambda: a @ b


def alternate(steps: dict[str, Callable], rounds: int, repeats: int) -> dict[str, list[float]]:
    """Seconds per call of each function in each round, timing them in turn, round after round."""
    for fn in steps.values():  # warm-up: allocator, kernels, optimizer state
        fn()
    times = {name: [] for name in steps}
    names = list(steps)
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:  # rotate who goes first
            fn = steps[name]
            start = time.perf_counter()
            for _ in range(repeats):
                fn()
            times[name].append((time.perf_counter() - start) / repeats)
    return times


# ---- report ----------------------------------------------------------------------------------
def report(title: str, times: dict[str, list[float]], s: Shape, flops_per_token: float,
           n: int) -> None:
    """One table of medians. The peak is the interleaved matmul's median rate, so it saw the same
    load; the ratios are medians of per-round ratios, so a burst of load that slows one round
    slows both sides of its ratio."""
    seconds = {name: statistics.median(t) for name, t in times.items()}
    peak = 2 * n**3 / seconds.pop("matmul") / 1e9
    print(f"\n{title}  (fp32 matmul peak in these rounds: {peak:.0f} GFLOP/s)")
    print(f"{'model':<7}{'ms/step':>10}{'tokens/s':>12}{'GFLOP/s':>10}{'of peak':>9}")
    for name, sec in seconds.items():
        gflops = flops_per_token * s.tokens / sec / 1e9
        print(f"{name:<7}{1e3 * sec:>10.1f}{s.tokens / sec:>12,.0f}{gflops:>10.1f}"
              f"{gflops / peak:>9.0%}")
    ratios = {name: statistics.median(a / b for a, b in zip(times[name], times["ours"]))
              for name in seconds if name != "ours"}
    print("throughput ratios (median of rounds): "
          + ", ".join(f"ours/{name} = {r:.2f}x" for name, r in ratios.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small shape and few rounds (smoke run)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds of alternation (default 9)")
    ap.add_argument("--repeats", type=int, default=2, help="steps per model per round")
    ap.add_argument("--dropout", type=float, default=0.0,
                    help="dropout on every sub-layer and attention weights (BERT uses 0.1)")
    ap.add_argument("--models", default="ours,torch,hf", help="comma-separated subset")
    args = ap.parse_args()
    s = QUICK if args.quick else Shape()
    rounds = args.rounds or (2 if args.quick else 9)
    n = 512 if args.quick else 2048
    torch.manual_seed(0)
    warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")

    print(f"encoder speed: D={s.D} H={s.H} L={s.L} FF={s.FF} T={s.T} B={s.B} fp32, "
          f"dropout={args.dropout}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"median of {rounds} rounds x {args.repeats} steps")
    print(f"FLOPs per token: forward {s.forward_flops_per_token() / 1e6:.2f} M, "
          f"training {3 * s.forward_flops_per_token() / 1e6:.2f} M")

    built = {name: BUILDERS[name](s, args.dropout) for name in args.models.split(",")}
    optimizers = {name: torch.optim.AdamW(model.parameters()) for name, (model, _) in built.items()}
    x = torch.randn(s.B, s.T, s.D)
    padded = torch.randint(s.T // 2, s.T + 1, (s.B,))  # lengths uniform in [T/2, T]
    for mode, lengths in (("training", None), ("training", padded),
                          ("inference", None), ("inference", padded)):
        steps = {}
        for name, (model, forward) in built.items():
            model.train(mode == "training")
            steps[name] = (training_step(forward, optimizers[name], x, lengths)
                           if mode == "training" else inference_step(forward, x, lengths))
        steps["matmul"] = matmul_step(n)
        title = ("training (forward + backward + AdamW)" if mode == "training"
                 else "inference (eval, no_grad)")
        title += ", no padding" if lengths is None else ", padded: lengths uniform in [T/2, T]"
        flops = s.forward_flops_per_token() * (3 if mode == "training" else 1)
        report(title, alternate(steps, rounds, args.repeats), s, flops, n)


if __name__ == "__main__":
    main()
