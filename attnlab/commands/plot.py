"""``attnlab plot attention|pe|lr``: figures as PNG files (matplotlib, no display needed).

    attnlab plot attention DIR --input TEXT [--layer N] [--head N] [--out PNG]
                           [--checkpoint last]
                                                          attention maps of a trained run
    attnlab plot pe [--d-model 48] [--max-len 96] [--out PNG]
    attnlab plot lr [--schedule cosine|noam|wsd|linear|constant|both|all] [--warmup W]
                    [--max-iters N] [--lr F] [--min-lr F] [--cooldown F] [--out PNG]

Each prints the path it wrote as its last line. Never imports Lightning.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

from ..errors import UsageError
from ..settings import (SCHEDULES, WSD_COOLDOWN, add_flags, check_options, check_schedule,
                        cooldown_setting, min_lr_setting, setting)
from .checkpoint import add_checkpoint_flag
from .threads import add_threads_flag, check_threads, use_threads

# per schedule: (warm-up, steps) the course and the paper plot (the others: the course's)
_LR_DEFAULTS = {"cosine": (100, 2000), "noam": (4000, 20000)}
# --schedule's groups of curves: the course's two, and every kind
_LR_GROUPS = {"both": ("cosine", "noam"), "all": SCHEDULES}
# figure formats --out may name (matplotlib writes them without extra packages)
FORMATS = (".png", ".svg", ".pdf")
# A figure about 1000 pixels wide cannot show more; beyond these the table alone would take
# gigabytes (a mistyped --max-len 100000000 would exhaust memory instead of failing).
MAX_D_MODEL, MAX_LEN = 2048, 5000


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
    a.add_argument("--out", metavar="PNG", help="output file, .png (or .svg, .pdf) (default "
                                                "DIR/attention_input.png, never replaced unless "
                                                "you name it here)")
    add_flags(a, AttentionOptions)
    add_threads_flag(a)
    add_checkpoint_flag(a)
    a.set_defaults(func=run)

    pe = what.add_parser("pe", help="the sinusoidal positional encoding",
                         description="Heatmap of the sinusoidal encoding over positions and hidden "
                                     "dimensions, and the curves of the first dimensions.")
    add_flags(pe, PositionalOptions)
    pe.add_argument("--out", metavar="PNG",
                    help="output file, .png (or .svg, .pdf) (default positional_encoding.png, "
                         "never replaced unless you name it here)")
    pe.set_defaults(func=run)

    lr = what.add_parser("lr", help="learning-rate schedules: cosine, Noam, wsd, linear, constant",
                         description="Learning-rate schedule curves as `attnlab train --schedule` "
                                     "uses them: the course's cosine warm-up (as a factor of the "
                                     "peak lr; with --min-lr, nanoGPT's cosine), the paper's "
                                     "Noam schedule, warm-up-stable-decay, linear, constant.")
    add_flags(lr, ScheduleOptions)
    lr.add_argument("--out", metavar="PNG",
                    help="output file, .png (or .svg, .pdf) (default lr_SCHEDULE.png, never "
                         "replaced unless you name it here)")
    lr.set_defaults(func=run)


@dataclass
class AttentionOptions:
    """``attnlab plot attention``'s choice of maps (numbered as the panels' titles: from 1)."""

    layer: int = setting(None, low=1, optional=True, metavar="N",
                         help="draw only layer N (1: the first; default every layer)")
    head: int = setting(None, low=1, optional=True, metavar="N",
                        help="draw only head N of each layer drawn (default every head)")


@dataclass
class PositionalOptions:
    """``attnlab plot pe``'s flags."""

    d_model: int = setting(48, low=1, most=MAX_D_MODEL, metavar="N",
                           help="hidden dimensions; odd is allowed (default 48)")
    max_len: int = setting(96, low=1, most=MAX_LEN, metavar="N", help="positions (default 96)")


@dataclass
class ScheduleOptions:
    """``attnlab plot lr``'s flags (--warmup and --max-iters default to the schedule's own)."""

    schedule: str = setting("cosine", choices=(*SCHEDULES, *_LR_GROUPS),
                            help="which schedule; both: cosine and noam; all: every one, a "
                                 "panel each (default cosine)")
    # low=0 as attnlab train's --warmup: a run trained with --warmup 0 can be drawn
    warmup: int = setting(None, low=0, optional=True, metavar="W",
                          help="warm-up steps (0: none; cosine 100, noam 4000)")
    max_iters: int = setting(None, low=1, optional=True, metavar="N",
                             help="steps (cosine 2000, noam 20000)")
    d_model: int = setting(512, low=1, metavar="N", help="Noam's d_model (default 512)")
    lr: float = setting(1.0, low=0, above=True, help="the peak rate (Noam: its factor; "
                                                     "default 1: the curves are factors)")
    min_lr: float = min_lr_setting("the rate cosine, wsd and linear end at (cosine with it is "
                                   "nanoGPT's; default: the course's cosine, the others 0)")
    cooldown: float = cooldown_setting(f"wsd's share of the steps that decay (default "
                                       f"{WSD_COOLDOWN})")


def check_out(out, *, given: bool = True, formats: tuple[str, ...] = FORMATS):
    """The figure file ``out`` as a Path, or ``UsageError`` naming --out when it cannot be
    written as asked: empty, a directory, no known figure suffix (matplotlib would add ".png"
    and write another file than the one printed), under a file, or in a directory this
    process may not write. ``given``: whether the user chose it (else it is the default);
    ``formats``: the suffixes it may have."""
    from ..paths import check_output

    flag = "--out" if given else "the default --out"
    path = check_output(out, flag, directory=False, example="figure" + formats[0],
                        hint="" if given else "; choose another file with --out")
    if path.suffix.lower() not in formats:
        raise UsageError(f"{flag} {path}: name a {' or '.join(formats)} file (the suffix sets the "
                         f"format), got {path.suffix or 'no suffix'!r}")
    return path


# What `attnlab train` writes into a run directory: the run's record, never replaced by a
# command that draws or writes a file afterwards, even one named with --out (else `plot
# attention --out RUN/attention.png` would replace the figure training made).
RUN_RECORDS = ("config.yaml", "model.safetensors", "metrics.json", "tokenizer.json",
               "target_tokenizer.json", "baselines.json", "attention.png", "cross_attention.png",
               "lr_schedule.png", "roc.png", "scores.png", "sets.png", "confusion.png")


def choose_out(out, default, *, formats: tuple[str, ...] = FORMATS, what: str = "a figure"):
    """The file a command writes, checked before any work: ``out`` (--out) when given, which
    may replace a file of the user's, but not a run's record (``RUN_RECORDS`` in a directory
    with a config.yaml); else ``default``, refused when it exists (a default name never replaces
    a figure without asking). ``what`` names the earlier file in the message."""
    given = out is not None
    path = check_out(out if given else default, given=given, formats=formats)
    if not given and path.exists():
        raise UsageError(f"{path} exists ({what} made earlier); to replace it, name it: --out "
                         f"{path}; or choose another file with --out")
    if given and path.name in RUN_RECORDS and (path.parent / "config.yaml").is_file():
        raise UsageError(f"--out {path} is part of the run in {path.parent} (`attnlab train` "
                         f"wrote it): choose another file with --out")
    return path


def _write(draw, out, *, given: bool = True) -> str:
    """``draw()`` (which writes ``out``), with a failed write named as --out's."""
    try:
        return str(draw())
    except OSError as e:
        flag = "--out" if given else "the default --out"
        raise UsageError(f"{flag} {out}: cannot write it ({e.strerror or e})") from None


def _attention(args) -> str:
    from pathlib import Path

    from ..loading import check_run_dir, weights_from
    from ..tasks import get_task
    from ..viz import heads_per_layer, plot_attention
    from .inputs import check_input

    check_input(args.input)
    check_threads(args.threads)
    check_options(args, AttentionOptions)
    given = args.out is not None
    if given:
        choose_out(args.out, None)
    run_dir, cfg = check_run_dir(args.run_dir, command="plot attention",
                                 checkpoint=args.checkpoint)
    use_threads(args, "one", run_dir)
    out = choose_out(args.out, Path(run_dir) / "attention_input.png")
    task = get_task(cfg.task)
    runtime = task.runtime()
    with weights_from(run_dir, cfg, args.checkpoint, say=True) as step:
        record = record_line(run_dir, shown_record(run_dir, args.checkpoint, step))
        if task.capabilities.attention_figure:  # a task's own picture (jets: the jet itself)
            _no_choice(args, cfg.task)
            return _write(lambda: runtime.attention_figure(task, run_dir, cfg, args.input, out,
                                                           record=record), out, given=given)
        maps, x_labels, y_labels = runtime.attention_maps(task, run_dir, cfg, args.input,
                                                          label="--input")
        _check_choice(args, heads_per_layer(maps))
        row = attention_focus(task, run_dir, cfg, args.input)
    kind = task.capabilities.attention_kind  # translate: "cross", all its maps are
    # the figure wraps its title: room for more of the input than a line holds, "…" if cut
    title = (f"{cfg.task}: {kind + '-' if kind else ''}attention on "
             f"{shown_input(args.input, 120)!r}")
    if row is not None:
        title += f", query row {row} outlined"
    title += "\n" + record
    layer, head = (None if n is None else n - 1 for n in (args.layer, args.head))
    return _write(lambda: plot_attention(maps, x_labels, y_labels, out, title=title, kind=kind,
                                         mark_row=row, layer=layer, head=head), out, given=given)


def _no_choice(args, task: str) -> None:
    """A task that draws a picture of its own (jets: the jet) has no panels to choose."""
    for flag, value in (("--layer", args.layer), ("--head", args.head)):
        if value is not None:
            raise UsageError(f"{flag} {value}: a {task} run's figure is its own picture, not a "
                             f"panel per layer and head; leave {flag} out (`attnlab view` shows "
                             f"every layer and head)")


def _check_choice(args, heads: list[int]) -> None:
    """--layer and --head against the run's layers and their heads (``heads``: per layer)."""
    from ..viz import fewest_heads

    if args.layer is not None and args.layer > len(heads):
        raise UsageError(f"--layer {args.layer}: this run has {len(heads)} attention "
                         f"layer{'s' if len(heads) > 1 else ''} (--layer 1 to {len(heads)})")
    fewest = fewest_heads(heads, None if args.layer is None else args.layer - 1)
    if args.head is not None and args.head > heads[fewest]:
        more = (", or --layer for a layer with more" if args.layer is None
                and max(heads) >= args.head else "")  # (no layer has that many: no hint)
        raise UsageError(f"--head {args.head}: layer {fewest + 1} has {heads[fewest]} "
                         f"head{'s' if heads[fewest] > 1 else ''} (--head 1 to "
                         f"{heads[fewest]}){more}")


def shown_input(text: str, most: int) -> str:
    """``text`` as a title shows it: whitespace runs as one space, cut to ``most`` characters
    with "…" where it was cut."""
    text = " ".join(text.split())
    return text if len(text) <= most else text[:most - 1] + "…"


def shown_record(run_dir, checkpoint: str | None, step: int | None) -> dict:
    """``run_record`` of the weights a command shows: ``--checkpoint``'s file and ``step``
    (``weights_from``'s), else ``model.safetensors``."""
    from ..explorer.record import run_record
    from ..loading import checkpoint_file

    if checkpoint is None:
        return run_record(run_dir)
    path = checkpoint_file(run_dir, checkpoint).relative_to(run_dir)
    return run_record(run_dir, step=step, checkpoint=path.as_posix())


def record_line(run_dir, record: dict) -> str:
    """The line a figure of a run's attention says which run, weights and step it shows, and
    what the run reached on its held-out split (``metrics.json``'s test_ scores, else its
    val_ ones: an lm's; ``attnlab view`` shows every metric). Scores of other weights than
    those drawn (``--checkpoint last`` of a ``--keep-best`` run) are left out, saying whose
    they are."""
    from ..explorer.record import metrics_of_text, metrics_text, weights_text

    metrics = record.get("metrics") or {}
    keys = ("test_",) if any(k.startswith("test_") for k in metrics) else ("val_",)
    scores = metrics_of_text(record) or metrics_text(record, keys=keys)
    return f"run {run_dir} · {weights_text(record)} · {scores}"


def attention_focus(task, run_dir, cfg, text):
    """The query row ``text`` singles out (a graph's node: the input is the whole graph and
    ``--input`` names whose row to read), or None where every row is the input's."""
    if not task.capabilities.attention_focus:
        return None
    return task.runtime().attention_focus(task, run_dir, cfg, text)


def _lr(args) -> str:
    from ..viz import curve_steps, lr_curve, plot_lr_schedule

    d_model_given = args.d_model is not None
    check_options(args, ScheduleOptions)
    given = args.out is not None
    names = _LR_GROUPS.get(args.schedule, (args.schedule,))
    if d_model_given and "noam" not in names:  # it would change no curve drawn, unsaid
        raise UsageError(f"--d-model {args.d_model} is Noam's (its rate scales by "
                         f"d_model^-0.5); --schedule {args.schedule} draws no Noam curve "
                         f"(noam, both or all do)")
    chosen = [_schedule_of(args, name, alone=len(names) == 1) for name in names]
    out = choose_out(args.out, f"lr_{args.schedule}.png")
    curves, steps = {}, {}
    for name, settings in zip(names, chosen):
        warmup, max_iters = _LR_DEFAULTS.get(name, _LR_DEFAULTS["cosine"])
        warmup = args.warmup if args.warmup is not None else warmup
        max_iters = args.max_iters if args.max_iters is not None else max_iters
        label = _lr_label(name, warmup, max_iters, args.d_model, settings)
        steps[label] = curve_steps(max_iters, keep=(warmup,))  # a million steps: 20 000 points
        curves[label] = lr_curve(name, warmup=warmup, max_iters=max_iters, d_model=args.d_model,
                                 steps=steps[label], lr=args.lr, min_lr=settings["min_lr"],
                                 cooldown=settings["cooldown"])
    ylabel = ("learning-rate factor" if args.lr == 1 and "noam" not in names
              else f"learning rate (lr = {args.lr:g})")
    return _write(lambda: plot_lr_schedule(curves, out, ylabel=ylabel, steps=steps,
                                           title="learning-rate schedule"),
                  out, given=given)


def _schedule_of(args, name: str, *, alone: bool) -> dict:
    """--lr, --min-lr and --cooldown as schedule ``name`` takes them, checked by the rule
    ``attnlab train`` checks (``check_schedule``). Drawn alone, a flag the schedule does not
    take is refused; among several, each schedule takes those it has."""
    settings = {"schedule": name, "lr": args.lr, "min_lr": args.min_lr,
                "cooldown": args.cooldown}
    if not alone:
        settings["min_lr"] = args.min_lr if name in ("cosine", "wsd", "linear") else None
        settings["cooldown"] = args.cooldown if name == "wsd" else None
    check_schedule(settings)
    return settings


def _lr_label(name: str, warmup: int, max_iters: int, d_model: int, settings: dict) -> str:
    min_lr = settings["min_lr"]
    if name == "noam":
        return f"Noam (d_model={d_model}, warmup={warmup})"
    if name == "cosine" and min_lr is None:
        return f"cosine warm-up (warmup={warmup}, max_iters={max_iters})"
    shown = {"cosine": "cosine to min_lr (nanoGPT's)", "linear": "linear decay",
             "constant": "constant"}.get(name) or f"wsd (cooldown={settings['cooldown']:g})"
    ends = f", min_lr={min_lr:g}" if name != "constant" else ""
    return f"{shown} (warmup={warmup}, max_iters={max_iters}{ends})"


def run(args: argparse.Namespace) -> int:
    if args.figure == "attention":
        path = _attention(args)
    elif args.figure == "pe":
        from ..viz import plot_positional_encoding

        check_options(args, PositionalOptions)
        given = args.out is not None
        out = choose_out(args.out, "positional_encoding.png")
        path = _write(lambda: plot_positional_encoding(args.d_model, args.max_len, out), out,
                      given=given)
    else:
        path = _lr(args)
    print(path)
    return 0
