"""``attnlab evaluate DIR [--data FILE]``: the test metrics of a trained run."""
from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("evaluate", help="test metrics of a trained run",
                       description="Evaluate a trained run on its test split (or --data FILE).")
    p.add_argument("run_dir", metavar="DIR")
    p.add_argument("--data", metavar="FILE", help="evaluate on this file instead")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..runs import check_run_dir, readable
    from ..tasks import get_task

    run_dir, cfg = check_run_dir(args.run_dir, command="evaluate")
    metrics = get_task(cfg["task"]).evaluate(run_dir, cfg, args.data)
    # 6 significant digits, as metrics.json holds them (not float32 noise like 0.99800002574)
    print(json.dumps(readable(metrics), indent=2, sort_keys=True))
    return 0
