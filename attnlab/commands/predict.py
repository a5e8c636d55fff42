"""``attnlab predict DIR --input TEXT``: one prediction, printed as the last line.
``--input-file FILE`` (``-``: standard input): one input per line, the model loaded once and
the inputs batched, one prediction per line; ``--json`` for a machine-readable line each."""
from __future__ import annotations

from .inputs import add_input_file_flags, check_input, one_or_file, write_results
from .threads import add_threads_flag, check_threads, use_threads


def register(sub) -> None:
    p = sub.add_parser("predict", help="predict with a trained run",
                       description="Predict with a trained run. Per-element tasks take tokens "
                                   "separated by spaces and print the predicted sequence. "
                                   "Give one --input, or many with --input-file.")
    p.add_argument("run_dir", metavar="DIR")
    p.add_argument("--input", metavar="TEXT")
    add_input_file_flags(p)
    add_threads_flag(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..loading import check_run_dir
    from ..tasks import get_task

    check_input(args.input)
    check_threads(args.threads)
    texts, labels = one_or_file(args.input, "--input", args.input_file)
    run_dir, cfg = check_run_dir(args.run_dir, command="predict")
    task = get_task(cfg.task)
    work = "one" if len(texts) == 1 else "decode" if task.generates else "forward"
    use_threads(args, work, run_dir)
    write_results(task.predict_many(run_dir, cfg, texts, labels), texts, as_json=args.json)
    return 0
