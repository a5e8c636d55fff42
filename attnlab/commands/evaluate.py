"""``attnlab evaluate DIR [--data FILE]``: the test metrics of a trained run.

``--data FILE`` is read with the run's own columns, or with those the column flags of
``attnlab train`` name (``--text-column``, ``--src-column``, ...): the same flags, made from
the same declarations and checked the same way."""
from __future__ import annotations

import re
import sys

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
    _add_column_flags(p)
    add_threads_flag(p)
    add_quantize_flag(p)
    add_checkpoint_flag(p)
    p.set_defaults(func=run)


def column_settings() -> dict[str, tuple[type, list[str]]]:
    """Every task's column settings, by name: (the settings class that declares it, the tasks
    that have it). A column setting is one whose name ends in ``_column`` (``text_column``,
    ``tokens_column``, ...): it names a column (or field) of a data file, so a file with other
    names can be read by naming them, in training and here alike."""
    from ..settings import exposed
    from ..tasks import available_tasks

    found: dict[str, tuple[type, list[str]]] = {}
    for task in available_tasks().values():
        if task.settings is not None:
            for name in exposed(task.settings):
                if name.endswith("_column"):
                    found.setdefault(name, (task.settings, []))[1].append(task.name)
    return found


def _add_column_flags(p) -> None:
    """``train``'s column flags, from the same declarations; not given: the run's own."""
    from ..settings import add_flags

    group = p.add_argument_group("columns of --data FILE (default: those the run was trained "
                                 "with)")
    for name, (settings, tasks) in column_settings().items():
        add_flags(group, settings, only=[name])
        action = group._group_actions[-1]
        own = re.sub(r"\s*\(default[^)]*\)", "", action.help)  # the default is the run's
        action.help = f"{' and '.join(tasks)} runs: {own}"


def _with_columns(args, task, cfg, run_dir):
    """The run's config with the column flags given (each checked as ``train`` checks it:
    its type, then the task's ``check_columns``) over the run's own columns."""
    from ..settings import check, flag

    columns = column_settings()
    given = {name: getattr(args, name) for name in columns
             if getattr(args, name, None) is not None}
    if not given:
        return cfg
    first = flag(next(iter(given)))
    if args.data is None:
        raise UsageError(f"{first} names a column of --data FILE; without --data the run's own "
                         f"test split is read with the run's own columns")
    for name in given:
        tasks = columns[name][1]
        if cfg.task not in tasks:
            raise UsageError(f"{flag(name)} is for {' and '.join(tasks)} runs; {run_dir} is a "
                             f"{cfg.task} run")
    check(task.settings, given, only=given)
    trained = cfg.as_trained()
    values = {**trained, **given}
    # what a run does not record, it does not read (tag records every format's columns, so
    # that a file of another format can be evaluated)
    unread = set(task.unrecorded_settings(values))
    if unread != set(task.unrecorded_settings(trained)):  # --set-column on a run of texts
        raise UsageError(f"{first} would make the {cfg.task} run {run_dir} read another kind of "
                         f"file than it was trained on; name only the columns it reads")
    # judged by the file given, not the run's training files (a CoNLL-trained tag run may
    # evaluate JSON Lines, whose fields are named, and not the other way round)
    read = {**values, "data": str(args.data), "val": None, "test": None}
    for names, why in task.unused_settings(read):
        wrong = next((n for n in names if n in given), None)
        if wrong:
            raise UsageError(f"{flag(wrong)}: {why}")
    # a task whose columns can clash (classify, tag) checks them in ``check_columns``, which
    # its ``validate`` calls too (translate's reader checks its own: ``read_pairs``)
    check_columns = getattr(task, "check_columns", None)
    if check_columns is not None:
        check_columns(values)
    return task.read_config({**cfg.record(), **given}, run_dir / "config.yaml")


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
    cfg = _with_columns(args, task, cfg, run_dir)
    # a whole test split: forward passes, or (translate) batched greedy decoding
    use_threads(args, "decode" if task.capabilities.evaluate_decodes else "forward", run_dir)
    if args.by_length and not task.capabilities.evaluate_by_length:
        served = tasks_that(lambda other: other.capabilities.evaluate_by_length)
        raise UsageError(f"--by-length is for {tasks_phrase(served)} runs; {run_dir} is a "
                         f"{cfg.task} run")
    if args.checkpoint is None:  # a run resumed after it finished, or copied while it trained
        from .partial_copy import newer_checkpoint_note

        note = newer_checkpoint_note(run_dir)
        if note:
            print(note, file=sys.stderr, flush=True)
    with weights_from(run_dir, cfg, args.checkpoint, say=True):
        metrics = _evaluate(args, task, run_dir, cfg)
    if args.quantize is not None:  # int8 metrics, printed as the float run's, say they are
        metrics = {"quantize": args.quantize, **metrics}
    # 6 significant digits, as metrics.json holds them (not float32 noise like 0.99800002574)
    # and strict JSON: a NaN metric is null, as in metrics.json
    print(dumps(readable(metrics), indent=2))
    return 0


def _evaluate(args, task, run_dir, cfg) -> dict:
    """The metrics ``evaluate`` prints (with --by-length, its table and figure written)."""
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
    if args.data is not None:  # said once scored: a file the reader refuses gets one line
        from ..data.overlap import moved_training_file

        note = moved_training_file(args.data, getattr(cfg, "data", None),
                                   (getattr(cfg, "data_sha256", None) or {}).get("data"))
        if note:
            print(note, file=sys.stderr, flush=True)
    return metrics
