"""``attnlab predict DIR --input TEXT``: one prediction, printed as the last line.
``--input-file FILE`` (``-``: standard input): one input per line, the model loaded once and
the inputs batched, one prediction per line; ``--json`` for a machine-readable line each.
``--input-file TABLE --text-column NAME``: one input per row of a table, from its column NAME.

Many inputs are predicted ``CHUNK`` at a time by the model loaded once, each chunk's answers
written (and flushed) before the next is predicted: the answers held in memory grow with the
chunk, not the file (all of a file's answers were held before any was written), ``| head``
stops the command after the first chunk, and a long file reports its progress on stderr. Every
input is read first (the runtime's ``input_reader``), so a bad line anywhere is refused before
the model is loaded; the notes of the inputs are said once, of the whole file
(``attnlab.notes``).

On an lm run the prediction is the greedy continuation of the whole input, as ``attnlab
generate --greedy`` makes it (one code path, ``attnlab.tasks.lm.continuation``), of
``--max-new-tokens`` tokens (default: the run's ``predict_tokens``, 100)."""
from __future__ import annotations

from ..settings import PredictSettings, add_flags
from .checkpoint import add_checkpoint_flag
from .inputs import CHUNK, add_input_file_flags, check_input, one_or_file, write_in_chunks
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
    from ..errors import UsageError
    from ..loading import check_run_dir, tasks_phrase, tasks_that, weights_from
    from ..notes import said_once
    from ..settings import check
    from ..tasks import get_task
    from ..tasks.base import check_each, loaded_once, set_options

    check_input(args.input)
    check_threads(args.threads)
    if args.max_new_tokens is not None:
        check(PredictSettings, {"max_new_tokens": args.max_new_tokens})
    texts, labels = one_or_file(args.input, "--input", args.input_file, args.input_column)
    run_dir, cfg = check_run_dir(args.run_dir, command="predict", checkpoint=args.checkpoint)
    task = get_task(cfg.task)
    if args.max_new_tokens is not None and not task.capabilities.encode_prompt:
        continuing = tasks_that(lambda other: other.capabilities.encode_prompt)
        raise UsageError(f"--max-new-tokens is for {tasks_phrase(continuing)} runs; {run_dir} "
                         f"is a {cfg.task} run")
    runtime = task.runtime()
    reader = getattr(runtime, "input_reader", None)
    read = reader(task, run_dir, cfg) if reader and len(texts) > CHUNK else None
    if read is not None:  # (one chunk: predict_many reads every input before the model)
        # every input read before the weights are: a bad line of a later chunk refused with
        # nothing written, as a file of one chunk is
        check_each(texts, labels, read)
    work = "one" if len(texts) == 1 else "decode" if task.capabilities.generates else "forward"
    use_threads(args, work, run_dir)
    options = set_options(max_new_tokens=args.max_new_tokens)
    with weights_from(run_dir, cfg, args.checkpoint, say=True), loaded_once(), \
            said_once(len(texts)):
        write_in_chunks(texts, labels, lambda part, named: runtime.predict_many(
            task, run_dir, cfg, part, named, **options), as_json=args.json, chunk=CHUNK)
    return 0
