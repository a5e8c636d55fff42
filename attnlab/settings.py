"""Typed settings: one dataclass field per setting, from which the flag, its default, its help
and its check are all read.

A field is declared with ``setting(default, help=..., low=..., choices=...)``; then
``add_flags`` puts ``--the-name`` on an argparse parser (type from the annotation; a ``bool``
gets ``--x/--no-x``), ``defaults`` gives the values, and ``check`` refuses a value of the wrong
type, out of range or not among the choices with a ``UsageError`` that names the flag and shows
the value. Adding a shared training hyper-parameter is one field of ``TrainSettings`` plus its
use. Imports nothing heavy: the CLI builds every parser at start-up.

Examples:
    >>> defaults(TrainSettings)["max_steps"]
    1000
    >>> check(TrainSettings, {**defaults(TrainSettings), "lr": -1.0})
    Traceback (most recent call last):
    ...
    attnlab.errors.UsageError: --lr must be > 0, got -1.0
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import math
import numbers
import os
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .activation_names import LORA_LAYERS, LORA_TARGETS
from .errors import UsageError
from .paths import empty_message, entered, path_kind
from .runs import integer

__all__ = ["setting", "TrainSettings", "ModelRunSettings", "SamplingSettings", "GenerationSettings", "AdaptSettings", "CorpusSettings", "check_adapt", "freeze_blocks", "heads_divide_width", "decay_fits", "optimizer_fits", "monitoring_fits", "VAL_METRICS", "muon_finds_matrices",
           "fractions_leave_training", "nodes_leave_a_test_node", "set_size_fits", "seed_setting", "threads_setting", "beam_setting",
           "length_penalty_setting", "label_smoothing_setting", "held_out_setting", "min_lr_setting", "cooldown_setting",
           "check_schedule", "schedule_takes", "steps_of_epochs", "epoch_steps", "processes",
           "RANK_KEYS",
           "later_process", "SCHEDULES",
           "DECAY_SCHEDULES", "WSD_COOLDOWN", "add_flags", "defaults", "absent_values", "check",
           "check_record", "check_options", "check_argument", "flag", "as_typed", "exposed",
           "file_setting"]


def flag(name: str) -> str:
    """The command-line spelling of a setting: ``max_steps`` -> ``--max-steps``."""
    return "--" + name.replace("_", "-")


def as_typed(name: str, value: Any) -> str:
    """A setting and its value as a command line gives them, for messages: a ``bool`` is the
    flag or its off-form (``--no-bias``, not ``--bias False``), anything else the flag and
    the value.

    Examples:
        >>> as_typed("bias", False), as_typed("norm_first", True), as_typed("block_size", 64)
        ('--no-bias', '--norm-first', '--block-size 64')
    """
    if isinstance(value, bool):
        return flag(name) if value else "--no-" + name.replace("_", "-")
    return f"{flag(name)} {value}"


NOT_DECLARED: Any = object()  # ``setting(absent=)`` not given


def setting(default: Any, *, help: str = "", low: float | None = None, above: bool = False,
            below: float | None = None, most: float | None = None,
            choices: tuple | None = None, metavar: str | None = None,
            optional: bool = False, flag: bool = True, absent: Any = NOT_DECLARED,
            floor: float | None = None, floor_why: str = "", cap: float | None = None,
            cap_why: str = "", required: bool = False, wording: str | None = None,
            blank_why: str = "", list_sep: str | None = None) -> Any:
    """A dataclass field carrying what its flag needs.

    Args:
        default: the value when nothing sets it.
        help: one line for ``--help``.
        low: the smallest value allowed (``above=True``: values must be greater than it).
        below: values must be smaller than this.
        most: the largest value allowed (for a closed upper end: a probability's 1).
        choices: the values allowed (compared as text: YAML may give ``32`` for ``"32"``).
        metavar: shown in ``--help`` (default N for integers, F for numbers).
        optional: None is allowed (the setting is then "not set").
        flag: whether a command line may set it (False for a value that is derived or read
            from the data, such as a vocabulary size: ``exposed`` leaves it out).
        absent: the value read for a run whose ``config.yaml`` lacks the setting: what it
            trained with (docs/compatibility.md lists them). Undeclared, reading the setting
            of such a run is refused naming the file (``attnlab.run_config``).
        floor: the smallest value of use, where the range allows smaller ones that fail in
            practice (a temperature of 1e-30 is > 0 but overflows float32); a value in range
            and below it is refused with ``floor_why``, the reason (a value out of range gets
            the range's message: 0 is still "must be > 0").
        cap: likewise the largest value of use (``cap_why``: why more is refused), where the
            range allows larger ones that only cost time (``--beam 100000``; 0 is still "must
            be a positive integer").
        required: the command line must give the flag (argparse says so when it is missing).
        wording: the range in this setting's own words, for its messages ("0 or more"),
            instead of the words made from ``low`` and the others.
        blank_why: for a text that names something (``--init DIR``): an empty value (or
            spaces only) is refused, with this reason, where it would otherwise be read as
            something else (``Path("")`` is the current directory). Like ``floor``, a rule of
            use: a run already made with such a value still loads. A path's placeholder
            (``metavar`` that ``attnlab.paths.path_kind`` reads: ``FILE``, or a word or a path,
            ``balanced|FILE``) gives "name a file" unless said, and its value is taken as a
            shell hands it on (``attnlab.paths.entered``: ``~/w.json`` is the home's).
        list_sep: for a text that lists names (``--feature-columns a,b``): a file's YAML list
            (``[a, b]``) is read as the names joined by this separator.
    """
    if not blank_why and path_kind(metavar):
        blank_why = f"name a {path_kind(metavar)}"
    meta = {"help": help, "low": low, "above": above, "below": below, "most": most,
            "choices": None if choices is None else tuple(choices), "metavar": metavar,
            "optional": optional, "flag": flag, "floor": floor, "floor_why": floor_why,
            "cap": cap, "cap_why": cap_why, "required": required, "wording": wording,
            "blank_why": blank_why, "list_sep": list_sep}
    if absent is not NOT_DECLARED:
        meta["absent"] = absent
    return dataclasses.field(default=default, metadata=meta)


OPTIMIZERS = ("adamw", "muon")  # --optimizer: attnlab.training.module.make_optimizer builds each

# Every validation metric a task may compute (``Task.val_metrics`` names them), each with the
# direction it improves in: ``--monitor``'s names and its mode (min: lower is better), declared
# once. A task's validation logs them as ``logs/metrics.csv``'s columns of the same names.
VAL_METRICS: dict[str, str] = {
    "val_loss": "min", "val_perplexity": "min",
    "val_acc": "max", "val_seq_acc": "max", "val_token_accuracy": "max", "val_f1": "max",
    "val_auc": "max", "val_bleu": "max", "val_chrf": "max", "val_micro_f1": "max",
    "val_mse": "min", "val_r2": "max", "val_spearman": "max", "val_precision": "max",
    "val_recall": "max",
}


def monitoring_fits(cfg: dict[str, Any], computed: tuple[str, ...], *,
                    off: dict[str, str] | None = None, resuming: bool = False) -> str | None:
    """The rule of ``--monitor``, ``--keep-best``, ``--patience`` and ``--min-delta`` against
    the run: ``computed`` is what its validation computes during training (``Task.val_metrics``
    less ``Task.val_metrics_off``), ``off`` why a metric the task can compute is not computed
    by this run (translate's BLEU without --val-bleu; every one where the run validates at its
    end only: lm without --val-every). --monitor serves --keep-best and --patience, and
    --min-delta --patience only (``attnlab.training.best``), so without them each would be
    silently unused (``resuming``: a run's own config.yaml, which may come from before
    --min-delta served --patience only, when it also chose --keep-best's best: it goes on
    with any gain kept); --keep-best copies the whole model,
    which --strategy fsdp splits. The message naming the flags, or None where it holds;
    ``attnlab train`` checks it before the run starts.

    Examples:
        >>> monitoring_fits({"monitor": "val_bleu", "patience": 3}, ("val_loss", "val_acc"))
        '--monitor val_bleu: this run computes val_loss, val_acc at each validation'
        >>> monitoring_fits({"monitor": "val_acc", "keep_best": True}, ("val_loss", "val_acc"))
    """
    monitor, keep, patience = cfg.get("monitor", "val_loss"), cfg.get("keep_best"), cfg.get("patience")
    delta = cfg.get("min_delta") or 0.0
    if delta and patience is None and not resuming:
        return (f"--min-delta {delta:g} is the gain that ends --patience's wait (--keep-best "
                f"keeps the best whatever its gain); give --patience N")
    if not keep and patience is None:
        if monitor != "val_loss":
            return (f"--monitor {monitor} chooses what --keep-best and --patience watch; give "
                    f"one of them")
        return None
    named = "--keep-best" if keep else f"--patience {patience}"
    if not computed and off:  # no validation during training: the one reason for all
        return f"{named}: {next(iter(off.values()))}"
    if monitor not in computed:
        why = (off or {}).get(monitor)
        listed = ", ".join(computed)
        return (f"--monitor {monitor}: {why}; this run computes {listed}" if why
                else f"--monitor {monitor}: this run computes {listed} at each validation")
    if keep and cfg.get("strategy") == "fsdp":
        return ("--keep-best copies the whole model at each improvement, which --strategy fsdp "
                "splits across devices; use --strategy ddp")
    return None


def file_setting(help: str, **absent: Any) -> Any:
    """``--data FILE``, ``--val FILE``, ``--test FILE`` of the tasks that read users' files:
    optional; an empty value is refused, as it names no file (an empty ``--test`` was read as
    not given, and the run tested on a share of --data instead, unsaid)."""
    return setting(None, help=help, metavar="FILE", optional=True, blank_why="name a file",
                   **absent)


MAX_THREADS = 256  # more torch threads than any machine attnlab runs on has cores
# processes per node (--devices): nodes hold a few GPUs to a few dozen, and a CPU run of many
# processes is a test of DDP; --devices 1000000000000 (a slip) ran Lightning out of memory
MAX_DEVICES = 256


def threads_setting(help: str) -> Any:
    """``--threads N``: training's and every command's that runs a trained model."""
    return setting(None, help=help, low=1, most=MAX_THREADS, optional=True)


def seed_setting(default: int | None, help: str) -> Any:
    """``--seed S``: training's, sampling's (``generate``), the jets generator's (``data
    jets``) and the graph's (``train graph --graph-seed``): one range, what NumPy and Pythia
    take (PyTorch takes more)."""
    return setting(default, help=help, low=0, below=2**32, optional=default is None,
                   metavar="S")


MAX_BEAM = 100


def beam_setting(default: int | None, help: str, **absent: Any) -> Any:
    """``--beam N``: ``train translate``'s (the beams its test translations use) and
    ``translate``'s (the run's own when not given): one range, so the two refuse the same
    values (a mistyped ``--beam 100000`` would otherwise seem to hang)."""
    return setting(default, help=help, low=1, cap=MAX_BEAM, optional=default is None,
                   metavar="N", cap_why="more beams only cost time (each step scores beams x "
                                        "vocabulary candidates)", **absent)


def length_penalty_setting(default: float | None, help: str, **absent: Any) -> Any:
    """``--length-penalty F``: beam search's score is log-probability / length**F (any finite
    number: > 0 favours longer translations, < 0 shorter), ``train translate``'s and
    ``translate``'s."""
    return setting(default, help=help, optional=default is None, metavar="F", **absent)


def label_smoothing_setting(default: float, **absent: Any) -> Any:
    """``--label-smoothing F``: the share of a target's probability spread over every class
    (Szegedy et al., 2016; the Transformer paper's 0.1), for the tasks whose loss is a
    cross-entropy over tokens or classes (translate, lm, classify): one range, [0, 1)."""
    return setting(default, low=0, below=1, metavar="F", **absent,
                   help="label smoothing of the training loss (0: none)")


def held_out_setting(split: str) -> Any:
    """``--val-fraction`` / ``--test-fraction`` (``split`` "val" or "test") of classify and
    tag, which hold out a share of --data for a split whose file is not given; together they
    must leave rows to train on (``fractions_leave_training``)."""
    purpose = {"val": "validation", "test": "testing"}[split]
    return setting(0.1, help=f"share of --data held out for {purpose} without --{split}",
                   low=0, above=True, below=1)


# --schedule's choices: the course's cosine and the paper's Noam, then the warm-up-and-decay
# schedules (``attnlab.schedulers.decay_factor``), which end at --min-lr
DECAY_SCHEDULES = ("cosine", "wsd", "linear", "constant")
SCHEDULES = ("cosine", "noam", "wsd", "linear", "constant")
NOAM_BETA2 = 0.98  # Noam's AdamW's, the paper's (attnlab.training.module.make_optimizer)
# wsd's decay share when --cooldown is not given: the last fifth (MiniCPM decays over about a
# tenth, modded-nanogpt's records over a third and more)
WSD_COOLDOWN = 0.2


def min_lr_setting(help: str, **absent: Any) -> Any:
    """``--min-lr F``: the rate a decaying schedule ends at (``attnlab train``'s and ``plot
    lr``'s); at most --lr, which ``check_schedule`` checks."""
    return setting(None, low=0, optional=True, metavar="F", help=help, **absent)


def cooldown_setting(help: str, **absent: Any) -> Any:
    """``--cooldown F``: wsd's share of the steps that decay (``attnlab train``'s and ``plot
    lr``'s): strictly between 0 (no decay) and 1 (no stable phase: that is --schedule linear)."""
    return setting(None, low=0, above=True, below=1, optional=True, metavar="F", help=help,
                   **absent)


@dataclass
class TrainSettings:
    """What the training loop needs, for every ``attnlab train TASK`` (docs/cli.md, "Train"):
    the budget, the optimiser and its schedule, checkpoints, devices and number format. The
    model's shape and dropout are the model config's (``attnlab.models.configs``), the data's
    the task's. A task's ``overrides`` change these defaults, not their checks."""

    seed: int = seed_setting(42, help="random seed")
    max_steps: int = setting(1000, help="optimiser steps to train for", low=1)
    epochs: int = setting(None, help="train for N passes instead of --max-steps", low=1,
                          optional=True)
    batch_size: int = setting(64, help="examples per batch (per device; an optimiser step "
                                       "sees --accumulate batches)", low=1)
    accumulate: int = setting(1, low=1, absent=1,
                              help="batches per optimiser step (gradient accumulation: the "
                                   "step of N x --batch-size examples, in N passes)")
    lr: float = setting(1e-3, help="peak learning rate (Noam: its factor, peak "
                                       "factor·D^-0.5·warmup^-0.5)", low=0, above=True)
    warmup: int = setting(100, help="warm-up steps", low=0)
    schedule: str = setting("cosine", choices=SCHEDULES,
                            help="learning-rate schedule (docs/schedules.md): cosine (the "
                                 "course's; with --min-lr, nanoGPT's), noam, wsd "
                                 "(warm-up-stable-decay), linear, constant")
    min_lr: float = min_lr_setting("the rate the schedule ends at (AdamW's; under "
                                   "--optimizer muon Muon's ends at --muon-lr × --min-lr / "
                                   "--lr); cosine with it decays "
                                   "from the end of warm-up (nanoGPT's), without it from step "
                                   "0 to 0 (the course's); wsd and linear default to 0",
                                   absent=None)
    cooldown: float = cooldown_setting(f"wsd: the share of the steps, at the end, that decay "
                                       f"to --min-lr (default {WSD_COOLDOWN})", absent=None)
    grad_clip: float = setting(1.0, help="gradient-norm clipping (0: off)", low=0)
    weight_decay: float = setting(0.0, help="AdamW weight decay, on matrices only (not biases, "
                                            "norms or learned positions; a pretrained "
                                            "BERT's (--init) position and token-type "
                                            "tables are decayed, as transformers' Trainer "
                                            "decays them)", low=0,
                           absent=0.0)
    beta1: float = setting(0.9, help="AdamW's first-moment decay (its momentum; "
                                     "PyTorch's 0.9, the papers' and Noam's too)", low=0,
                           below=1, absent=0.9)
    beta2: float = setting(0.999, help="AdamW's second-moment decay (the cosine schedule's; "
                                       "Noam trains with the paper's 0.98 and refuses "
                                       "another)",
                        low=0, below=1, absent=0.999)
    optimizer: str = setting("adamw", choices=OPTIMIZERS, absent="adamw",
                             help="adamw; or muon: Muon for the weight matrices of the "
                                  "Transformer blocks, AdamW for the rest (docs/schedules.md)")
    muon_lr: float = setting(None, low=0, above=True, optional=True, absent=None,
                             help="Muon's peak learning rate (default: --lr, as Muon's update is "
                                  "scaled to AdamW's size; under Noam, Muon's factor)")
    checkpoint_every: int = setting(500, help="steps between checkpoints", low=1)
    val_every: int = setting(None, low=1, optional=True,
                             help="steps between validations (beyond --max-steps: one, at the "
                                  "last step)")
    monitor: str = setting("val_loss", metavar="METRIC", absent="val_loss",
                           blank_why="name a validation metric (--help lists this task's)",
                           help="the validation metric --keep-best and --patience watch "
                                "(lower or higher is better as the metric says)")
    keep_best: bool = setting(False, absent=False,
                              help="model.safetensors holds the weights of the best validation "
                                   "(by --monitor), not the last step's; the test split is "
                                   "scored on them")
    patience: int = setting(None, low=1, optional=True, absent=None,
                            help="stop after N validations in a row without improvement of "
                                 "--monitor")
    min_delta: float = setting(0.0, low=0, absent=0.0,
                               help="--patience's wait ends when --monitor gains more than F "
                                    "on where the wait began (--keep-best keeps any gain)")
    threads: int = threads_setting("torch CPU threads (for a task that sets none: "
                                   "torch's count, or 1 when another job holds a core; tiny "
                                   "models train fastest on 1)")
    devices: int = setting(1, help="processes (GPUs, or CPU processes) per node", low=1,
                           cap=MAX_DEVICES, cap_why="far more than any node's GPUs; a "
                                                    "count that large is taken for a slip "
                                                    "of the keyboard")
    num_nodes: int = setting(1, help="machines (needs a cluster environment, docs/scale.md)",
                             low=1)
    strategy: str = setting("auto", help="how devices share the work (docs/scale.md)",
                            choices=("auto", "ddp", "fsdp"))
    accelerator: str = setting("auto", help="what to run on", choices=("auto", "cpu", "gpu"))
    precision: str = setting("32", help="number format; auto: bf16-mixed on a CPU with bfloat16 "
                                        "instructions for a model 128 wide or more, else 32 "
                                        "(docs/scale.md)",
                             choices=("32", "64", "bf16-mixed", "16-mixed", "bf16-true", "auto"))
    compile: bool = setting(False, help="torch.compile the model")
    checkpoint_activations: bool = setting(False, absent=False,
                                           help="keep no block's activations for the backward "
                                                "pass, recompute them (less memory, about a "
                                                "third more compute)")
    resume: bool = setting(False, help="continue the run in --out from its last checkpoint")


def steps_of_epochs(epochs: int, batches: int, accumulate: int = 1, processes: int = 1) -> int:
    """The optimiser steps of ``epochs`` passes over ``batches`` batches when each step takes
    ``accumulate`` of them (``--accumulate``) on each of ``processes`` processes (DDP: each
    trains on its own share of an epoch's batches, so a step covers ``processes`` times as
    many): every task's ``--epochs`` budget (``epoch_steps``).

    Examples:
        >>> steps_of_epochs(2, 10), steps_of_epochs(2, 10, accumulate=4)
        (20, 6)
        >>> steps_of_epochs(2, 10, processes=2)
        10
    """
    return epochs * max(1, -(-max(1, batches // processes) // accumulate))


def processes(cfg: Any) -> int:
    """The training processes a run starts in all: ``--devices`` × ``--num-nodes``."""
    return int(cfg.devices or 1) * int(cfg.num_nodes or 1)


# A process's rank where a launcher started it: Lightning's own launcher (LOCAL_RANK and
# NODE_RANK of the processes it starts), torchrun (RANK), SLURM's srun (SLURM_PROCID), LSF's
# jsrun (JSM_NAMESPACE_RANK): the keys Lightning's rank-zero check reads too
RANK_KEYS = ("LOCAL_RANK", "NODE_RANK", "RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")


def later_process(environ: Any = None) -> bool:
    """This process (with ``environ``: one of that environment) is a DDP process other than
    the first (Lightning's launcher re-runs the train command; srun and torchrun start every
    process themselves): a note the first one says is not said again here."""
    env = os.environ if environ is None else environ
    return any(env.get(key, "0") != "0" for key in RANK_KEYS)


def epoch_steps(cfg: Any, batches: int, epochs: int = 1) -> int:
    """``steps_of_epochs`` of a run: ``epochs`` passes over its ``batches`` training batches
    (of all processes together), with its --accumulate and processes. A run made before
    (config.yaml without ``epochs_of_all_processes``) counted passes per process, and keeps
    the budget it started with."""
    older = getattr(cfg, "resume", False) and not getattr(cfg, "epochs_of_all_processes", True)
    return steps_of_epochs(epochs, batches, int(cfg.accumulate), 1 if older else processes(cfg))


def schedule_takes(schedule: str) -> dict[str, bool]:
    """Whether ``schedule`` takes each of --cooldown (wsd's decay share) and --min-lr (the
    rate a decaying schedule ends at: noam's has no floor, constant's does not decay).

    Examples:
        >>> schedule_takes("linear")
        {'cooldown': False, 'min_lr': True}
    """
    return {"cooldown": schedule == "wsd", "min_lr": schedule in DECAY_SCHEDULES[:-1]}


def check_schedule(cfg: dict[str, Any]) -> None:
    """--schedule, --min-lr and --cooldown against each other and --lr: --cooldown is wsd's
    only, --min-lr ends a schedule that decays (not noam's, not constant's) and is at most
    --lr. Sets what a wsd or linear run leaves out (--cooldown 0.2, --min-lr 0), so that
    config.yaml records the schedule it trained with. A run without these settings (made
    before them) passes: its cosine is the course's.

    Examples:
        >>> check_schedule({"schedule": "cosine", "lr": 1e-3, "min_lr": 0.01, "cooldown": None})
        Traceback (most recent call last):
        ...
        attnlab.errors.UsageError: --min-lr 0.01 is above --lr 0.001: ...
    """
    schedule, min_lr, cooldown = cfg["schedule"], cfg.get("min_lr"), cfg.get("cooldown")
    takes = schedule_takes(schedule)
    if cooldown is not None and not takes["cooldown"]:
        raise UsageError(f"--cooldown {cooldown} is the decay share of --schedule wsd, not of "
                         f"--schedule {schedule}")
    if min_lr is not None and not takes["min_lr"]:
        why = ("Noam's rate has no floor (--lr is its factor)" if schedule == "noam"
               else "constant holds --lr to the end")
        raise UsageError(f"--min-lr {min_lr} with --schedule {schedule}: {why}")
    if min_lr is not None and min_lr > cfg["lr"]:
        raise UsageError(f"--min-lr {min_lr} is above --lr {cfg['lr']}: the schedule decays from "
                         f"--lr down to --min-lr")
    if schedule == "wsd" and cooldown is None:
        cfg["cooldown"] = WSD_COOLDOWN
    if schedule in ("wsd", "linear") and min_lr is None:
        cfg["min_lr"] = 0.0


def decay_fits(cfg: dict[str, Any], *, name: str = "--weight-decay") -> str | None:
    """The rule of --weight-decay against the learning rate. Decoupled weight decay (AdamW's;
    Muon's as PyTorch writes it) multiplies each weight matrix by 1 - rate·decay at every
    step, so a rate·decay of 1 or more sets the matrices to zero, or flips their sign, at
    every step at that rate, without an error (a decay of 1000 with --lr 1e-3). The rate is
    the highest a step trains at: --lr, or under --schedule noam, where --lr is the factor,
    Noam's peak --lr·D^-0.5·max(1, warmup)^-0.5; with --optimizer muon also --muon-lr, Muon's
    (its factor under Noam). The message naming the flag (``name``: the course's
    ``TransformerPredictor`` names its argument, and its ``lr``) and where the rate comes
    from, or None where it holds.

    Examples:
        >>> decay_fits({"weight_decay": 0.1, "lr": 1e-3, "schedule": "cosine"}) is None
        True
        >>> decay_fits({"weight_decay": 1000, "lr": 1e-3, "schedule": "cosine"})[:49]
        '--weight-decay 1000 with a learning rate of 0.001'
    """
    decay = float(cfg.get("weight_decay") or 0.0)
    factors = {"lr": cfg["lr"]}
    if cfg.get("optimizer") == "muon" and cfg.get("muon_lr") is not None:
        factors["muon_lr"] = cfg["muon_lr"]
    source = max(factors, key=factors.get)  # --lr where they are equal
    called = f"--{source.replace('_', '-')}" if name.startswith("--") else source
    rate, origin = factors[source], called
    if cfg.get("schedule") == "noam":
        # Noam's rate is highest at step warmup (its step 0 counts as 1): factor·D^-0.5·W^-0.5
        width, warmup = cfg["model_dim"], max(1, cfg["warmup"])
        rate *= (width * warmup) ** -0.5
        origin = (f"Noam's peak, {called} × D^-½ × warmup^-½ = {factors[source]:g} × "
                  f"{width}^-½ × {warmup}^-½")
    if decay * rate < 1:
        return None
    whose = "Muon's" if source == "muon_lr" else "AdamW's"
    return (f"{name} {decay:g} with a learning rate of {rate:g} ({origin}): each step would "
            f"multiply the weight matrices by 1 - rate × decay = {1 - rate * decay:g} "
            f"(decoupled weight decay, {whose}), "
            f"{'erasing' if rate * decay == 1 else 'flipping'} them; give a {name} below "
            f"{1 / rate:g}")


def optimizer_fits(optimizer: str, muon_lr: float | None, strategy: str,
                   weight_decay: float = 0.0) -> str | None:
    """The rule of ``--optimizer`` and its settings: ``--muon-lr`` is Muon's, so it needs
    ``--optimizer muon`` (rather than be silently unused); Muon orthogonalises each weight
    matrix whole, which ``--strategy fsdp`` splits across devices; and ``--weight-decay``
    decays the matrices, told by their shape, which FSDP hands the optimiser flattened (every
    parameter one-dimensional: nothing was decayed, without a word). The message naming the
    flags, or None where it holds; ``attnlab train`` checks it before the run starts. Whether
    the model has weight matrices for Muon is ``muon_finds_matrices``'s rule.

    Examples:
        >>> optimizer_fits("adamw", 0.02, "auto")
        '--muon-lr 0.02 is the learning rate of --optimizer muon; the run trains with --optimizer adamw'
        >>> optimizer_fits("muon", 0.02, "ddp") is None
        True
    """
    if muon_lr is not None and optimizer != "muon":
        return (f"--muon-lr {muon_lr:g} is the learning rate of --optimizer muon; the run "
                f"trains with --optimizer {optimizer}")
    if optimizer == "muon" and strategy == "fsdp":
        return ("--optimizer muon orthogonalises each weight matrix whole, and --strategy fsdp "
                "splits them across devices; use --strategy ddp")
    if weight_decay and strategy == "fsdp":
        return (f"--weight-decay {weight_decay:g} decays the weight matrices, told by their "
                f"shape, and --strategy fsdp hands the optimiser every weight flattened; use "
                f"--strategy ddp, or --weight-decay 0")
    return None


def heads_divide_width(width: int, heads: int, *,
                       names: tuple[str, str] = ("--model-dim", "--num-heads")) -> str | None:
    """The rule where attention splits the width among its heads (each head gets width /
    heads numbers): the heads must divide the width. The message saying it is broken, naming
    ``names`` (the flags; a config file's keys; a library's arguments), or None where it holds.
    ``attnlab train``, ``attnlab.load`` and the attention module all check this one rule.

    Examples:
        >>> heads_divide_width(30, 4)
        '--model-dim (30) must be divisible by --num-heads (4)'
        >>> heads_divide_width(32, 4) is None
        True
    """
    if heads > 0 and width % heads:
        return f"{names[0]} ({width}) must be divisible by {names[1]} ({heads})"
    return None


def fractions_leave_training(val_fraction: float, test_fraction: float, *,
                             val_used: bool = True, test_used: bool = True,
                             names: tuple[str, str] = ("--val-fraction", "--test-fraction")
                             ) -> str | None:
    """The rule where a task holds out a validation and a test share of its one data file
    (classify, jets): the shares held out must leave something to train on. A share is not
    held out where its own file is given (``--val FILE``, ``--test FILE``), and then does not
    count (``val_used``, ``test_used`` False). The message saying it is broken, naming
    ``names`` (the flags, or a config file's keys), or None where it holds. ``attnlab train``
    and ``attnlab.load`` (a hand-edited config.yaml) check this one rule.

    Examples:
        >>> fractions_leave_training(0.5, 0.5)
        '--val-fraction (0.5) + --test-fraction (0.5) must be < 1: nothing would be left to train on'
        >>> fractions_leave_training(0.5, 0.5, val_used=False) is None
        True
    """
    used = [(name, share) for name, share, held in zip(names, (val_fraction, test_fraction),
                                                     (val_used, test_used)) if held]
    if sum(share for _, share in used) < 1:
        return None
    shares = " + ".join(f"{name} ({share})" for name, share in used)
    return f"{shares} must be < 1: nothing would be left to train on"


def nodes_leave_a_test_node(train_per_class: int, val_per_class: int, smallest: int, *,
                            why: str, names: tuple[str, str] = ("--train-per-class",
                                                                "--val-per-class")) -> str | None:
    """The rule of graph's per-class split: each class's train and validation nodes must leave
    it one node to test, so they are at most ``smallest - 1`` (``smallest``: the fewest
    members a class has, ``why`` saying where that comes from). The message naming ``names``
    (the flags, or the library's arguments), or None where it holds. ``attnlab train graph``
    checks it before the graph is built, ``attnlab.data.graphs.split_nodes`` on the graph.

    Examples:
        >>> nodes_leave_a_test_node(10, 6, 16, why="the smaller club has 16 members")
        '--train-per-class + --val-per-class must be at most 15 (the smaller club has 16 members), got 10 + 6'
    """
    if train_per_class + val_per_class + 1 <= smallest:
        return None
    return (f"{names[0]} + {names[1]} must be at most {smallest - 1} ({why}), got "
            f"{train_per_class} + {val_per_class}")


def set_size_fits(set_size: int, smallest: int, *, name: str = "--set-size",
                  of: str = "a split") -> str | None:
    """The rule of anomaly's sets: a set holds ``set_size - 1`` images of one digit class and
    one odd image, so 3 <= ``set_size`` <= ``smallest`` + 1, where ``smallest`` is the fewest
    images a digit class has (of every split's pool: ``of``); of 2 images, one of each class,
    neither is the odd one, so no model can score above chance. The message naming ``name``, or
    None where it holds; ``attnlab train anomaly`` and ``attnlab.data.digits_sets.DigitSets``
    check it.

    Examples:
        >>> set_size_fits(2, 40)  # doctest: +ELLIPSIS
        '--set-size must be in [3, 41] (a set of 2 has no odd one; the smallest digit ...), got 2'
    """
    if 3 <= set_size <= smallest + 1:
        return None
    return (f"{name} must be in [3, {smallest + 1}] (a set of 2 has no odd one; the smallest "
            f"digit class of {of} has {smallest} images), got {set_size}")


@dataclass
class ModelRunSettings:
    """What every command that runs a trained model shares (``predict``, ``evaluate``,
    ``translate``, ``generate``, ``view``, ``plot attention``, ``export``)."""

    threads: int = threads_setting("torch CPU threads (default: one per idle core for batched "
                                   "work, else 1)")


MIN_TEMPERATURE = 1e-6  # below it, logits / T overflow float32 (inf - inf = NaN probabilities)


@dataclass
class SamplingSettings:
    """How the next token is chosen from the scores (``attnlab.generation.select_next_token``,
    ``attnlab generate``): the one declaration the library and the command line both check."""

    temperature: float = setting(1.0, low=0, above=True, floor=MIN_TEMPERATURE, metavar="T",
                                 floor_why="logits / temperature would overflow float32; "
                                           "greedy decoding (--greedy, do_sample=False) takes "
                                           "the most likely token",
                                 help="at least 1e-6; lower is more conservative (default "
                                      "1.0, or a Hugging Face DIR's generation_config.json's; "
                                      "for the most likely token use --greedy)")
    top_k: int = setting(None, low=1, optional=True, metavar="K",
                         help="sample among the K most likely tokens (default: all, or a "
                              "Hugging Face DIR's generation_config.json's)")
    top_p: float = setting(None, low=0, above=True, most=1, optional=True, metavar="P",
                           help="sample from the nucleus of mass P (default: all, or a Hugging "
                                "Face DIR's generation_config.json's)")


@dataclass
class GenerationSettings(SamplingSettings):
    """A generation's length, and how its next tokens are chosen (``attnlab.generation``'s
    loops and ``attnlab generate``, which streams: a long sample is its user's to stop)."""

    max_new_tokens: int = setting(200, low=1, metavar="N",
                                  help="tokens to generate at most (default 200)")


# predict prints each continuation once it is whole: a mistyped --max-new-tokens 1000000000000
# seemed to hang, where generate, which streams, shows its tokens as they come
MAX_PREDICT_TOKENS = 1_000_000


@dataclass
class PredictSettings:
    """``attnlab predict``'s continuation of an lm run's inputs (its other flags are inputs)."""

    max_new_tokens: int = setting(None, low=1, optional=True, metavar="N",
                                  cap=MAX_PREDICT_TOKENS,
                                  cap_why="predict prints a continuation once it is whole, "
                                          "and one that long takes hours (a greedy one may "
                                          "never reach an end token); generate streams its "
                                          "tokens as they come",
                                  help="lm runs: tokens to continue each input by, as "
                                       "`generate --greedy --max-new-tokens N` does (default: "
                                       "the run's predict_tokens, 100)")


@dataclass
class CorpusSettings:
    """How a text corpus is split when it is prepared for ``attnlab train lm``
    (``attnlab.data.corpus.prepare``, ``attnlab prepare``): the one declaration the library
    and the command line both check."""

    val_fraction: float = setting(0.1, low=0, above=True, most=0.5, metavar="F",
                                  help="share of the text held out for validation (default 0.1)")


@dataclass
class AdaptSettings:
    """What a run trains of its model (lm, classify, tag and translate), and from what: every
    weight, all but the first blocks, or a low-rank update of the attention projections
    (``attnlab.nn.lora``), starting from random weights or from ``--init DIR``'s. The rules
    between them and the model are ``check_adapt``'s; ``--init`` is ``Task.init_settings``'s
    and ``attnlab.interop.source``'s."""

    freeze: str = setting("none", metavar="WHAT", absent="none",
                          blank_why="give none, encoder or all-but-last-N",
                          help="none; encoder (classify, tag, translate: train the head or "
                               "the decoder only); all-but-last-N (train the last N blocks and "
                               "what follows them)")
    lora_rank: int = setting(None, low=1, optional=True, metavar="R", absent=None,
                             help="train a rank-R update (LoRA) of the layers --lora-targets "
                                  "names instead of the weights, merged into them at the end")
    lora_targets: str = setting("attention", choices=LORA_TARGETS, absent="attention",
                                help="the layers --lora-rank adapts: attention (its "
                                     "projections), mlp (the feed-forward network's layers) "
                                     "or all-linear (both)")
    lora_alpha: float = setting(None, low=0, above=True, optional=True, absent=None,
                                help="the LoRA update's scale is alpha/R (default: R)")
    init: str = setting(None, optional=True, metavar="DIR", absent=None,
                        blank_why="give DIR (leave --init out to start from random weights)",
                        help="start from the weights and tokenizer of DIR, a Hugging Face model "
                             "directory on disk or an attnlab run of this task (nothing is "
                             "downloaded); the model's shape comes from DIR")


def freeze_blocks(value: str) -> int | None:
    """N of ``--freeze all-but-last-N``; None for another value.

    Examples:
        >>> freeze_blocks("all-but-last-2"), freeze_blocks("encoder")
        (2, None)
    """
    head, _, n = value.rpartition("-")
    return int(n) if head == "all-but-last" and n.isdigit() else None


def check_adapt(cfg: dict[str, Any], *, blocks: int, encoder: bool, attention: bool) -> None:
    """--freeze, --lora-rank and --lora-alpha against each other and the model: ``blocks`` is
    how many blocks all-but-last-N counts, ``encoder`` whether the model has an encoder to
    freeze, ``attention`` whether it has attention projections for LoRA. Sets --lora-alpha to
    --lora-rank when not given (a scale of 1).

    Examples:
        >>> cfg = {"freeze": "all-but-last-3", "lora_rank": None, "lora_alpha": None}
        >>> check_adapt(cfg, blocks=2, encoder=False, attention=True)
        Traceback (most recent call last):
        ...
        attnlab.errors.UsageError: --freeze all-but-last-3: the model has 2 blocks
    """
    freeze, rank = str(cfg.get("freeze") or "none"), cfg.get("lora_rank")
    n = freeze_blocks(freeze)
    if freeze not in ("none", "encoder") and n is None:
        raise UsageError(f"--freeze must be none, encoder or all-but-last-N (N a number of "
                         f"blocks), got {freeze!r}")
    if freeze != "none" and not attention:
        raise UsageError(f"--freeze is for --arch transformer; this model (a GRU "
                         f"encoder-decoder) has no blocks to freeze")
    if freeze == "encoder" and not encoder:
        raise UsageError("--freeze encoder: this model has no encoder (a decoder-only "
                         "language model); all-but-last-N freezes its first blocks")
    if n is not None and n > blocks:
        raise UsageError(f"--freeze {freeze}: the model has {blocks} blocks")
    if rank is None:
        if cfg.get("lora_alpha") is not None:
            raise UsageError("--lora-alpha scales a LoRA update: give --lora-rank too")
        if cfg.get("lora_targets", "attention") != "attention":
            raise UsageError(f"--lora-targets {cfg['lora_targets']} names the layers of a LoRA "
                             f"update: give --lora-rank too")
        return
    if freeze != "none":
        raise UsageError(f"--freeze {freeze} with --lora-rank: LoRA trains only its update "
                         f"(and a classifier's head) already")
    if not attention:  # the one model without Transformer blocks: no target set matches
        targets = str(cfg.get("lora_targets") or "attention")
        named = "" if targets == "attention" else f" (--lora-targets {targets})"
        raise UsageError(f"--lora-rank adapts {LORA_LAYERS[targets]}{named}; this model has "
                         f"none (--arch transformer has)")
    if rank > cfg["model_dim"]:  # the width is --init's where the run starts from one
        width = (f"{cfg['model_dim']}, --init {cfg['init']}'s" if cfg.get("init") else
                 f"--model-dim {cfg['model_dim']}")
        raise UsageError(f"--lora-rank {rank} is above the model width ({width}); a rank-R "
                         f"update needs R <= the width")
    if cfg.get("lora_alpha") is None:
        cfg["lora_alpha"] = float(rank)


def muon_finds_matrices(cfg: dict[str, Any], layout: dict[str, Any]) -> str | None:
    """The rule of ``--optimizer muon`` against the model and what a run trains of it: Muon
    trains the weight matrices of the Transformer blocks' attention and feed-forward networks
    (``attnlab.training.muon.hidden_matrices``), so the model must have blocks and ``--freeze``
    or ``--lora-rank`` must leave some of those matrices training. ``layout`` is the task's
    ``Task.adapt_layout``: ``attention`` (the model has Transformer blocks) and ``decoder``
    (blocks train beside a frozen encoder: a translator's decoder; without it --freeze encoder
    leaves the head alone). The message naming the flags, or None where it holds. ``attnlab
    train`` checks it before the run starts; the optimiser refuses such a model again.

    Examples:
        >>> muon_finds_matrices({"optimizer": "muon", "task": "graph"}, {"attention": False})
        '--optimizer muon: the graph model has no Transformer blocks, whose attention and feed-forward weight matrices are what Muon trains; use --optimizer adamw'
    """
    if cfg.get("optimizer") != "muon":
        return None
    freeze, rank, arch = str(cfg.get("freeze") or "none"), cfg.get("lora_rank"), cfg.get("arch")
    if not layout["attention"]:
        named = f" (--arch {arch})" if arch else ""
        why = f"the {cfg.get('task', 'task')} model{named} has no Transformer blocks"
    elif rank is not None:
        why = f"--lora-rank {rank} trains low-rank updates beside the blocks, not the blocks"
    elif freeze_blocks(freeze) == 0:
        why = f"--freeze {freeze} trains none of the blocks"
    elif freeze == "encoder" and not layout.get("decoder"):
        why = "--freeze encoder trains the head alone, none of the blocks"
    else:
        return None
    return (f"--optimizer muon: {why}, whose attention and feed-forward weight matrices are "
            f"what Muon trains; use --optimizer adamw")


@functools.cache
def _types(cls) -> dict[str, type]:
    return typing.get_type_hints(cls)


def _fields(cls, only: Iterable[str] | None) -> list[dataclasses.Field]:
    """The fields of ``cls`` (only those named in ``only``, if given, in declaration order)."""
    fields = dataclasses.fields(cls)
    if only is None:
        return list(fields)
    only = set(only)
    unknown = only - {f.name for f in fields}
    if unknown:
        raise ValueError(f"{cls.__name__} has no setting {', '.join(sorted(unknown))}")
    return [f for f in fields if f.name in only]


def exposed(cls, *, besides: type | None = None) -> tuple[str, ...]:
    """The names of the fields of ``cls`` a command line may set (``flag=True``), leaving out
    those ``besides`` declares.

    Examples:
        >>> @dataclass
        ... class Net:
        ...     model_dim: int = setting(64, low=1)
        ...     depth: int = setting(2, help="blocks", low=1)
        ...     vocab_size: int = setting(None, flag=False, optional=True)
        >>> exposed(Net)
        ('model_dim', 'depth')
    """
    shared = set() if besides is None else {f.name for f in dataclasses.fields(besides)}
    return tuple(f.name for f in dataclasses.fields(cls)
                 if f.metadata.get("flag", True) and f.name not in shared)


def defaults(cls, *, only: Iterable[str] | None = None) -> dict[str, Any]:
    """Every setting's default (or those named in ``only``), by name."""
    return {f.name: f.default for f in _fields(cls, only)}


def absent_values(cls) -> dict[str, Any]:
    """What a run whose ``config.yaml`` lacks a setting of ``cls`` trained with, by name: the
    fields that declare ``absent=``.

    Examples:
        >>> absent_values(TrainSettings)["weight_decay"], absent_values(TrainSettings)["beta2"]
        (0.0, 0.999)
    """
    return {f.name: f.metadata["absent"] for f in dataclasses.fields(cls)
            if "absent" in f.metadata}


def add_flags(group, cls, *, only: Iterable[str] | None = None) -> None:
    """One flag per field of ``cls`` (or per field named in ``only``), with no argparse default
    (so that a ``--config`` file can set what the command line does not)."""
    types = _types(cls)
    for f in _fields(cls, only):
        meta, kind = f.metadata, types[f.name]
        if kind is bool:
            group.add_argument(flag(f.name), action=argparse.BooleanOptionalAction,
                               help=meta["help"] or None)
        elif meta["choices"]:
            group.add_argument(flag(f.name), choices=meta["choices"], help=meta["help"] or None)
        else:
            metavar = meta["metavar"] or ("N" if kind is int else "F")
            group.add_argument(flag(f.name), type=FLAG_TYPES.get(kind, kind), metavar=metavar,
                               help=meta["help"] or None, required=meta.get("required", False))


def number(text: str) -> float:
    """A float flag's value: Python's ``float`` of ASCII text without spaces around it, or an
    integer as ``integer`` reads it, so that ``--lr`` reads what ``lr:`` in a ``--config``
    file reads (``0x10``). ``ValueError`` for anything else (argparse then names the flag).

    Examples:
        >>> number("1e-3"), number("0x10")
        (0.001, 16.0)
    """
    # float's " 12" and "١٢" (other scripts' digits): a file's ' 12' and ١٢ are texts, and
    # ``integer`` refuses both
    if text != text.strip() or not text.isascii():
        raise ValueError(f"not a number: {text!r}")
    try:
        return float(text)
    except ValueError:
        return float(integer(text))


# the value of a flag of each type, read by the rule a --config file's value is read by
FLAG_TYPES = {int: integer, float: number}


def _range_text(meta: dict, kind: type) -> str | None:
    """What the range asks for, in the words the messages have always used."""
    if meta.get("wording"):
        return meta["wording"]
    low, below, most = meta["low"], meta["below"], meta.get("most")
    if most is not None and low is not None and kind is int:
        return f"an integer from {int(low)} to {int(most)}"
    if most is not None and low is not None:
        return f"in {'(' if meta['above'] else '['}{low:g}, {most:g}]"
    if below is not None and low is not None and kind is int:
        return f"in {int(low)}..{int(below) - 1}"
    if below is not None and low is not None:
        return f"in {'(' if meta['above'] else '['}{low:g}, {below:g})"
    if low is None:
        return None
    if meta["above"]:
        return f"> {low:g}"
    if kind is int and low == 1:
        return "a positive integer"
    if kind is int:
        return f"an integer >= {int(low)}"
    return f">= {low:g}"


def _is_text(kind: Any) -> bool:
    """``str``, ``str | None`` or ``Optional[str]``: a setting whose value is text."""
    return kind is str or set(typing.get_args(kind)) == {str, type(None)}


def _joined(shown: str, names: list, sep: str, error: type) -> str:
    """A file's list of names (``feature_columns: [a, b]``) as the flag spells it (``a,b``);
    an item that is not a name, or holds the separator, is refused rather than split."""
    for name in names:
        if (not isinstance(name, (str, int, float)) or isinstance(name, bool)
                or sep in str(name) or not str(name).strip()):
            raise error(f"{shown} must be a list of names (none holding {sep!r}), got {name!r} "
                        f"in {names!r}")
    return sep.join(str(name) for name in names)


def value_text(value: Any) -> str:
    """A value as a message shows it; None, which only a file's null gives, as null, and a
    date, which YAML reads from an unquoted ``2024-01-01``, as a file writes it."""
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, datetime.date):
        return value.isoformat()
    return "null" if value is None else repr(value)


def _is_path(meta: dict, beside: Path | None) -> bool:
    """Whether a setting's value is a path to take as a shell hands it on (``entered``): one
    of a ``--config`` file (``beside``, its directory), resumed or not — a run's own
    config.yaml holds its paths expanded. A flag's path is taken so where the command line is
    read (``attnlab.cli``); a Python call's (``Task.check_settings``, ``check_argument``) as
    it is, as pathlib takes it (``attnlab.paths.NOT_EXPANDED``)."""
    return beside is not None and path_kind(meta["metavar"]) is not None


def _check_one(shown: str, value: Any, kind: type, meta: dict, error: type,
               whole: str = "an integer", of_use: bool = True, in_file: bool = False,
               beside: Path | None = None) -> Any:
    if value is None and meta["optional"]:
        return None
    if meta["choices"]:
        if str(value) not in meta["choices"] or value is None:
            # a file may say null where the setting allows it; a command line has no null
            none = ", or null" if meta["optional"] and in_file else ""
            raise error(f"{shown} must be one of {', '.join(meta['choices'])}{none}, "
                        f"got {value_text(str(value) if value is not None else None)}")
        return str(value)
    if isinstance(value, list) and meta.get("list_sep") and _is_text(kind):
        value = _joined(shown, value, meta["list_sep"], error)
    if _is_text(kind) and not isinstance(value, (str, os.PathLike)):
        if isinstance(value, bool) and in_file:  # YAML 1.1's Norway problem: `tgt: no`
            raise error(f"{shown} must be text, got {str(value).lower()} (YAML reads an unquoted "
                        f"yes, no, on or off as true or false; quote a text: 'no')")
        if not isinstance(value, (int, float)) or isinstance(value, bool):  # yes, [a], null
            raise error(f"{shown} must be text, got {value_text(value)}")
        value = str(value)  # YAML reads `label_column: 1` or `init: 5` as a number
    if meta.get("blank_why") and of_use and isinstance(value, str) and not value.strip():
        raise error(empty_message(shown, meta["blank_why"]))
    if _is_path(meta, beside):  # a path, as a shell would hand it on
        value = entered(value, shown, beside=beside)
    if kind is bool:
        if not isinstance(value, bool):
            raise error(f"{shown} must be true or false, got {value_text(value)}")
        return value
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int and not (number and isinstance(value, int)):
        raise error(f"{shown} must be {whole}, got {value_text(value)}")
    if kind is float and not (number and math.isfinite(value)):
        raise error(f"{shown} must be a number, got {value_text(value)}")
    low, below, most = meta["low"], meta["below"], meta.get("most")
    bad = ((low is not None and (value <= low if meta["above"] else value < low))
           or (below is not None and value >= below) or (most is not None and value > most))
    floor, cap = meta.get("floor"), meta.get("cap")
    # the range's own edge below a floor (--temperature 0) is told the floor's reason, which
    # names what the user was after (--greedy)
    at_edge = of_use and floor is not None and low is not None and low <= value < floor
    if bad and not at_edge:
        raise error(f"{shown} must be {_range_text(meta, kind)}, got {value}")
    if not of_use:  # a value a run was made with: the range only, not floor and cap
        return value
    if floor is not None and value < floor:
        raise error(f"{shown} {value} is too small (at least {floor:g}): {meta['floor_why']}")
    if cap is not None and value > cap:
        most = f"{int(cap):,}" if kind is int else f"{cap:g}"  # 1,000,000, not 1e+06
        raise error(f"{shown} {value} is too large (at most {most}): {meta['cap_why']}")
    return value


def check(cls, cfg: dict[str, Any], *, only: Iterable[str] | None = None) -> None:
    """Check (and normalise: choices become text) every setting of ``cls`` in ``cfg`` (or
    those named in ``only``); a ``UsageError`` names the flag. For ``--resume``
    (``cfg["resume"]`` true) the values are the run's own, which it continues with: their
    range is checked, not a ``floor`` or ``cap``, which apply to new values only."""
    types, of_use = _types(cls), not cfg.get("resume")
    for f in _fields(cls, only):
        if f.name in cfg:
            cfg[f.name] = _check_one(flag(f.name), cfg[f.name], types[f.name], f.metadata,
                                     UsageError, of_use=of_use)


def check_record(cls, values: dict[str, Any], where: str, *, of_use: bool = False,
                 beside: Path | None = None) -> None:
    """Check every setting of ``cls`` that ``values`` holds — a run's ``config.yaml``, read
    back, or a ``--config`` file — against the same declaration ``check`` uses at train time;
    a ``UsageError`` names ``where`` (the file) and the key as the file spells it. A value
    outside a ``floor`` or ``cap`` but in range is a run's own (a recorded ``beam: 200``,
    above the cap): it loads; ``of_use`` (a ``--config`` file's values, about to be used) checks those
    rules of use too, and leaves each value in ``values`` as ``check`` normalises it;
    ``beside``, that file's directory, for its relative paths (``attnlab.paths.entered``).

    Examples:
        >>> check_record(TrainSettings, {"lr": 0}, "runs/r/config.yaml")
        Traceback (most recent call last):
        ...
        attnlab.errors.UsageError: runs/r/config.yaml: lr must be > 0, got 0
    """
    types = _types(cls)
    for f in dataclasses.fields(cls):
        if f.name in values:
            value = _check_one(f"{where}: {f.name}", values[f.name], types[f.name],
                               f.metadata, UsageError, of_use=of_use, in_file=True,
                               beside=beside)
            # about to be used: as ``check`` reads it (``init: 5`` is the text 5); a --config
            # file's path as ``entered`` gives it, resumed or not (``data: ~/d.tsv``)
            if of_use or _is_path(f.metadata, beside):
                values[f.name] = value


def check_options(args, cls, *, unset: Iterable[str] = ()) -> None:
    """The parsed flags (``args``, an ``argparse.Namespace``) of a command whose options are
    the fields of ``cls``: a flag not given takes its field's default (except those named in
    ``unset``, which stay None for the command to ask whether they were given), then every one
    is checked (``check``: a ``UsageError`` names the flag)."""
    values = vars(args)
    for name, value in defaults(cls).items():
        if values.get(name) is None and name not in unset:
            values[name] = value
    check(cls, values)


def check_argument(cls, name: str, value: Any, *, shown: str | None = None,
                   error: type[Exception] = ValueError) -> Any:
    """``value`` checked against the declaration of setting ``name`` of ``cls``, for library
    code handed it as an argument: a ``ValueError`` names the argument (the command line
    checks the same declaration with ``check``, naming the flag). A function that names the
    option its value came from passes it as ``shown`` (and ``error=UsageError``).

    Examples:
        >>> check_argument(SamplingSettings, "top_p", 1.5)
        Traceback (most recent call last):
        ...
        ValueError: top_p must be in (0, 1], got 1.5
    """
    (f,) = _fields(cls, (name,))
    kind = _types(cls)[name]
    if isinstance(value, numbers.Real) and not isinstance(value, bool):  # NumPy's as Python's
        value = int(value) if isinstance(value, numbers.Integral) else float(value)
    # a library argument's type error says the range too ("top_k must be a positive integer")
    return _check_one(shown or name, value, kind, f.metadata, error,
                      whole=_range_text(f.metadata, kind) or "an integer")
