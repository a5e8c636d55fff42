"""``attnlab train TASK``: shared training flags, --config merging, validation, run directory."""
from __future__ import annotations

import argparse
import math
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import Interrupted, UsageError
from ..tasks import SHARED_DEFAULTS, available_tasks, get_task
from . import preflight
from .preflight import resume_conflicts

# flag -> (type, check, what is expected); the check runs on the merged configuration.
_POSITIVE = ("max_steps", "batch_size", "model_dim", "num_heads", "num_layers",
             "dim_feedforward", "devices", "num_nodes", "checkpoint_every")
CHOICES = {
    "strategy": ("auto", "ddp", "ddp_spawn", "fsdp"),
    "accelerator": ("auto", "cpu", "gpu"),
    "precision": ("32", "64", "bf16-mixed", "16-mixed", "bf16-true"),
    "schedule": ("cosine", "noam"),
}


def flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def add_shared_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("training (shared by every task; a --config YAML may set any)")
    g.add_argument("--out", metavar="DIR", help="run directory (default runs/TASK-<timestamp>)")
    g.add_argument("--config", metavar="FILE", help="YAML file of settings; flags win")
    g.add_argument("--seed", type=int, metavar="N")
    g.add_argument("--max-steps", type=int, metavar="N", help="optimiser steps to train for")
    g.add_argument("--epochs", type=int, metavar="N", help="train for N passes instead of --max-steps")
    g.add_argument("--batch-size", type=int, metavar="N")
    g.add_argument("--lr", type=float, metavar="F", help="peak learning rate (Noam: its factor)")
    g.add_argument("--warmup", type=int, metavar="N", help="warm-up steps")
    g.add_argument("--schedule", choices=CHOICES["schedule"], help="learning-rate schedule")
    g.add_argument("--model-dim", type=int, metavar="N")
    g.add_argument("--num-heads", type=int, metavar="N")
    g.add_argument("--num-layers", type=int, metavar="N")
    g.add_argument("--dim-feedforward", type=int, metavar="N")
    g.add_argument("--dropout", type=float, metavar="F")
    g.add_argument("--norm-first", action=argparse.BooleanOptionalAction,
                   help="pre-LN blocks (--no-norm-first: post-LN, the paper's)")
    g.add_argument("--grad-clip", type=float, metavar="F", help="gradient-norm clipping (0: off)")
    g.add_argument("--checkpoint-every", type=int, metavar="N", help="steps between checkpoints")
    g.add_argument("--val-every", type=int, metavar="N", help="steps between validations")
    g.add_argument("--threads", type=int, metavar="N",
                   help="torch CPU threads (tiny models train fastest on 1)")
    g.add_argument("--devices", type=int, metavar="N")
    g.add_argument("--num-nodes", type=int, metavar="N")
    g.add_argument("--strategy", choices=CHOICES["strategy"])
    g.add_argument("--accelerator", choices=CHOICES["accelerator"])
    g.add_argument("--precision", choices=CHOICES["precision"])
    g.add_argument("--compile", action=argparse.BooleanOptionalAction,
                   help="torch.compile the model")
    g.add_argument("--resume", action=argparse.BooleanOptionalAction,
                   help="continue the run in --out from its last checkpoint")


def register(sub) -> None:
    p = sub.add_parser("train", help="train a model on a task", description="Train a model.")
    tsub = p.add_subparsers(dest="task", metavar="TASK", parser_class=type(p))
    tsub.required = True
    for name, task in available_tasks().items():
        tp = tsub.add_parser(name, help=task.help, description=task.help,
                             argument_default=argparse.SUPPRESS)
        add_shared_flags(tp)
        task.add_arguments(tp)
        _show_defaults(tp, {**SHARED_DEFAULTS, **task.defaults})
        tp.set_defaults(func=run)


def _show_defaults(parser: argparse.ArgumentParser, defaults: dict[str, Any]) -> None:
    """Append this task's default to each flag's help (the flags themselves default to
    'not given', so that --config can set them)."""
    for action in parser._actions:
        value = defaults.get(action.dest)
        if (value is None or action.help == argparse.SUPPRESS or isinstance(value, bool) and not value
                or "default" in (action.help or "")):  # a task that states its own
            continue
        shown = "on" if value is True else value
        action.help = f"{action.help or ''} (default: {shown})".lstrip()


def _check_number(key: str, value: Any, kind: type) -> None:
    ok = isinstance(value, kind) and not isinstance(value, bool)
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok:
        name = "an integer" if kind is int else "a number"
        raise UsageError(f"{flag(key)} must be {name}, got {value!r}")


def validate_shared(cfg: dict[str, Any]) -> None:
    """Check every shared setting; the message names the flag and shows the value."""
    for key in _POSITIVE:
        _check_number(key, cfg[key], int)
        if cfg[key] < 1:
            raise UsageError(f"{flag(key)} must be a positive integer, got {cfg[key]}")
    for key in ("seed", "warmup"):
        _check_number(key, cfg[key], int)
    for key in ("val_every", "threads"):
        if cfg.get(key) is not None:
            _check_number(key, cfg[key], int)
            if cfg[key] < 1:
                raise UsageError(f"{flag(key)} must be a positive integer, got {cfg[key]}")
    if not 0 <= cfg["seed"] < 2**32:  # numpy's range; larger seeds would overflow generators
        raise UsageError(f"--seed must be in 0..{2**32 - 1}, got {cfg['seed']}")
    if cfg["warmup"] < 0:
        raise UsageError(f"--warmup must be >= 0, got {cfg['warmup']}")
    if cfg.get("epochs") is not None:
        _check_number("epochs", cfg["epochs"], int)
        if cfg["epochs"] < 1:
            raise UsageError(f"--epochs must be a positive integer, got {cfg['epochs']}")
    for key in ("lr", "dropout", "grad_clip"):
        _check_number(key, cfg[key], float)
    if cfg["lr"] <= 0:
        raise UsageError(f"--lr must be > 0, got {cfg['lr']}")
    if not 0 <= cfg["dropout"] < 1:
        raise UsageError(f"--dropout must be in [0, 1), got {cfg['dropout']}")
    if cfg["grad_clip"] < 0:
        raise UsageError(f"--grad-clip must be >= 0, got {cfg['grad_clip']}")
    if cfg["model_dim"] % cfg["num_heads"]:
        raise UsageError(
            f"--model-dim ({cfg['model_dim']}) must be divisible by --num-heads ({cfg['num_heads']})"
        )
    for key, choices in CHOICES.items():
        cfg[key] = str(cfg[key])
        if cfg[key] not in choices:
            raise UsageError(f"{flag(key)} must be one of {', '.join(choices)}, got {cfg[key]!r}")


def build_config(task_name: str, given: dict[str, Any]) -> dict[str, Any]:
    """SHARED_DEFAULTS < task defaults < --config < flags given (or the saved config on --resume)."""
    from ..runs import read_yaml

    task = get_task(task_name)
    cfg: dict[str, Any] = {**SHARED_DEFAULTS, **task.defaults}
    known = set(cfg) | {"task", "out"}
    file_cfg: dict[str, Any] = {}
    if given.get("config"):
        file_cfg = {k.replace("-", "_"): v for k, v in read_yaml(given["config"]).items()}
        unknown = sorted(set(file_cfg) - known)
        if unknown:
            raise UsageError(f"--config {given['config']}: unknown setting(s) {', '.join(unknown)}")
    if given.get("resume"):
        if not given.get("out"):
            raise UsageError("--resume needs --out DIR: the run directory to continue")
        saved = Path(given["out"]) / "config.yaml"
        if not saved.is_file():
            raise UsageError(f"--resume: {saved} not found; nothing to resume")
        previous = read_yaml(saved, what="--resume")
        if previous.get("task") != task_name:
            raise UsageError(f"--resume: {given['out']} holds a {previous.get('task')!r} run, "
                             f"not {task_name!r}")
        settings = {**file_cfg, **{k: v for k, v in given.items() if k not in ("func", "command")}}
        resume_conflicts(previous, settings, cfg, Path(given["out"]))
        cfg.update(previous)
    cfg.update(file_cfg)
    cfg.update({k: v for k, v in given.items() if k not in ("config", "func", "command")})
    cfg["task"] = task_name
    cfg["resume"] = bool(cfg.get("resume"))
    validate_shared(cfg)
    task.validate(cfg)
    return cfg


def _is_child() -> bool:
    """A DDP process started by Lightning (it re-runs this command): it trains in the
    directory its parent chose and writes nothing of its own."""
    return os.environ.get("LOCAL_RANK", "0") != "0" or os.environ.get("NODE_RANK", "0") != "0"


def _choose_out(cfg: dict[str, Any]) -> Path:
    # Only DDP children reuse ATTNLAB_RUN_DIR: a second in-process `main` must not reuse the
    # first run's directory.
    out = cfg.get("out") or (os.environ.get("ATTNLAB_RUN_DIR") if _is_child() else None)
    if not out and cfg["num_nodes"] > 1:
        raise UsageError(f"--num-nodes {cfg['num_nodes']} needs --out DIR on a shared file "
                         f"system: every node must write to the same run directory")
    if not out:
        out = f"runs/{cfg['task']}-{time.strftime('%Y%m%d-%H%M%S')}"
    return Path(out)


def seed_all(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _preflight(args: argparse.Namespace, cfg: dict[str, Any]) -> Path | None:
    """Everything that can be refused, checked before the run directory is touched (issue #8).
    Returns the run directory, or None for a finished run that --resume has nothing to add to."""
    run_dir = _choose_out(cfg)
    if _is_child():
        return run_dir
    preflight.check_out(run_dir, resume=cfg["resume"])
    if cfg["resume"]:
        from ..runs import read_yaml

        given = {k: v for k, v in vars(args).items() if k not in ("task", "func", "command")}
        done = preflight.finished_message(run_dir, read_yaml(run_dir / "config.yaml"), given)
        if done:
            print(f"attnlab: {done}", file=sys.stderr)
            return None
        if not preflight.has_checkpoint(run_dir) and (run_dir / "model.safetensors").is_file():
            raise UsageError(f"--resume: no checkpoint to resume from in {run_dir}/checkpoints")
    preflight.check_cluster(cfg)
    preflight.check_memory(get_task(cfg["task"]).memory_estimate(cfg))
    return run_dir


def run(args: argparse.Namespace) -> int:
    given = {k: v for k, v in vars(args).items() if k not in ("task", "func", "command")}
    cfg = build_config(args.task, given)
    run_dir = _preflight(args, cfg)
    if run_dir is None:
        return 0
    from ..training.engine import check_hardware  # Lightning: only once the flags are valid

    check_hardware(cfg, quiet=_is_child())
    found = "run" if cfg["resume"] else ("empty" if run_dir.is_dir() else "new")
    os.environ["ATTNLAB_RUN_DIR"] = str(run_dir)
    cfg["out"] = str(run_dir)
    try:
        with _sigterm_as_exception():
            _train(cfg, run_dir)
    except BaseException as e:
        if _is_child():
            raise
        raise _after_failure(e, cfg, run_dir, found) from None
    return 0


def _train(cfg: dict[str, Any], run_dir: Path) -> None:
    from ..runs import write_yaml

    run_dir.mkdir(parents=True, exist_ok=True)
    if not cfg["resume"] and not _is_child():
        write_yaml(run_dir / "config.yaml", cfg)  # so that --resume can rebuild the run
    seed_all(cfg["seed"])
    if cfg.get("threads"):
        import torch

        # A small model's kernels are too short to share between threads; on a busy machine the
        # threads' spin-waiting costs more than it gains (docs/reverse.md).
        torch.set_num_threads(cfg["threads"])
    if not _is_child():
        print(f"attnlab train {cfg['task']} -> {run_dir}", file=sys.stderr, flush=True)
    get_task(cfg["task"]).run(cfg, run_dir)


class _sigterm_as_exception:
    """SIGTERM raises ``Interrupted`` instead of killing the process at once, so a run stopped
    before its first checkpoint can clean up (during training the engine replaces this handler
    with one that finishes the step and saves a checkpoint first)."""

    def __enter__(self):
        self.previous = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGTERM, self._raise)
        return self

    @staticmethod
    def _raise(signum, frame):
        raise Interrupted("terminated (SIGTERM)", signum)

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)
        return False


def _after_failure(e: BaseException, cfg: dict[str, Any], run_dir: Path,
                   found: str) -> BaseException:
    """The exception to report for a run that stopped: an interruption says how to continue;
    a run that never reached its first checkpoint leaves nothing behind that would block the
    same command from running again."""
    if isinstance(e, Interrupted) and e.checkpointed:
        return e
    removed = preflight.discard_unstarted(run_dir, found=found)
    gone = f"removed {run_dir}, so the same command can run again"
    if isinstance(e, UsageError) and removed:  # a data error found late: still one line
        return type(e)(f"{e} (the run stopped before its first checkpoint; {gone})")
    if not isinstance(e, (KeyboardInterrupt, Interrupted)):
        if removed:
            print(f"attnlab: the run stopped before its first checkpoint; {gone}", file=sys.stderr)
        return e
    signum = e.signum if isinstance(e, Interrupted) else signal.SIGINT
    name = signal.Signals(signum).name
    if removed or not preflight.has_checkpoint(run_dir):
        gone = gone if removed else f"nothing to resume in {run_dir}"
        return Interrupted(f"interrupted ({name}) before the first checkpoint; {gone}", signum)
    from ..training.engine import resume_command

    return Interrupted(f"interrupted ({name}); continue with: {resume_command(cfg, run_dir)}",
                       signum, checkpointed=True)
