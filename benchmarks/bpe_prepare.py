"""``attnlab prepare --tokenizer bpe``: the whole prepare of a text corpus, with each 1 MB chunk
encoded as one string (as before) against in pieces of ``BPE_ENCODE_CHARS`` characters given
to the library together (``attnlab.data.corpus._encode_text``), in one process, alternating.

The corpus: ``--megabytes`` of lines of 5 to 20 words drawn from 5,000 made-up words (seeded).
Both sides fit the same 1,000-id tokenizer and must write the same token files (checked).
Then the encoding alone, the part that changed, with one fitted tokenizer. Prints each
side's mean wall and CPU time (this process's, which another job's load
inflates less) over ``--repeats`` alternations and the ratios before/now.

    python -m benchmarks.bpe_prepare [--megabytes 4] [--repeats 2] [--quick]
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from unittest import mock

from attnlab.data import corpus


def write(path: Path, megabytes: float) -> None:
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    lines, size = [], 0
    while size < megabytes * 1e6:
        line = " ".join(rng.choice(words) for _ in range(rng.randint(5, 20))) + ".\n"
        lines.append(line)
        size += len(line)
    path.write_text("".join(lines), encoding="utf-8")


def timed(text: Path, out: Path, whole: bool) -> tuple[float, float, bytes]:
    """(wall seconds, CPU seconds of this process, the token files' bytes) of one prepare."""
    shutil.rmtree(out, ignore_errors=True)
    as_before = mock.patch.object(corpus, "_encode_text", lambda tok, t: tok.encode(t))
    start, cpu = time.perf_counter(), time.process_time()
    if whole:
        with as_before:
            corpus.prepare([text], out, tokenizer="bpe")
    else:
        corpus.prepare([text], out, tokenizer="bpe")
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return seconds, cpu, (out / "train.bin").read_bytes() + (out / "val.bin").read_bytes()


def encoding_alone(text: Path, repeats: int) -> tuple[list[float], list[float]]:
    """(wall, CPU) seconds, summed over ``repeats`` alternations, of encoding the text's 1 MB
    chunks whole and in pieces with one tokenizer fitted as prepare fits it."""
    chunks = [c for _, c in corpus.iter_text_chunks([text])]
    whole, pieces = [0.0, 0.0], [0.0, 0.0]
    with corpus._one_tokenizer_thread():
        tok = corpus._fit_tokenizer([text], "bpe", None, corpus.CHUNK_CHARS, "text")
        for _ in range(repeats):
            found = []
            for side, encode in ((whole, tok.encode),
                                 (pieces, lambda c: corpus._encode_text(tok, c))):
                start, cpu = time.perf_counter(), time.process_time()
                found.append([encode(c) for c in chunks])
                side[0] += time.perf_counter() - start
                side[1] += time.process_time() - cpu
            assert found[0] == found[1], "the two sides encoded different ids"
    return whole, pieces


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 MB, once")
    parser.add_argument("--megabytes", type=float, default=4.0)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    megabytes, repeats = (1.0, 1) if args.quick else (args.megabytes, args.repeats)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "corpus.txt"
        write(text, megabytes)
        before, now = [0.0, 0.0], [0.0, 0.0]  # wall, CPU
        for _ in range(repeats):  # alternate, so that load changes fall on both sides
            *first, old = timed(text, Path(tmp) / "whole", whole=True)
            *second, new = timed(text, Path(tmp) / "pieces", whole=False)
            print(f"  whole {first[0]:.2f} s (CPU {first[1]:.2f} s), pieces {second[0]:.2f} s "
                  f"(CPU {second[1]:.2f} s), load {os.getloadavg()[0]:.2f}", flush=True)
            before = [a + b for a, b in zip(before, first)]
            now = [a + b for a, b in zip(now, second)]
            assert old == new, "the two sides wrote different token files"
        whole, pieces = encoding_alone(text, repeats)
    print(f"{megabytes:g} MB, bpe: 1 MB chunks whole {before[0] / repeats:.2f} s (CPU "
          f"{before[1] / repeats:.2f} s), in pieces of {corpus.BPE_ENCODE_CHARS} characters "
          f"{now[0] / repeats:.2f} s (CPU {now[1] / repeats:.2f} s), same tokens; ratio "
          f"before/now: wall {before[0] / now[0]:.2f}, CPU {before[1] / now[1]:.2f}")
    print(f"  the encoding alone: whole {whole[0] / repeats:.2f} s (CPU {whole[1] / repeats:.2f} "
          f"s), pieces {pieces[0] / repeats:.2f} s (CPU {pieces[1] / repeats:.2f} s); ratio "
          f"before/now: wall {whole[0] / pieces[0]:.2f}, CPU {whole[1] / pieces[1]:.2f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
