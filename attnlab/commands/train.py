"""``attnlab train TASK``: shared training flags, --config merging, validation, run directory."""
from __future__ import annotations

import argparse
import functools
import os
import random
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

from ..errors import Interrupted, RankFailed, UsageError
from ..paths import check_named, check_output, entered
from ..run_config import RunSettings
from ..settings import (NOAM_BETA2, RANK_KEYS, TrainSettings, add_flags, as_typed, check,
                        check_schedule, decay_fits, flag, heads_divide_width, later_process,
                        monitoring_fits, optimizer_fits, schedule_takes, value_text)
from ..tasks import SHARED_DEFAULTS, available_tasks, get_task
from . import partial_copy, preflight
from .preflight import moved_data, resume_conflicts
from .threads import default_threads

# said under every task's --help: the check preflight.check_memory makes (docs/scale.md)
MEMORY_NOTE = ("Settings whose weights, data and one training step's activations would not fit "
               "in the memory available are refused before the run starts (docs/scale.md, "
               "\"Memory\").")


def add_shared_flags(p: argparse.ArgumentParser) -> None:
    """The flags every task shares: --out, --config, and one per ``TrainSettings`` field."""
    g = p.add_argument_group("training (every task's; a --config YAML may set any)")
    g.add_argument("--out", metavar="DIR", help="run directory (default runs/TASK-<timestamp>)")
    g.add_argument("--config", metavar="FILE", help="YAML file of settings; flags win; its "
                   "relative paths (data: train.csv) are read from the working directory, "
                   "as flags' are")
    add_flags(g, TrainSettings)


def register(sub) -> None:
    p = sub.add_parser("train", help="train a model on a task", description="Train a model.")
    tsub = p.add_subparsers(dest="task", metavar="TASK", parser_class=type(p))
    tsub.required = True
    for name, task in available_tasks().items():
        tp = tsub.add_parser(name, help=task.help, description=task.help,
                             argument_default=argparse.SUPPRESS, epilog=MEMORY_NOTE)
        add_shared_flags(tp)
        task.add_arguments(tp)
        if task.model_settings():  # generated from the model's typed config
            add_flags(tp.add_argument_group(f"{name} model"), task.model_config,
                      only=task.model_settings())
        _show_metrics(tp, task.val_metrics)
        _show_defaults(tp, {**SHARED_DEFAULTS, **task.defaults, **task.default_notes})
        tp.set_defaults(func=run)


def _show_defaults(parser: argparse.ArgumentParser, defaults: dict[str, Any]) -> None:
    """Append this task's default to each flag's help (the flags themselves default to
    'not given', so that --config can set them); a switch's is on or off (sort's
    --early-stop, off where reverse's is on, once said nothing)."""
    for action in parser._actions:
        value = defaults.get(action.dest)
        if (value is None or action.help == argparse.SUPPRESS
                or "default" in (action.help or "")):  # a task that states its own
            continue
        shown = ("on" if value else "off") if isinstance(value, bool) else value
        action.help = f"{action.help or ''} (default: {shown})".lstrip()


def _show_metrics(parser: argparse.ArgumentParser, metrics: tuple[str, ...]) -> None:
    """--monitor's help names what this task's validation computes (``Task.val_metrics``),
    where it said "val_loss, val_acc, ..." of every task, lm's (val_loss alone) too."""
    for action in parser._actions:
        if action.dest == "monitor":
            action.help = f"{action.help}; this task's: {', '.join(metrics)}"


def validate_shared(cfg: dict[str, Any], task=None) -> None:
    """Check every shared setting (types, ranges and choices come from ``TrainSettings``);
    the message names the flag and shows the value."""
    check(TrainSettings, cfg)
    check_schedule(cfg)
    if broken := optimizer_fits(cfg["optimizer"], cfg.get("muon_lr"), cfg["strategy"],
                                cfg.get("weight_decay") or 0.0):
        raise UsageError(broken)
    if broken := decay_fits(cfg):
        raise UsageError(broken)
    if task is None or task.heads_split_width(cfg):
        if broken := heads_divide_width(cfg["model_dim"], cfg["num_heads"]):
            raise UsageError(broken)


def build_config(task_name: str, given: dict[str, Any]) -> RunSettings:
    """SHARED_DEFAULTS < task defaults < --config < flags given (or the saved config on
    --resume), checked and frozen into the task's typed run config."""
    return configure(task_name, given)[0]


def configure(task_name: str, given: dict[str, Any], notes_out: list[str] | None = None,
              *, check_out: bool = False) -> tuple[RunSettings, Any]:
    """``build_config``'s settings, and what the task's checks read that its run needs
    (``Task.validate``'s result, for ``task.runtime().run``: the task object keeps nothing).
    Every check runs on the plain dict (and may normalise it), then frozen, once, into the
    task's typed run config (``Task.config_class``); its notes said, or put in ``notes_out``.
    ``check_out``: ``--out`` (a flag or the --config file's) is checked as the run will write
    it (``preflight.check_out``) before the task reads its data, whose notes would otherwise
    come before the refusal ("warning: ... rows ..." then "--out run already holds files")."""
    task = get_task(task_name)
    cfg: dict[str, Any] = {**SHARED_DEFAULTS, **task.defaults}
    _refuse_blank(given)
    file_cfg, notes_of_file, recorded = _read_config_file(task, given,
                                                          set(cfg) | {"task", "out"})
    # --resume and --out as flags, or else from the --config file
    resuming = given["resume"] if "resume" in given else file_cfg.get("resume")
    out = given.get("out") or file_cfg.get("out")
    if resuming:
        previous = _resumed(task, task_name, out, cfg, file_cfg, given)
        cfg.update(previous)
    if check_out and out:
        preflight.check_out(out, resume=bool(resuming))
    _one_budget(file_cfg, given, previous if resuming else {})
    recipe = None if resuming else given.get("recipe", file_cfg.get("recipe"))
    if recipe:  # over the defaults, under --config and the flags
        cfg.update(task.recipes[recipe])
    cfg.update(file_cfg)
    cfg.update({k: v for k, v in given.items() if k not in ("config", "func", "command")})
    if recipe:
        _drop_recipe_cooldown(cfg, {**file_cfg, **given})
        _refuse_rate_as_factor(f"--recipe {recipe}", task.recipes[recipe],
                               {**file_cfg, **given}, task.recipes[recipe].get(
                                   "schedule", cfg["schedule"]), cfg["schedule"])
    if resuming:
        _kept_on_resume(cfg, previous, {**file_cfg, **given}, _accumulate_given(
            file_cfg, given, recorded))
        if {**file_cfg, **given}.get("max_steps") is not None:  # _one_budget let it replace
            cfg["epochs"] = None  # the run's --epochs: the budget is the steps now
    cfg["task"] = task_name
    cfg["resume"] = bool(cfg.get("resume"))
    try:
        notes, from_init, checked = _check_all(task, cfg, file_cfg, given, recorded,
                                               memory_first=check_out)
    except UsageError as e:
        if not recipe:
            raise
        raise UsageError(_recipe_named(str(e), recipe, task.recipes[recipe],
                                       {**file_cfg, **given})) from None
    _say([*notes_of_file, *notes, *_recipe_overridden(  # after the checks: a refusal stays
        recipe, task.recipes.get(recipe, {}), cfg, from_init,  # the one line of its error
        set(file_cfg) - set(given), given.get("config"))], into=notes_out)
    _as_trained(task, cfg)
    return task.config_class().from_values(cfg), checked  # checked and normalised: frozen


def _resumed(task, task_name: str, out: str | None, cfg: dict[str, Any],
             file_cfg: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """The settings of the run ``--resume`` continues (its config.yaml), checked against the
    task, the values in it and the settings given now (``resume_conflicts``)."""
    from ..loading import check_values
    from ..runs import read_yaml

    if not out:
        raise UsageError("--resume needs --out DIR: the run directory to continue")
    saved = Path(out) / "config.yaml"
    if not saved.is_file():
        raise UsageError(f"--resume: {saved} not found; nothing to resume")
    previous = read_yaml(saved, what="--resume")
    # a setting the run lacks: what its declaration says such a run trained with
    previous = {**task.run_config.layout.absent, **previous}
    if previous.get("task") != task_name:
        raise UsageError(f"--resume: {out} holds a {previous.get('task')!r} run, "
                         f"not {task_name!r}")
    # a hand-edited value is named in the file, as generate and evaluate name it (the
    # rules between settings are checked later, on the values the run continues with)
    check_values(task, previous, str(saved), training=True)
    settings = {**file_cfg, **{k: v for k, v in given.items() if k not in ("func", "command")}}
    resume_conflicts(previous, settings, cfg, Path(out), config_file=given.get("config"),
                     from_file=frozenset(file_cfg) - set(given))
    return previous


def _refuse_blank(given: dict[str, Any], out_flag: str = "--out") -> None:
    """``--config`` or ``--out`` given as empty text (an unset shell variable: ``--config
    $CFG``) names nothing: an empty --config was read as not given, so the run trained on the
    defaults, unsaid, and an empty --out as the default directory (where ``--out '  '`` was
    refused by the rule of every output path, ``check_output``, which this one uses)."""
    if isinstance(given.get("config"), str):
        check_named(given["config"], "--config", "file")
    if isinstance(given.get("out"), str) and not given["out"].strip():
        check_output(given["out"], out_flag, directory=True)


def _check_all(task, cfg: dict[str, Any], file_cfg: dict[str, Any], given: dict[str, Any],
               recorded: bool, *, memory_first: bool = False) -> tuple[list[str], set[str], Any]:
    """``--init``'s model settings over ``cfg``, then every rule of the run's settings (a
    ``UsageError`` names the first broken): (notes to print, the settings ``--init`` set,
    what ``Task.check_settings`` read for the run). ``memory_first``: the memory check on
    the settings as given, before the task reads its data (``_memory_before_data``)."""
    notes, from_init = _apply_init(task, cfg, {
        **{k: f"--config {given.get('config')}" for k in file_cfg}, **{k: "" for k in given}})
    validate_shared(cfg, task)
    if not cfg["resume"]:  # a resumed run continues as it was trained
        # a run's own config.yaml chose nothing its run did not: its values are not refused
        _refuse_unused(task, cfg, (set() if recorded else set(file_cfg)) | set(given))
    if memory_first:  # each value in its range first: a negative --block-size is named
        task.check_settings(cfg, typed_only=True)  # as that, not refused for its memory
        _memory_before_data(task, cfg)
    checked = task.check_settings(cfg)
    _check_monitoring(task, cfg)
    return notes, from_init, checked


def _memory_before_data(task, cfg: dict[str, Any]) -> None:
    """``preflight.check_memory`` on the settings as given, before the task reads its data
    files, whose notes ("warning: the val rows of --data ...") came before the refusal of
    classify's --max-len 1000000000 (a prepared corpus's vocabulary is read from its
    meta.json, a small file, here already); ``_preflight`` checks again on the settings as
    the task's checks left them. A value the estimate cannot count yet
    (a --config value of the wrong type) is left to the task's own check, which names it."""
    try:
        parts = task.memory_estimate(cfg)
    except (KeyError, TypeError, ValueError):
        return
    preflight.check_memory(parts)


def _as_trained(task, cfg: dict[str, Any]) -> None:
    """Make ``cfg`` what config.yaml records: what the run trains with. The settings it does
    not use are left out (``Task.unrecorded_settings``); a new Noam run's beta2 is the paper's,
    which its AdamW takes whatever the default (``make_optimizer``); an --epochs run's budget
    is --epochs alone (the default --max-steps would be recorded beside it, unused)."""
    for name in task.unrecorded_settings(cfg):
        cfg.pop(name, None)
    if cfg["schedule"] == "noam" and not cfg["resume"]:
        cfg["beta2"] = NOAM_BETA2
    if cfg.get("epochs") is not None:
        cfg.pop("max_steps", None)


def _kept_on_resume(cfg: dict[str, Any], previous: dict[str, Any], given: dict[str, Any],
                    accumulate: tuple[Any, str]) -> None:
    """--resume: a setting given again as 'auto' keeps what it chose when the run started; a
    data file given at its new path is recorded absolute (``moved_data``); on another number
    of processes, --accumulate keeps the run's batches a step (``kept_accumulate``: worked out
    by every process from config.yaml, which nothing rewrites before training ends), and one
    given (``accumulate``: ``_accumulate_given``) must be that one."""
    cfg.update({k: previous[k] for k, v in cfg.items()
                if v == "auto" and isinstance(previous.get(k), str)})
    cfg.update(moved_data(previous, given))
    cfg["accumulate"] = preflight.kept_accumulate(
        previous, {**cfg, "out": cfg.get("out") or given.get("out")}, accumulate[0],
        said=accumulate[1])


def _accumulate_given(file_cfg: dict[str, Any], given: dict[str, Any],
                      recorded: bool) -> tuple[Any, str]:
    """The --accumulate given to a --resume (None: none), and how it was given: the flag, or
    the key of a --config file (a run's own config.yaml, given back, asks nothing: it holds
    what the run had)."""
    if given.get("accumulate") is not None:
        return given["accumulate"], preflight.given_as("accumulate", given["accumulate"])
    if not recorded and file_cfg.get("accumulate") is not None:
        return file_cfg["accumulate"], preflight.given_as(
            "accumulate", file_cfg["accumulate"], given.get("config"))
    return None, ""


def _check_monitoring(task, cfg: dict[str, Any]) -> None:
    """--monitor, --keep-best, --patience and --min-delta against what the task's validation
    computes (``Task.val_metrics``, less ``val_metrics_off``) and whether it validates during
    training: the rule ``monitoring_fits``."""
    off = task.val_metrics_off(cfg)
    computed = tuple(m for m in task.val_metrics if m not in off)
    if broken := monitoring_fits(cfg, computed, off=off, resuming=bool(cfg.get("resume"))):
        raise UsageError(broken)


def _drop_recipe_cooldown(cfg: dict[str, Any], set_by_user: dict[str, Any]) -> None:
    """A recipe's --cooldown is its wsd's decay share and goes with its wsd: a --schedule given
    over the recipe is not refused for the recipe's --cooldown (nor named as overriding it);
    a --cooldown the user gave stays, and is checked as given."""
    if not schedule_takes(cfg["schedule"])["cooldown"] and "cooldown" not in set_by_user:
        cfg["cooldown"] = None


def _recipe_named(message: str, name: str, recipe: dict[str, Any],
                  set_by_user: dict[str, Any]) -> str:
    """A refusal that names a setting the user did not give but ``--recipe name`` set says
    so: "--positional rope rotates pairs ..." of a user who never wrote --positional."""
    taken = [k for k in recipe if k not in set_by_user
             and re.search(rf"{re.escape(flag(k))}(?![\w-])", message)]
    if not taken:
        return message
    sets = ", ".join(as_typed(k, recipe[k]) for k in taken)
    return f"{message} (--recipe {name} sets {sets})"


def _recipe_overridden(name: str, recipe: dict[str, Any], cfg: dict[str, Any],
                       from_init: set[str], from_file: set[str],
                       config_file: str | None = None) -> list[str]:
    """The line (as a list: none without a recipe or anything to say) naming each setting of
    ``--recipe name`` that the run does not train with, and where its value came from: the
    ``--config`` file (``from_file``: its keys no flag gave; a run's own config.yaml records
    every setting, so it leaves the recipe none), given (a flag over it, or an ``--arch``
    that sets that part), or ``--init DIR`` (``from_init``: its model's shape, or a default
    it sets)."""
    won = {k: f"{as_typed(k, cfg[k])} (the recipe's {as_typed(k, v)})"
           for k, v in recipe.items() if cfg.get(k) not in (v, None)}
    parts = [(where, [text for k, text in won.items() if mine(k)]) for where, mine in (
        (f"from --config {config_file}, used instead",
         lambda k: k in from_file and k not in from_init),
        ("given, and used instead", lambda k: k not in from_init and k not in from_file),
        (f"from --init {cfg.get('init')}, used instead", lambda k: k in from_init))]
    said = "; ".join(f"{where}: {', '.join(texts)}" for where, texts in parts if texts)
    return [f"--recipe {name}: {said}"] if said else []


# the keys every run's config.yaml holds, which a --config file written by hand seldom does
RUN_RECORD_KEYS = frozenset({"task", "out", "resume"})


def _read_config_file(task, given: dict[str, Any], known: set[str]
                      ) -> tuple[dict[str, Any], list[str], bool]:
    """The settings of ``--config FILE`` (none without one), by setting name, and the notes to
    say once they pass: a key set twice (``max-steps`` and ``max_steps``), one no setting of
    the task declares, or ``task`` naming another task is refused, and the file's values are
    checked as the file spells them (``--config FILE: lr must be ...``; a flag given wins
    over its key, which is not read). A run's own ``config.yaml`` (``RUN_RECORD_KEYS``:
    whether FILE is one, returned third) serves as FILE for a new run: what that run worked out
    as it started (``data_sha256``, ``labels``, the model --init gave it), where it ran and
    whether it resumed (``out``, ``resume``: the new run is another, in --out or a new
    directory), and a Noam run's beta2 (the paper's, not chosen) are set aside, named in a
    note."""
    from ..loading import check_values
    from ..runs import read_yaml

    if not given.get("config"):
        return {}, [], False
    where = f"--config {given['config']}"
    raw = read_yaml(given["config"], hand_written=True)  # numbers as YAML 1.2 reads them
    file_cfg = _setting_names(raw, where)
    if file_cfg.get("task", task.name) != task.name:  # before its keys, which are that task's
        raise UsageError(f"{where}: task {file_cfg['task']}, but this is attnlab train "
                         f"{task.name} (its settings are a {file_cfg['task']} run's)")
    derived = set(task.run_config.layout.derivable - known)
    recorded = RUN_RECORD_KEYS <= file_cfg.keys()
    if recorded:
        derived |= set(task.run_config.layout.owner) - known | {"out", "resume"}
        if file_cfg.get("schedule") == "noam":
            derived.add("beta2")
    default_schedule = {**SHARED_DEFAULTS, **task.defaults}["schedule"]
    of_schedule = (_not_of_schedule(file_cfg, given, where, default_schedule) if recorded
                   else {})
    derived |= set(of_schedule)
    unknown = sorted(set(file_cfg) - known - derived)
    if unknown:
        raise UsageError(f"{where}: unknown setting(s) {', '.join(unknown)}"
                         f"{_meant_settings(unknown, known)}{_of_other_tasks(unknown, task)}")
    aside = sorted(set(file_cfg) & derived - set(of_schedule))
    overridden = _overridden(file_cfg, given, derived)
    file_cfg = {k: v for k, v in file_cfg.items() if k not in derived
                and k not in _budgets_given(given)}  # a budget flag wins over the file's
    resuming = given["resume"] if "resume" in given else file_cfg.get("resume")
    read = {k: v for k, v in file_cfg.items() if k not in given}
    beside = Path(given["config"]).parent  # where the file is: its paths are read from cwd
    if isinstance(read.get("out"), str):  # out: '' as --out ''; out: ~/runs/r as the shell's
        _refuse_blank({"out": read["out"]}, f"out in {where}")
        read["out"] = entered(read["out"], f"out in {where}")
    check_values(task, read, where, training=True, of_use=not resuming, beside=beside)
    notes = [f"note: {where}: {', '.join(aside)}: the run that wrote it worked them out, or "
             f"ran there; not settings of this new run, which works out its own"
             ] if aside and not resuming else []  # (a resumed run is the one that wrote it)
    if overridden:  # flags win (docs/cli.md), said: the file's value was what its user wrote
        notes.append(f"note: {where}: flags win: {'; '.join(overridden)}")
    if of_schedule:
        takes = [flag(k) for k in of_schedule if schedule_takes(given["schedule"])[k]]
        notes.append(f"note: {where}: {', '.join(f'{k} {v}' for k, v in of_schedule.items())}: "
                     f"settings of its --schedule {file_cfg.get('schedule', default_schedule)}"
                     f", not of --schedule {given['schedule']}; set aside"
                     + (f" (give {' or '.join(takes)} to set it)" if takes else ""))
    return {**file_cfg, **read}, notes, recorded  # as checked: ``init: 5`` is the text 5


def _overridden(file_cfg: dict[str, Any], given: dict[str, Any], derived: set[str]) -> list[str]:
    """"--lr 0.0003 over its lr: 0.001" for each setting of a --config file that a flag
    replaces with another value (a budget flag replaces either budget of the file). A key the
    file leaves unset (``epochs: null``, as a run's own config.yaml records the budget it did
    not use) set nothing, so nothing is said of it."""
    budget = next((b for b in ("epochs", "max_steps") if given.get(b) is not None), None)
    said = []
    for key, value in file_cfg.items():
        by = key if key in given else budget if key in _budgets_given(given) else None
        if (value is None or by is None or key in derived
                or (by == key and str(value) == str(given[key]))):
            continue
        shown = str(value).lower() if isinstance(value, bool) else value_text(value)
        said.append(f"{as_typed(by, given[by])} over its {key}: {shown}")
    return said


def _not_of_schedule(file_cfg: dict[str, Any], given: dict[str, Any], where: str,
                     default: str) -> dict[str, Any]:
    """A run's own config.yaml with another ``--schedule`` given: {setting: value} of those it
    records for its own schedule, set aside: wsd's --cooldown (``check_schedule`` refused it as
    if given) and --min-lr, which a wsd or linear run fills in (0) and which, kept under
    cosine, trained nanoGPT's cosine rather than the course's without a word. Its --lr (and
    --muon-lr) is refused where one schedule is Noam and the other not, unless given: Noam's
    is a factor, the others' a rate (a factor of 2 became a peak rate of 2)."""
    recorded = file_cfg.get("schedule", default)
    schedule = given.get("schedule", recorded)
    if schedule == recorded:
        return {}
    _refuse_rate_as_factor(where, file_cfg, given, recorded, schedule)
    return {k: file_cfg[k] for k in schedule_takes(schedule)
            if file_cfg.get(k) is not None and k not in given}


def _refuse_rate_as_factor(where: str, values: dict[str, Any], set_by_user: dict[str, Any],
                           was: str, schedule: str) -> None:
    """Refuse the --lr (and --muon-lr) of ``values`` (a run's config.yaml, a recipe), chosen
    for ``--schedule was``, under ``--schedule schedule`` where one of the two is Noam and the
    user did not set it: Noam's is a factor, the others' a rate (a factor of 2 became a peak
    rate of 2; ``--recipe fast``'s rate 0.003 became a Noam peak of 7.5e-5 at D 80)."""
    if schedule == was or "noam" not in (schedule, was):
        return
    for key in ("lr", "muon_lr"):
        if values.get(key) is not None and key not in set_by_user:
            what = ("the factor of its --schedule noam, not a rate" if was == "noam"
                    else f"a rate of its --schedule {was}, not a factor")
            raise UsageError(f"{where}: {key} {values[key]} is {what} of --schedule "
                             f"{schedule}; give {flag(key)}")


def _meant_settings(unknown: list[str], known: set[str]) -> str:
    """"; did you mean max_steps?" for a misspelt key of a --config file (``max_step``), as
    the command line says it of a misspelt flag (cli's ``_near``, one rule for both)."""
    from ..cli import _near

    meant = [m for key in unknown for m in _near(key, sorted(known))]
    return f"; did you mean {', '.join(meant)}?" if meant else ""


def _of_other_tasks(unknown: list[str], task) -> str:
    """"; block_size is a setting of train lm, not of train copy" for the keys of a --config
    file that other tasks' flags set (a file written for another task), each task named."""
    said = []
    for key in unknown:
        tasks = [name for name, other in available_tasks().items() if key in other.defaults]
        if tasks:
            said.append(f"{key}{' is a setting' if not said else ''} of train {', '.join(tasks)}")
    return f"; {', '.join(said)}, not of train {task.name}" if said else ""


def _budgets_given(given: dict[str, Any]) -> set[str]:
    """The step budgets that a budget given as a flag replaces: both (--epochs given, the
    file's max_steps is not read, nor its epochs)."""
    flags = {k for k in ("epochs", "max_steps") if given.get(k) is not None}
    return {"epochs", "max_steps"} if flags else set()


def _setting_names(raw: dict[Any, Any], where: str) -> dict[str, Any]:
    """A YAML mapping's keys as setting names (``max-steps`` is ``max_steps``): a key that is
    not text (``1:``, ``~:``) or one setting written twice is refused, naming it."""
    for key in raw:
        if not isinstance(key, str):
            raise UsageError(f"{where}: the key {value_text(key)} is not a setting name (a key "
                             f"is text, such as max_steps)")
    for key in raw:
        spellings = [r for r in raw if r.replace("-", "_") == key.replace("-", "_")]
        if len(spellings) > 1:  # max-steps and max_steps are one setting: set once
            raise UsageError(f"{where}: {key.replace('-', '_')} is set twice (as "
                             f"{' and '.join(spellings)})")
    return {k.replace("-", "_"): v for k, v in raw.items()}


def _one_budget(file_cfg: dict[str, Any], given: dict[str, Any], saved: dict[str, Any]) -> None:
    """--epochs and --max-steps are two ways to give one budget: with both, --epochs would win
    and --max-steps be ignored while config.yaml recorded both. Refuse the pair, from flags
    or --config, and a --max-steps given to --resume a run whose budget is --epochs (or
    --epochs to one whose budget is --max-steps). On another number of processes a run's
    --epochs no longer adds up (``preflight.check_epoch_processes``): there --max-steps
    replaces it, the one budget another number of processes continues."""
    named = {**file_cfg, **given}
    epochs, steps = named.get("epochs"), named.get("max_steps")
    if epochs is not None and steps is not None:
        raise UsageError(f"--epochs {epochs} and --max-steps {steps}: give one budget, not both "
                         f"(--epochs N trains N passes over the training data)")
    moved = saved and preflight.processes_of(
        {k: named.get(k) or saved.get(k) for k in ("devices", "num_nodes")}
    ) != preflight.processes_of(saved)
    if steps is not None and saved.get("epochs") and not moved:
        raise UsageError(f"--max-steps {steps}: this run's budget is --epochs {saved['epochs']} "
                         f"(its config.yaml); give --epochs to change it")
    if epochs is not None and saved and not saved.get("epochs"):
        raise UsageError(f"--epochs {epochs}: this run's budget is --max-steps "
                         f"{saved.get('max_steps')} (its config.yaml); give --max-steps to "
                         f"change it")


def _say(notes: list[str], into: list[str] | None = None) -> None:
    """Each of ``notes`` on stderr, once: not from each DDP rank; or added to ``into``, to be
    said later."""
    if into is not None:
        into.extend(notes)
    elif not _is_child():
        for note in notes:
            print(note, file=sys.stderr, flush=True)


def _apply_init(task, cfg: dict[str, Any], named: dict[str, str]
                ) -> tuple[list[str], set[str]]:
    """``--init DIR``: the model's shape from DIR (``Task.init_settings``), a value named on the
    command line or in ``--config`` that disagrees refused naming both; a default DIR's model
    cannot take (``Task.init_fits``) fitted to it, saying so, and a value given refused; DIR
    resolved and its weights' SHA-256 recorded. ``named``: the settings given, each with
    where ("" for a flag, else "--config FILE"), for messages to name it as it was typed. A
    resumed run continues from its own checkpoint: ``--init`` given with ``--resume`` is
    refused, and the recorded one is not read again. Returns the lines that say what DIR
    changed (a fitted default, a default DIR sets), printed once the settings pass their
    checks, and the names of the settings DIR set (not those given as DIR has them)."""
    if cfg["resume"]:
        if "init" in named:
            raise UsageError(f"--init with --resume: a resumed run continues from its own "
                             f"checkpoint in {cfg.get('out')}; drop --init")
        return [], set()
    if not cfg.get("init"):
        return [], set()
    notes, found = [], set()
    source = task.init_source(cfg["init"])
    for name, value in task.init_settings(source).items():
        if name in named and cfg.get(name) != value:
            typed, key = _as_given(name, cfg.get(name), named[name])
            raise UsageError(f"{typed}: --init {cfg['init']}'s model has {name} {value}; drop "
                             f"{key} ({_fixed_by_init(name)})")
        cfg[name] = value
        if name not in named:  # (a value given as DIR has it is the user's too)
            found.add(name)
    for name, (value, why) in task.init_fits(cfg).items():
        if name in named:  # the user's value: refused; a default is fitted, saying so
            typed, key = _as_given(name, cfg[name], named[name])
            raise UsageError(f"{typed}: {why}; give {key} {value} or less")
        notes.append(f"attnlab: {as_typed(name, value)} (the default {cfg[name]} would not "
                     f"fit): {why}")
        cfg[name] = value
        found.add(name)
    for name, (value, where) in task.init_defaults(source).items():  # a named value wins
        if name not in named and cfg.get(name) != value:
            cfg[name], shown = value, "--" + name.replace("_", "-")
            found.add(name)
            notes.append(f"note: {shown} {value}, from --init {cfg['init']}'s {where}; a "
                         f"{shown} given wins")
    cfg["init"], cfg["init_sha256"] = str(source.path), source.sha256
    return notes, found


# the settings --init fixes that are the sizes of the checkpoint's tensors; the rest (an
# epsilon, RoPE's theta, an activation, pre- or post-norm) are what its weights were trained with
_INIT_SHAPES = frozenset({"model_dim", "num_layers", "num_encoder_layers", "num_decoder_layers",
                          "num_heads", "num_kv_heads", "head_dim", "dim_feedforward",
                          "vocab_size", "type_vocab_size", "max_len", "max_positions"})


def _fixed_by_init(name: str) -> str:
    """Why a setting --init fixes cannot be given another value, for the refusal's words."""
    if name in _INIT_SHAPES:
        return "the shape comes from the checkpoint"
    return "the checkpoint's weights were trained with it"


def _as_given(name: str, value: Any, where: str) -> tuple[str, str]:
    """(the setting and its value as the user gave them, the setting alone): ``--no-bias``
    and ``--no-bias``, ``--block-size 128`` and ``--block-size`` for a flag (``where`` "");
    ``--config c.yaml: block_size 128`` and ``block_size`` for a key of that file."""
    if not where:
        typed = as_typed(name, value)
        return typed, typed.split(" ")[0]
    return f"{where}: {name} {value}", name


def _shared_unused(cfg: dict[str, Any]) -> list[tuple[list[str], str]]:
    """The shared settings ``cfg`` trains without, as ``Task.unused_settings`` gives a task's:
    Noam's AdamW takes the paper's β₂ (``make_optimizer``), whatever --beta2 says."""
    if cfg["schedule"] == "noam" and cfg["beta2"] != NOAM_BETA2:
        return [(["beta2"], "--schedule noam trains with the paper's beta2 0.98 (and eps 1e-9); "
                            "give another --schedule to set it")]
    return []


def _refuse_unused(task, cfg: dict[str, Any], given: set[str]) -> None:
    """A UsageError naming every setting given (flag or --config) that this run would not use."""
    for names, why in [*_shared_unused(cfg), *task.unused_settings(cfg)]:
        named = [k for k in names if k in given]
        if named:
            flags = ", ".join(flag(k) if cfg[k] is not False else as_typed(k, False)
                              for k in named)
            raise UsageError(f"{flags}: {why}")


# a DDP process other than the first (``settings.later_process``; RANK_KEYS its variables): it
# trains in the directory rank 0 chose and writes nothing of its own
_is_child = later_process


def _claimed(cfg: RunSettings, run_dir: Path, new: bool = False
             ) -> tuple[Path, int | None, str, Path | None]:
    """(the run directory, ``preflight.claim``'s lock of it, what was there: "run", "empty"
    or "new", the first directory the run makes): for ``_after_failure``. A default run
    directory (no --out) that a run started in the same second made first (``claim`` makes a
    new one in one step with its check), holds, or has filled since, is passed over for the
    next free name (-2, -3, ...): two runs started together each get their own. A ``new``
    --out (free when checked) that another process made meanwhile, where no lock tells
    whether that one writes there, is refused.
    A DDP process other than the first claims nothing."""
    while True:
        found = "run" if cfg.resume else ("empty" if run_dir.is_dir() else "new")
        created = preflight.first_missing(run_dir)  # --out a/b/run may make a/ and a/b/ too
        if _is_child():
            return run_dir, None, found, created
        try:
            lock, made = preflight.claim(run_dir, resume=cfg.resume, new=new)
            # what claim made: a shared parent removed since first_missing (a failed run
            # beside this one) is made again, and is this run's to remove if it fails
            return run_dir, lock, found, made or created
        except (UsageError, FileExistsError) as e:
            if not cfg.out and run_dir.is_dir():
                run_dir = _default_out(cfg.task)  # taken meanwhile: the next free name
            elif isinstance(e, FileExistsError):
                raise UsageError(f"--out {run_dir} was made by another process as this run "
                                 f"started (another attnlab train with the same --out?); "
                                 f"choose another --out") from None
            else:
                raise


def _choose_out(cfg: RunSettings) -> Path:
    # Only DDP children reuse ATTNLAB_RUN_DIR: a second in-process `main` must not reuse the
    # first run's directory.
    out = cfg.out or (os.environ.get("ATTNLAB_RUN_DIR") if _is_child() else None)
    if not out and cfg.num_nodes > 1:
        raise UsageError(f"--num-nodes {cfg.num_nodes} needs --out DIR on a shared file "
                         f"system: every node must write to the same run directory")
    from ..training.hardware import launched

    found = None if out else launched()
    if found and found[2] > 1:
        # torchrun and srun start every process themselves: each would take its own
        # runs/TASK-<time> (rank 1's a second later held a second copy of lm's prepared corpus)
        raise UsageError(f"{found[2]} processes started by {found[0]} need --out DIR: each "
                         f"would choose its own default run directory")
    return Path(out) if out else _default_out(cfg.task)


def _default_out(task: str) -> Path:
    """runs/TASK-<timestamp>, or with -2, -3, ... the first such name free (a run started in
    the same second holds the one before)."""
    stamp = f"runs/{task}-{time.strftime('%Y%m%d-%H%M%S')}"
    return Path(next(name for name in (stamp, *(f"{stamp}-{n}" for n in range(2, 10_000)))
                     if not os.path.lexists(name)))


def seed_all(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _preflight(args: argparse.Namespace, cfg: RunSettings, notes: list[str]) -> Path | None:
    """Everything that can be refused, checked before the run directory is touched.
    Returns the run directory, or None for a finished run that --resume has nothing to add to."""
    run_dir = _choose_out(cfg)
    if _is_child():
        return run_dir
    preflight.check_out(run_dir, resume=cfg.resume)
    if cfg.resume:
        from ..runs import read_yaml

        preflight.check_budget(run_dir, cfg)
        # the budget as it now stands: the run's, unless a flag or --config raised it
        saved = read_yaml(run_dir / "config.yaml")
        done = preflight.finished_message(run_dir, saved, cfg)
        if done:
            print(f"attnlab: {done}", file=sys.stderr)
            return None
        from ..training.csvlog import check_steps

        check_steps(run_dir / "logs")  # before keep_previous_log copies the log
        preflight.check_epoch_processes(saved, cfg, run_dir)
        # a run that trains on: said with ``notes``, once nothing refuses it
        notes.extend(preflight.resume_notes(saved, cfg.record()))
        if not preflight.has_checkpoint(run_dir) and (run_dir / "model.safetensors").is_file():
            raise UsageError(f"--resume: no checkpoint to resume from in {run_dir}/checkpoints")
        # a run directory copied while it trained: its checkpoint, metrics.json and log of
        # different moments
        partial_copy.refuse_older_checkpoint(run_dir)
        notes.extend(note for note in [partial_copy.log_behind_note(run_dir)] if note)
    preflight.check_cluster(cfg)
    preflight.check_memory(get_task(cfg.task).memory_estimate(cfg.record()))
    return run_dir


def _rounded_init(cfg) -> list[str]:
    """The note of a new run whose settled precision rounds --init's weights, if it does."""
    from ..interop.source import rounded_init_note

    note = None if cfg.resume else rounded_init_note(getattr(cfg, "init", None), cfg.precision)
    return [note] if note else []


def run(args: argparse.Namespace) -> int:
    given = {k: v for k, v in vars(args).items()
             if k not in ("task", "func", "command", "flag_notes")}
    # the notes of the settings (a flag given twice, a --config value a flag replaced), said
    # once nothing refuses the run: a refusal stays the one line of its error
    notes = vars(args).pop("flag_notes", [])
    cfg, checked = _configured(args.task, given, notes)
    # whether --out is free (a default name always is): made by another process by the time
    # this one makes it (the checks and Lightning's import, below, take seconds), it is theirs
    new = not cfg.resume and not (cfg.out and os.path.lexists(cfg.out))
    run_dir = _preflight(args, cfg, notes)
    if run_dir is None:
        _say(notes)
        return 0
    # Lightning: only once the flags are valid
    from ..training.engine import check_hardware, on_resume_accepted
    from ..training.hardware import wait_for_rank_zero

    check = None
    if cfg.resume and (asked := _given_precision(given, run_dir)):  # before any note is said
        check = functools.partial(preflight.check_resumed_precision, run_dir, cfg.precision,
                                  config_file=asked if isinstance(asked, str) else None)
    cfg = check_hardware(cfg, quiet=_is_child(), check_precision=check)
    _say([*notes, *_rounded_init(cfg)])
    # outside the try below: a run refused here must not remove what another one wrote
    run_dir, lock, found, created = _claimed(cfg, run_dir, new)
    # a new run records that its --epochs count the passes of all processes together
    cfg = cfg.derive(out=str(run_dir),
                     **({} if cfg.resume else {"epochs_of_all_processes": True}))
    os.environ["ATTNLAB_RUN_DIR"] = str(run_dir)
    from ..training import ranks

    # a rank dead while rank 0 waits in a collective that never ends: Lightning's watch says
    # it and ends the run, leaving it as rank 0 would have (removed, with nothing saved)
    ranks.after(lambda failure: _after_failure(failure, cfg, run_dir, found, created))
    if cfg.resume and not _is_child():  # once nothing refuses it: a refusal changes nothing
        on_resume_accepted(functools.partial(_accept_resume, cfg, run_dir, held=lock is not None))
    try:
        # (a SIGTERM or SIGHUP before the loop raises Interrupted: cli._sigterm_interrupts)
        wait_for_rank_zero(run_dir)  # torchrun's and srun's: rank 0 prepares the run first
        _train(cfg, run_dir, checked)
    except BaseException as e:
        if _is_child():  # an interruption is said by the first process alone
            from ..training.ranks import quiet

            raise quiet(e)
        raise _after_failure(e, cfg, run_dir, found, created) from None
    finally:
        ranks.after(lambda failure: failure)  # this run's, not another's in this process
        on_resume_accepted(None)
        if lock is not None:
            os.close(lock)
    return 0


def _given_precision(given: dict[str, Any], run_dir: Path) -> str | bool:
    """Whether ``--precision`` was given to the ``--resume`` of ``run_dir``: True for the flag,
    the --config file that sets another precision than the run's config.yaml holds, or False
    (a --resume without either continues with the run's own). A --config file that repeats
    the run's precision asks for nothing: the run's own config.yaml, or a copy of it with
    max_steps raised, records every setting, and the run continues as without it."""
    from ..runs import read_yaml

    if "precision" in given:
        return True
    config = given.get("config")
    if config:
        raw = read_yaml(config, hand_written=True)  # read, and checked, by configure
        named = _setting_names(raw, f"--config {config}")
        if "precision" in named and str(named["precision"]) != _run_precision(run_dir):
            return config
    return False


def _run_precision(run_dir: Path) -> str | None:
    """The precision ``run_dir``'s config.yaml records (None without the file)."""
    from ..runs import read_yaml

    own = Path(run_dir) / "config.yaml"
    return str(read_yaml(own).get("precision")) if own.is_file() else None


def _configured(task_name: str, given: dict[str, Any], notes: list[str] | None = None
                ) -> tuple[RunSettings, Any]:
    """``configure``, its notes of the settings added to ``notes`` (said, without); in a DDP
    process other than the first without the notes its checks print on the data (a repeated
    row, a split without an entity): the first process read the same files and said them,
    once. A refusal is raised, and told, as in the first."""
    if not _is_child():
        return configure(task_name, given, notes, check_out=True)
    import contextlib
    import io

    with contextlib.redirect_stderr(io.StringIO()):
        return configure(task_name, given, notes)


def _accept_resume(cfg: RunSettings, run_dir: Path, *, held: bool) -> None:
    """What a ``--resume`` changes in ``run_dir`` once the engine has passed its every refusal
    (``on_resume_accepted``): the files a killed save or write left, removed while this process
    holds the run (``held``: no save of another process is writing them), else named; a data
    file given at its new path, recorded in config.yaml."""
    from ..runs import remove_temporaries
    from ..training.checkpoint import remove_partial_checkpoint

    notes = [remove_partial_checkpoint(run_dir, held=held),
             remove_temporaries(run_dir, held=held)]
    _say([note for note in notes if note])
    preflight.record_moved_data(run_dir, cfg.record())


def _train(cfg: RunSettings, run_dir: Path, checked: Any = None) -> None:
    from ..runs import write_config

    run_dir.mkdir(parents=True, exist_ok=True)
    if not cfg.resume and not _is_child():
        write_config(run_dir, cfg)  # so that --resume can rebuild the run
    seed_all(cfg.seed)
    threads = cfg.threads
    if not threads and cfg.devices == 1 and default_threads("forward") == 1:
        # Without --threads: torch's own count on an idle machine, but one thread when another
        # job holds a core. A small model's kernels are too short to share between threads, and
        # on a busy machine the threads' spin-waiting costs more than it gains (docs/reverse.md,
        # "The defaults, and why", times the course recipe on one thread and on two).
        threads = 1
    if threads:
        import torch

        torch.set_num_threads(threads)
    if not _is_child():
        print(f"attnlab train {cfg.task} -> {run_dir}", file=sys.stderr, flush=True)
    task = get_task(cfg.task)
    task.runtime().run(task, cfg, run_dir, checked)


def _after_failure(e: BaseException, cfg: RunSettings, run_dir: Path,
                   found: str, created: Path | None = None) -> BaseException:
    """The exception to report for a run that stopped: an interruption says how to continue;
    a run that never reached its first checkpoint leaves nothing behind that would block the
    same command from running again."""
    # a second Ctrl-C stops before the step's checkpoint: the run goes on from an earlier one,
    # or, with none yet, is one that never started
    if isinstance(e, Interrupted) and e.checkpointed and preflight.has_checkpoint(run_dir):
        return e
    removed = preflight.discard_unstarted(run_dir, found=found, created=created)
    what = (f"removed what it wrote in {run_dir}" if found == "empty"  # the user's: it stays
            else f"removed {removed}")
    gone = f"{what}, so the same command can run again"
    if isinstance(e, UsageError) and removed:  # a data error found late: still one line
        return type(e)(f"{e} (the run stopped before its first checkpoint; {gone})")
    if isinstance(e, RankFailed) and removed and not e.quiet:  # a rank died: one line too
        return RankFailed(f"{e}; {gone}", exit_code=e.exit_code)
    if not isinstance(e, (KeyboardInterrupt, Interrupted)):
        if removed:
            print(f"attnlab: the run stopped before its first checkpoint; {gone}", file=sys.stderr)
        return e
    signum = e.signum if isinstance(e, Interrupted) else signal.SIGINT
    name = signal.Signals(signum).name
    if removed or not preflight.has_checkpoint(run_dir):
        gone = gone if removed else (f"{run_dir} has no checkpoint yet; the same command "
                                     f"starts it again from step 0")
        return Interrupted(f"interrupted ({name}) before the first checkpoint; {gone}", signum)
    from ..training.engine import resume_command

    return Interrupted(f"interrupted ({name}); continue with: {resume_command(cfg, run_dir)}",
                       signum, checkpointed=True)
