"""``attnlab evaluate DIR [--data FILE]``: the test metrics of a trained run."""
from __future__ import annotations

from ..errors import UsageError
from .checkpoint import add_checkpoint_flag
from .plot import choose_out
from .quantize import add_quantize_flag, check_quantize
from .threads import add_threads_flag, check_threads, use_threads


def register(sub) -> None:
    p = sub.add_parser("evaluate", help="test metrics of a trained run",
                       description="Evaluate a trained run on its test split (or --data FILE).")
    p.add_argument("run_dir", metavar="DIR")
    p.add_argument("--data", metavar="FILE", help="evaluate on this file instead")
    p.add_argument("--by-length", action="store_true",
                   help="translate runs: the scores per source-length bucket (a table on "
                        "stderr, 'by_length' in the JSON) and a figure (--out)")
    p.add_argument("--out", metavar="PNG",
                   help="with --by-length: the figure, .png (or .svg, .pdf) (default "
                        "DIR/by_length.png, never replaced unless you name it here)")
    add_threads_flag(p)
    add_quantize_flag(p)
    add_checkpoint_flag(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..loading import check_run_dir, tasks_phrase, tasks_that, weights_from
    from ..runs import dumps, readable
    from ..tasks import get_task

    check_threads(args.threads)
    if args.out is not None and not args.by_length:
        raise UsageError("--out is the figure of --by-length; add --by-length or leave --out out")
    if args.out is not None:
        choose_out(args.out, None)
    run_dir, cfg = check_run_dir(args.run_dir, command="evaluate", checkpoint=args.checkpoint)
    check_quantize(args.quantize, cfg.task, run_dir)
    task = get_task(cfg.task)
    # a whole test split: forward passes, or (translate) batched greedy decoding
    use_threads(args, "decode" if task.capabilities.evaluate_decodes else "forward", run_dir)
    if args.by_length and not task.capabilities.evaluate_by_length:
        served = tasks_that(lambda other: other.capabilities.evaluate_by_length)
        raise UsageError(f"--by-length is for {tasks_phrase(served)} runs; {run_dir} is a "
                         f"{cfg.task} run")
    with weights_from(run_dir, cfg, args.checkpoint, say=True):
        metrics = _evaluate(args, task, run_dir, cfg)
    # 6 significant digits, as metrics.json holds them (not float32 noise like 0.99800002574)
    # and strict JSON: a NaN metric is null, as in metrics.json
    print(dumps(readable(metrics), indent=2))
    return 0


def _evaluate(args, task, run_dir, cfg) -> dict:
    """The metrics ``evaluate`` prints (with --by-length, its table and figure written)."""
    import sys

    from ..tasks.base import set_options

    runtime = task.runtime()
    if args.by_length:
        from ..tasks.translate.scoring import by_length_table

        out = choose_out(args.out, run_dir / "by_length.png")  # before the slow decoding
        metrics, rows = runtime.evaluate_by_length(task, run_dir, cfg, args.data, out,
                                                   quantize=args.quantize)
        print(by_length_table(rows), file=sys.stderr)
        print(f"wrote {out}", file=sys.stderr)
        metrics = {**metrics, "by_length": rows}
    else:
        metrics = runtime.evaluate(task, run_dir, cfg, args.data,
                                   **set_options(quantize=args.quantize))
    return metrics
