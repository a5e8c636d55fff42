"""``attnlab plot attention|pe|lr``: figures as PNG files (matplotlib, no display needed).

    attnlab plot attention DIR --input TEXT [--out PNG]   attention maps of a trained run
    attnlab plot pe [--d-model 48] [--max-len 96] [--out PNG]
    attnlab plot lr [--schedule cosine|noam|both] [--warmup W] [--max-iters N] [--out PNG]

Each prints the path it wrote as its last line. Never imports Lightning.
"""
from __future__ import annotations

import argparse

from ..errors import UsageError

# per schedule: (warm-up, steps) the course and the paper plot
_LR_DEFAULTS = {"cosine": (100, 2000), "noam": (4000, 20000)}


def register(sub) -> None:
    p = sub.add_parser("plot", help="draw attention maps, positional encodings, LR schedules",
                       description="Draw a figure as a PNG file.")
    what = p.add_subparsers(dest="figure", metavar="FIGURE", parser_class=type(p))
    what.required = True

    a = what.add_parser("attention", help="attention maps of a trained run on an input",
                        description="Attention maps (every layer and head) of a trained run on "
                                    "--input, e.g. the anti-diagonal of a reversal model.")
    a.add_argument("run_dir", metavar="DIR")
    a.add_argument("--input", required=True, metavar="TEXT",
                   help="the input, as for `attnlab predict` (e.g. tokens separated by spaces)")
    a.add_argument("--out", metavar="PNG", help="output file (default DIR/attention_input.png)")
    a.set_defaults(func=run)

    pe = what.add_parser("pe", help="the sinusoidal positional encoding",
                         description="Heatmap of the sinusoidal encoding over positions and hidden "
                                     "dimensions, and the curves of the first dimensions.")
    pe.add_argument("--d-model", type=int, default=48, metavar="N", help="hidden dimensions (48)")
    pe.add_argument("--max-len", type=int, default=96, metavar="N", help="positions (96)")
    pe.add_argument("--out", default="positional_encoding.png", metavar="PNG")
    pe.set_defaults(func=run)

    lr = what.add_parser("lr", help="learning-rate schedules: cosine warm-up, Noam",
                         description="Learning-rate schedule curves: the course's cosine warm-up "
                                     "(as a factor of the peak lr) and the paper's Noam schedule.")
    lr.add_argument("--schedule", choices=("cosine", "noam", "both"), default="cosine")
    lr.add_argument("--warmup", type=int, metavar="W", help="warm-up steps (cosine 100, noam 4000)")
    lr.add_argument("--max-iters", type=int, metavar="N", help="steps (cosine 2000, noam 20000)")
    lr.add_argument("--d-model", type=int, default=512, metavar="N", help="Noam's d_model (512)")
    lr.add_argument("--out", metavar="PNG", help="output file (default lr_SCHEDULE.png)")
    lr.set_defaults(func=run)


def _positive(flag: str, value: int) -> None:
    if value < 1:
        raise UsageError(f"{flag} must be a positive integer, got {value}")


def _attention(args) -> str:
    from pathlib import Path

    from ..runs import check_run_dir
    from ..tasks import get_task
    from ..viz import plot_attention

    if not args.input.strip():
        raise UsageError("--input is empty")
    run_dir, cfg = check_run_dir(args.run_dir, command="plot attention")
    maps, x_labels, y_labels = get_task(cfg["task"]).attention_maps(run_dir, cfg, args.input)
    out = Path(args.out) if args.out else run_dir / "attention_input.png"
    return str(plot_attention(maps, x_labels, y_labels, out,
                              title=f"{cfg['task']}: attention on {args.input.strip()[:60]!r}"))


def _lr(args) -> str:
    from ..viz import lr_curve, plot_lr_schedule

    names = ("cosine", "noam") if args.schedule == "both" else (args.schedule,)
    curves = {}
    for name in names:
        warmup = args.warmup if args.warmup is not None else _LR_DEFAULTS[name][0]
        steps = args.max_iters if args.max_iters is not None else _LR_DEFAULTS[name][1]
        _positive("--warmup", warmup)
        _positive("--max-iters", steps)
        _positive("--d-model", args.d_model)
        label = (f"cosine warm-up (warmup={warmup}, max_iters={steps})" if name == "cosine"
                 else f"Noam (d_model={args.d_model}, warmup={warmup})")
        curves[label] = lr_curve(name, warmup=warmup, max_iters=steps, d_model=args.d_model)
    ylabel = "learning-rate factor" if names == ("cosine",) else "learning rate (lr = 1)"
    return str(plot_lr_schedule(curves, args.out or f"lr_{args.schedule}.png", ylabel=ylabel,
                                title="learning-rate schedule"))


def run(args: argparse.Namespace) -> int:
    if args.figure == "attention":
        path = _attention(args)
    elif args.figure == "pe":
        from ..viz import plot_positional_encoding

        _positive("--d-model", args.d_model)
        _positive("--max-len", args.max_len)
        path = str(plot_positional_encoding(args.d_model, args.max_len, args.out))
    else:
        path = _lr(args)
    print(path)
    return 0
