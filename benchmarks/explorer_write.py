"""Writing the attention page of a long input — 4 layers × 4 heads × 512 tokens, ~33 MB — with
its weights checked by NumPy (by ``AttentionView`` and again as its page is written, from its
data as it is then) and written from their distinct values (``attnlab.explorer.json_text``),
against the writer it replaced in the same process: the page checked twice, by a Python loop
over every weight, and written by ``json.dumps``.

    python -m benchmarks.explorer_write [--quick]

Prints each step's time (median of ``--repeats``), the ratio old/new, the pages' sizes, and
whether the two pages are the same bytes (they must be).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time

import numpy as np

from attnlab.explorer import AttentionView, Layer, attention_data
from attnlab.explorer.data import KINDS, _check_shown_record
from attnlab.explorer.page import _page


def old_check_data(data):
    """The check the page ran twice before (AttentionView's and render_html's): every weight
    looked at from Python."""
    for layer in data["layers"]:
        q = layer.get("query_tokens", data["query_tokens"])
        k = layer.get("key_tokens", data["key_tokens"])
        w = layer["weights"]
        if layer["kind"] not in KINDS or not w or any(
                len(head) != len(q) or any(len(row) != len(k) for row in head) for head in w):
            raise ValueError("shape")
        if any(not math.isfinite(x) for head in w for row in head for x in row):
            raise ValueError("not finite")
        mean = layer.get("mean", [[0.0] * len(k)] * len(q))
        if not isinstance(mean, list) or len(mean) != len(q) or any(
                not isinstance(row, list) or len(row) != len(k)
                or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in row)
                for row in mean):
            raise ValueError("mean")
        masked = layer.get("masked", [[0] * len(k)] * len(q))
        if not isinstance(masked, list) or (len(masked) != len(q) or any(
                len(row) != len(k) or any(x not in (0, 1) for x in row) for row in masked)):
            raise ValueError("masked")
    if data.get("record") is not None:
        _check_shown_record(data["record"])


def old_json(data) -> str:
    text = json.dumps(data, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def old_page(data) -> str:
    old_check_data(data)  # AttentionView(data)
    old_check_data(data)  # render_html(data)
    return _page(data.get("title"), old_json(data))


def page_data(layers: int, heads: int, tokens: int, masked: bool = True):
    rng = np.random.default_rng(0)
    w = rng.random((layers, heads, tokens, tokens)) ** 4  # (L, H, T, T)
    if masked:  # padded keys, as a batch's shorter input has them: grey cells, "masked"
        w[..., tokens - tokens // 8:] = 0.0
    w /= w.sum(-1, keepdims=True)
    names = [f"t{i}" for i in range(tokens)]
    return attention_data([Layer(f"layers.{i}", "self", w[i]) for i in range(layers)], names,
                          title=f"{layers} x {heads} x {tokens}")


def timed(fn, repeats):
    """(median wall seconds, median CPU seconds of this process, fn's result): on a shared
    machine the CPU time is the steadier of the two."""
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="1 repeat and 256 tokens")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    repeats = 1 if args.quick else args.repeats
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    for shape in ((4, 4, 64), (4, 4, 256 if args.quick else 512)):
        t_data, c_data, data = timed(lambda: page_data(*shape), 1)
        t_old, c_old, old = timed(lambda: old_page(data), repeats)
        t_new, c_new, new = timed(lambda: AttentionView(data).html(), repeats)
        same = old == new
        print(f"{shape[0]} layers x {shape[1]} heads x {shape[2]} tokens: page "
              f"{len(new.encode()) / 1e6:.1f} MB (old {len(old.encode()) / 1e6:.1f} MB), "
              f"same bytes: {same}")
        print(f"  {'':38s} {'wall s':>8s} {'CPU s':>8s}")
        print(f"  {'attention_data (not changed)':38s} {t_data:8.3f} {c_data:8.3f}")
        print(f"  {'old: check twice + json.dumps':38s} {t_old:8.3f} {c_old:8.3f}")
        print(f"  {'new: check twice (NumPy) + json_text':38s} {t_new:8.3f} {c_new:8.3f}   "
              f"ratio old/new: wall {t_old / t_new:.1f}, CPU {c_old / c_new:.1f}")
        if not same:
            raise SystemExit("the pages differ")


if __name__ == "__main__":
    main()
