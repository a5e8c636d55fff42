"""``attnlab predict DIR --input TEXT``: one prediction, printed as the last line."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("predict", help="predict with a trained run",
                       description="Predict with a trained run. Per-element tasks take tokens "
                                   "separated by spaces and print the predicted sequence.")
    p.add_argument("run_dir", metavar="DIR")
    p.add_argument("--input", required=True, metavar="TEXT")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..errors import UsageError
    from ..runs import check_run_dir
    from ..tasks import get_task

    if not args.input.strip():
        raise UsageError("--input is empty")
    run_dir, cfg = check_run_dir(args.run_dir, command="predict")
    task = get_task(cfg["task"])
    print(task.predict(run_dir, cfg, args.input))
    return 0
