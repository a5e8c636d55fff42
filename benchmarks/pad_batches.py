"""Making an epoch's padded batches of token ids (``attnlab train classify``'s own encoder and
a pretrained one's): the batches as ``make_batches`` pads them now (one tensor from Python
lists) against the way it padded them before (a zero tensor, then a tensor per row copied in),
in one process, alternating, with the results checked equal.

The data: ``--batches`` batches of 32 rows of 5 to 200 ids (seeded). Prints each side's best
time of ``--repeats`` and the ratio before / now.

    python -m benchmarks.pad_batches [--batches 1600] [--repeats 5]
"""
from __future__ import annotations

import argparse
import os
import random
import time

import torch

from attnlab.tasks.classify.runtime import Padding, _pad_ids


def pad_ids_before(ids):
    x = torch.zeros(len(ids), max(map(len, ids)), dtype=torch.long)
    for row, seq in enumerate(ids):
        x[row, : len(seq)] = torch.tensor(seq)
    return x


def pad_pairs_before(p: Padding, encoded):
    T = max(len(ids) for ids, _ in encoded)
    x = torch.full((len(encoded), T), p.pad_id, dtype=torch.long)
    mask, types = torch.zeros_like(x), torch.zeros_like(x)
    for row, (ids, type_ids) in enumerate(encoded):
        cols = slice(0, len(ids)) if p.side == "right" else slice(T - len(ids), T)
        x[row, cols], mask[row, cols] = torch.tensor(ids), 1
        types[row, cols] = torch.tensor(type_ids)
    return (x, mask, types) if p.token_types else (x, mask)


def timed(fn, batches, repeats):
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = [fn(b) for b in batches]
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=1600)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    rng = random.Random(0)
    batches = [[[rng.randrange(1, 1000) for _ in range(rng.randint(5, 200))] for _ in range(32)]
               for _ in range(args.batches)]
    pairs = [[(ids, [0] * len(ids)) for ids in b] for b in batches]
    bert = Padding(pad_id=3, side="left", token_types=True)
    cases = [("own encoder (_pad_ids)", pad_ids_before, _pad_ids, batches),
             ("pretrained, left, token types (Padding.pad)",
              lambda b: pad_pairs_before(bert, b), bert.pad, pairs)]
    print(f"load average {os.getloadavg()[0]:.2f}; {args.batches} batches of 32, "
          f"best of {args.repeats}")
    for name, before, now, data in cases:
        (t_before, a), (t_now, b) = timed(before, data, 1), timed(now, data, 1)
        for _ in range(args.repeats - 1):  # alternating
            t_before = min(t_before, timed(before, data, 1)[0])
            t_now = min(t_now, timed(now, data, 1)[0])
        same = all(torch.equal(u, v) for x, y in zip(a, b)
                   for u, v in zip(*((x, y) if isinstance(x, tuple) else ((x,), (y,)))))
        assert same, name
        print(f"{name}: before {t_before:.3f} s, now {t_now:.3f} s, before / now "
              f"{t_before / t_now:.2f}x (equal tensors)")


if __name__ == "__main__":
    main()
