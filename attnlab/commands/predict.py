"""``attnlab predict DIR --input TEXT``: one prediction, printed as the last line.
``--input-file FILE`` (``-``: standard input): one input per line, the model loaded once and
the inputs batched, one prediction per line; ``--json`` for a machine-readable line each.
``--input-file TABLE --text-column NAME``: one input per row of a table, from its column NAME.

Many inputs are predicted ``CHUNK`` at a time, each chunk's answers written (and flushed) before
the next is read by the model: the answers held in memory grow with the chunk, not the file (a
million lines held 1.7 GB of answers before any was written), ``| head`` stops the command
after the first chunk, and a long file reports its progress on stderr.

On an lm run the prediction is the greedy continuation of the whole input, as ``attnlab
generate --greedy`` makes it (one code path, ``attnlab.tasks.lm.continuation``), of
``--max-new-tokens`` tokens (default: the run's ``predict_tokens``, 100)."""
from __future__ import annotations

import sys
import time
from signal import SIGINT

from ..settings import PredictSettings, add_flags
from .checkpoint import add_checkpoint_flag
from .inputs import add_input_file_flags, check_input, one_or_file, write_results
from .threads import add_threads_flag, check_threads, use_threads


def register(sub) -> None:
    p = sub.add_parser("predict", help="predict with a trained run",
                       description="Predict with a trained run. Per-element tasks take tokens "
                                   "separated by spaces and print the predicted sequence; an "
                                   "lm run prints the greedy continuation of the whole input "
                                   "(as `generate --greedy`). Give one --input, or many with "
                                   "--input-file.")
    p.add_argument("run_dir", metavar="DIR")
    p.add_argument("--input", metavar="TEXT")
    add_flags(p, PredictSettings)  # --max-new-tokens, its rules declared there
    add_input_file_flags(p)
    add_threads_flag(p)
    add_checkpoint_flag(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..errors import Interrupted, UsageError
    from ..loading import check_run_dir, tasks_phrase, tasks_that, weights_from
    from ..settings import check
    from ..tasks import get_task
    from ..tasks.base import set_options, without_nan_answers

    check_input(args.input)
    check_threads(args.threads)
    if args.max_new_tokens is not None:
        check(PredictSettings, {"max_new_tokens": args.max_new_tokens})
    started = time.perf_counter()
    texts, labels = one_or_file(args.input, "--input", args.input_file, args.input_column)
    run_dir, cfg = check_run_dir(args.run_dir, command="predict", checkpoint=args.checkpoint)
    task = get_task(cfg.task)
    if args.max_new_tokens is not None and not task.capabilities.encode_prompt:
        continuing = tasks_that(lambda other: other.capabilities.encode_prompt)
        raise UsageError(f"--max-new-tokens is for {tasks_phrase(continuing)} runs; {run_dir} "
                         f"is a {cfg.task} run")
    work = "one" if len(texts) == 1 else "decode" if task.capabilities.generates else "forward"
    use_threads(args, work, run_dir)
    options = set_options(max_new_tokens=args.max_new_tokens)
    with weights_from(run_dir, cfg, args.checkpoint, say=True):
        for start in range(0, len(texts), CHUNK):
            part, named = texts[start:start + CHUNK], labels[start:start + CHUNK]
            try:
                results = task.runtime().predict_many(task, run_dir, cfg, part, named, **options)
                write_results(without_nan_answers(results, named, run_dir), part,
                              as_json=args.json)
                sys.stdout.flush()  # this chunk's answers out before the next is predicted
            except UsageError as e:  # a bad input of a later chunk: the answers above stand
                raise UsageError(f"{e}{_written(start, len(texts))}") from None
            except KeyboardInterrupt:
                raise Interrupted(f"interrupted{_written(start, len(texts))}", SIGINT) from None
            except Interrupted as e:  # SIGTERM, SIGHUP
                raise Interrupted(f"{e}{_written(start, len(texts))}", e.signum) from None
            _progress(start, start + len(part), len(texts), started)
    return 0


def _written(done: int, total: int) -> str:
    """What the output holds when the command stops after ``done`` of ``total`` answers."""
    if done == 0:
        return ""
    return (f"; the output holds the answers to the first {done:,} of {total:,} inputs, each "
            f"line whole, and none of the {total - done:,} after them")


CHUNK = 8192  # inputs per predict_many call: its answers are all that is held at once


def _progress(before: int, done: int, total: int, started: float) -> None:
    """``predict: N of M inputs`` on stderr after the chunk (inputs ``before`` to ``done``)
    that passes a further tenth of a file of more than one chunk (a log of a million lines
    gets ten lines, not 123)."""
    if total > CHUNK and 10 * done // total > 10 * before // total:
        rate = done / max(time.perf_counter() - started, 1e-9)
        print(f"predict: {done:,} of {total:,} inputs ({rate:,.0f}/s)", file=sys.stderr,
              flush=True)
