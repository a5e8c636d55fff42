"""Peak memory of ``attnlab evaluate RUN --data FILE`` as the file grows, against ``predict``.

    python -m benchmarks.evaluate_memory [--rows 10000 100000] [--tasks reverse classify ...]
    python -m benchmarks.evaluate_memory --quick      # --rows 1000 10000

Trains a tiny run of each task (a few steps: only memory and speed matter), writes a held-out
file of each size in the run's format, then measures, each in a process of its own forked from
this one (torch already imported, so every process starts from the same memory):

- ``evaluate --data FILE``: read, checked and scored a chunk of rows at a time;
- ``predict --input-file`` of the same inputs (no labels): the streaming reader alone, the
  anchor that evaluate is compared with;
- for reverse, copy and sort, ``whole``: the file read whole and scored in one call, the way
  ``evaluate --data`` did before it streamed, written out here (``_whole``). It is a stand-in
  for the code before, not that code: it loads the run with ``attnlab.load`` rather than
  through the ``evaluate`` command, decodes with ``read_text``, and skips the command's
  checks of each line's name and of NaN outputs. Its peak and time are therefore not those of
  the ``evaluate`` of the commit before streaming; measure that commit itself (check it out,
  run ``evaluate --data`` of the same file) for the ratio a user would see.

It prints each peak (the process's maximum resident set, ``ru_maxrss``) and time, then the
ratios: evaluate's peak at the largest file over that at the smallest (1.0: memory does not
grow with the file), evaluate's over predict's, and whole's (the stand-in's) over
evaluate's. Not a test: the numbers depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import multiprocessing
import os
import random
import resource
import tempfile
import time
from pathlib import Path

TASKS = ("reverse", "classify", "tag", "translate")
TINY_MODEL = ["--model-dim", "16", "--num-heads", "2", "--dim-feedforward", "32",
              "--num-layers", "1", "--max-steps", "3", "--threads", "1"]
NAMES, WORDS = ["John", "Mary", "Rome", "Paris"], ["lives", "in", "the", "city", "and"]
REVIEW = {"pos": ["great", "lovely", "superb"], "neg": ["awful", "dull", "poor"]}


def _main(argv: list[str]) -> None:
    from attnlab.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main([str(a) for a in argv])
    if code:
        raise SystemExit(f"attnlab {' '.join(map(str, argv))} exited {code}")


def write_data(task: str, path: Path, rows: int) -> Path:
    """A held-out file of ``rows`` rows (sentences, pairs) in the format ``task`` reads; its
    inputs alone, one per line, beside it (``.inputs``) for predict."""
    rng = random.Random(rows)
    inputs = path.with_suffix(".inputs")
    with open(path, "w", newline="") as f, open(inputs, "w") as g:
        if task == "reverse":
            for _ in range(rows):
                line = " ".join(str(rng.randrange(10)) for _ in range(rng.randint(1, 16)))
                f.write(line + "\n")
                g.write(line + "\n")
        elif task == "classify":
            w = csv.writer(f)
            w.writerow(["text", "label"])
            for i in range(rows):
                label = ("pos", "neg")[i % 2]
                text = f"the film was {rng.choice(REVIEW[label])} {rng.choice(['', 'really'])}"
                w.writerow([text, label])
                g.write(text.strip() + "\n")
        elif task == "tag":
            for _ in range(rows):
                words = [rng.choice(NAMES + WORDS) for _ in range(rng.randint(2, 6))]
                f.write("".join(f"{w} {'B-PER' if w[0].isupper() else 'O'}\n" for w in words))
                f.write("\n")
                g.write(" ".join(words) + "\n")
        else:  # translate: numbers to English words, the task's own pairs
            from num2words import num2words

            w = csv.writer(f)
            w.writerow(["source", "target"])
            for _ in range(rows):
                n = rng.randrange(1000)
                w.writerow([n, num2words(n)])
                g.write(f"{n}\n")
    return path


def train(task: str, out: Path, data_dir: Path) -> Path:
    run = out / task
    if task == "reverse":
        _main(["train", "reverse", "--out", run, *TINY_MODEL, "--train-size", "256",
               "--val-size", "32", "--test-size", "32"])
    elif task == "translate":
        _main(["train", "translate", "--out", run, *TINY_MODEL, "--max-number", "1000",
               "--test-size", "40", "--val-size", "16", "--batch-size", "16"])
    else:
        suffix = "csv" if task == "classify" else "conll"
        data = write_data(task, data_dir / f"train-{task}.{suffix}", 200)
        _main(["train", task, "--out", run, "--data", data, *TINY_MODEL, "--batch-size", "16"])
    return run


def _whole(run: Path, data: Path) -> None:
    """reverse, copy, sort: the file read whole and scored in one call, as before it streamed:
    a stand-in written here, not the ``evaluate`` command of before (module docstring)."""
    import torch

    import attnlab
    from attnlab.data import make_labels, pad_to_length
    from attnlab.loading import check_run_dir
    from attnlab.tasks.sequence.runtime import parse_tokens, sequence_metrics

    _, cfg = check_run_dir(run, command="evaluate")
    model = attnlab.load(run)
    lines = [line for line in data.read_text().split("\n") if line.strip()]
    rows = [parse_tokens(line, cfg.num_categories, cfg.seq_len) for line in lines]
    padded = [pad_to_length(cfg.task, r, cfg.seq_len, cfg.num_categories) for r in rows]
    inputs = torch.tensor([p for p, _ in padded])  # (N, T)
    labels = torch.zeros_like(inputs)
    for i, r in enumerate(rows):
        labels[i, : len(r)] = make_labels(cfg.task, torch.tensor([r]))[0]
    sequence_metrics(model, inputs, labels, torch.tensor([len(r) for r in rows]))


def _measured(kind: str, run: Path, data: Path, queue) -> None:
    start = time.perf_counter()
    if kind == "evaluate":
        _main(["evaluate", run, "--data", data, "--threads", "1"])
    elif kind == "predict":
        command = "translate" if run.name == "translate" else "predict"
        _main([command, run, "--input-file", data.with_suffix(".inputs"), "--threads", "1"])
    else:
        _whole(run, data)
    queue.put((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               time.perf_counter() - start))


def measure(kind: str, run: Path, data: Path) -> tuple[float, float]:
    """(peak MB, seconds) of one ``kind`` in a process forked from this one."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    p = ctx.Process(target=_measured, args=(kind, run, data, queue))
    p.start()
    result = queue.get()
    p.join()
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    p.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    p.add_argument("--quick", action="store_true", help="--rows 1000 10000")
    args = p.parse_args(argv)
    if args.quick:
        args.rows = [1000, 10_000]
    import torch  # noqa: F401 - before the forks, so each starts with it loaded

    torch.set_num_threads(1)
    print("whole: a file read whole and scored at once, written out here as the code before "
          "streaming did it; not that code (its peak and time differ)", flush=True)
    print(f"evaluate memory: rows {args.rows}; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for task in args.tasks:
            run = tmp / task
            # in a process of its own: what training imports and holds is not in the forks
            trainer = multiprocessing.get_context("fork").Process(target=train,
                                                                  args=(task, tmp, tmp))
            trainer.start()
            trainer.join()
            if trainer.exitcode:
                raise SystemExit(f"training the {task} run failed ({trainer.exitcode})")
            kinds = ("evaluate", "predict", "whole") if task == "reverse" else (
                "evaluate", "predict")
            for rows in args.rows:
                suffix = {"reverse": "txt", "tag": "conll"}.get(task, "csv")
                data = write_data(task, tmp / f"{task}-{rows}.{suffix}", rows)
                for kind in kinds:
                    mb, s = measure(kind, run, data)
                    results[(task, rows, kind)] = (mb, s)
                    print(f"{task:9} {rows:>9,} rows {kind:8} {mb:8.0f} MB {s:8.1f} s",
                          flush=True)
            small, big = min(args.rows), max(args.rows)
            ev = {r: results[(task, r, "evaluate")][0] for r in (small, big)}
            line = (f"{task:9} evaluate {big:,}/{small:,} rows: {ev[big] / ev[small]:.2f}x peak; "
                    f"evaluate/predict at {big:,}: "
                    f"{ev[big] / results[(task, big, 'predict')][0]:.2f}x")
            if "whole" in kinds:
                whole, streamed = results[(task, big, "whole")], results[(task, big, "evaluate")]
                line += (f"; whole (a stand-in for the code before, not it)/evaluate at "
                         f"{big:,}: {whole[0] / streamed[0]:.2f}x peak, "
                         f"{whole[1] / streamed[1]:.2f}x time")
            print(line, flush=True)
    print(json.dumps({"|".join(map(str, k)): v for k, v in results.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
