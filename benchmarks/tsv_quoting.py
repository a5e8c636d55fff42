'''The cost of deciding what a TSV's quotes mean (``attnlab.data.tsv_quoting``): ``read_table``
of a TSV against the same read with the decision skipped (quotes always enclose values, as
Python's csv module reads them and as attnlab read a TSV before), in one process, alternating.

The file: ``--rows`` rows of 20 words and a label; every tenth text is quoted as pandas writes
a value holding a quote (``"""Hi"" she said"``), so the scan has quotes to look at (a file
without a quote at a value's start costs one search). Prints each side's best time of
``--repeats`` and the ratio.

    python -m benchmarks.tsv_quoting [--rows 200000] [--repeats 3] [--quick]
'''
from __future__ import annotations

import argparse
import contextlib
import csv
import random
import tempfile
import time
from pathlib import Path
from unittest import mock

from attnlab.data import tsv_quoting
from attnlab.data.tables import read_table


def write(path: Path, rows: int) -> None:
    rng = random.Random(0)
    lines = ["text\tlabel"]
    for i in range(rows):
        text = " ".join(rng.choice(["good", "bad", "film", "plot", "acting"]) for _ in range(20))
        lines.append((f'"""{text}"" she said"' if i % 10 == 0 else text) + "\tpos")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def best(path: Path, repeats: int, skip: bool) -> float:
    times = []
    for _ in range(repeats):
        as_before = mock.patch.object(tsv_quoting, "quoting", lambda text, where: csv.QUOTE_MINIMAL)
        with as_before if skip else contextlib.nullcontext():
            start = time.perf_counter()
            read_table(path, ["text", "label"])
            times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="20,000 rows")
    args = parser.parse_args()
    rows = 20_000 if args.quick else args.rows
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "d.tsv"
        write(path, rows)
        mb = path.stat().st_size / 1e6
        skipped = decided = 0.0
        for _ in range(2):  # alternate, so that load changes fall on both sides
            skipped += best(path, args.repeats, skip=True)
            decided += best(path, args.repeats, skip=False)
    print(f"{rows} rows, {mb:.1f} MB: read as csv quotes {skipped / 2:.3f} s, "
          f"with the quoting decided {decided / 2:.3f} s, ratio {decided / skipped:.2f}")


if __name__ == "__main__":
    main()
