"""Peak memory and speed of ``attnlab prepare`` on a Parquet file against the same text as a
plain text file, at two sizes: a table is read a batch of rows at a time, so its peak should
not grow with the file, as a text file's does not.

Each side runs in a fresh subprocess (``prepare`` with the char tokeniser) and reports its
peak resident memory (VmHWM, read from /proc at the end: not ru_maxrss, which a child inherits
from its parent) and its time. The Parquet file holds one document (about 1 KB) per row in row
groups of ``--row-group`` rows, as pyarrow writes them; the text file holds the same documents
one after another. The script prints each run and the ratios.

    python -m benchmarks.columnar_prepare [--mb 8 32] [--row-group 65536]
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys, time
from attnlab.data.corpus import prepare
start = time.perf_counter()
prepare([sys.argv[1]], sys.argv[2], tokenizer="char")
seconds = time.perf_counter() - start
with open("/proc/self/status") as f:
    peak = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
print(json.dumps({"peak_mib": peak / 1024, "seconds": seconds}))
"""

WORDS = "the of and to in a is that for it as was with be by on not he this are or his".split()


def documents(megabytes: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    docs, size = [], 0
    while size < megabytes << 20:
        doc = " ".join(rng.choice(WORDS) for _ in range(250)) + "\n"
        docs.append(doc)
        size += len(doc)
    return docs


def run(source: Path, out: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(source), str(out)], check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--row-group", type=int, default=65536)
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for mb in args.mb:
            docs = documents(mb)
            text, table = tmp / f"{mb}.txt", tmp / f"{mb}.parquet"
            text.write_text("".join(docs))
            pq.write_table(pa.table({"text": docs}), table, row_group_size=args.row_group)
            for kind, source in (("text", text), ("parquet", table)):
                results[kind, mb] = found = run(source, tmp / f"{kind}-{mb}")
                print(f"{kind:8} {mb:4} MB of text ({source.stat().st_size / 2**20:.1f} MiB on disk): "
                      f"peak {found['peak_mib']:.0f} MiB, {found['seconds']:.1f} s")
    small, large = args.mb[0], args.mb[-1]
    for kind in ("text", "parquet"):
        print(f"{kind}: peak at {large} MB / at {small} MB = "
              f"{results[kind, large]['peak_mib'] / results[kind, small]['peak_mib']:.2f}")
    for mb in args.mb:
        p, t = results["parquet", mb], results["text", mb]
        print(f"{mb} MB: parquet / text peak = {p['peak_mib'] / t['peak_mib']:.2f}, "
              f"time = {p['seconds'] / t['seconds']:.2f}")


if __name__ == "__main__":
    main()
