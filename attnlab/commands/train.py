"""``attnlab train TASK``: shared training flags, --config merging, validation, run directory."""
from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..tasks import SHARED_DEFAULTS, available_tasks, get_task

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
    g.add_argument("--norm-first", action="store_const", const=True, help="pre-LN blocks")
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
    g.add_argument("--compile", action="store_const", const=True, help="torch.compile the model")
    g.add_argument("--resume", action="store_const", const=True,
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
    if given.get("resume"):
        if not given.get("out"):
            raise UsageError("--resume needs --out DIR: the run directory to continue")
        saved = Path(given["out"]) / "config.yaml"
        if not saved.is_file():
            raise UsageError(f"--resume: {saved} not found; nothing to resume")
        # A run killed before its first checkpoint starts again from step 0 (engine.fit); a
        # finished run whose checkpoints were deleted has nothing left to resume.
        if (not (Path(given["out"]) / "checkpoints" / "last.ckpt").is_file()
                and (Path(given["out"]) / "model.safetensors").is_file()):
            raise UsageError(f"--resume: no checkpoint to resume from in {given['out']}/checkpoints")
        previous = read_yaml(saved, what="--resume")
        if previous.get("task") != task_name:
            raise UsageError(f"--resume: {given['out']} holds a {previous.get('task')!r} run, "
                             f"not {task_name!r}")
        cfg.update(previous)
    elif given.get("config"):
        file_cfg = {k.replace("-", "_"): v for k, v in read_yaml(given["config"]).items()}
        unknown = sorted(set(file_cfg) - known)
        if unknown:
            raise UsageError(f"--config {given['config']}: unknown setting(s) {', '.join(unknown)}")
        cfg.update(file_cfg)
    cfg.update({k: v for k, v in given.items() if k not in ("config", "func", "command")})
    cfg["task"] = task_name
    cfg["resume"] = bool(cfg.get("resume"))
    validate_shared(cfg)
    task.validate(cfg)
    return cfg


def _run_dir(cfg: dict[str, Any]) -> Path:
    # DDP children re-run this command: they must use the directory their parent chose (and
    # only they: a second in-process `main` must not reuse the first run's directory).
    child = os.environ.get("LOCAL_RANK", "0") != "0" or os.environ.get("NODE_RANK", "0") != "0"
    out = cfg.get("out") or (os.environ.get("ATTNLAB_RUN_DIR") if child else None)
    if not out and cfg["num_nodes"] > 1:
        raise UsageError(f"--num-nodes {cfg['num_nodes']} needs --out DIR on a shared file "
                         f"system: every node must write to the same run directory")
    if not out:
        out = f"runs/{cfg['task']}-{time.strftime('%Y%m%d-%H%M%S')}"
    os.environ["ATTNLAB_RUN_DIR"] = str(out)
    run_dir = Path(out)
    if not cfg["resume"] and not child and run_dir.exists() and any(run_dir.iterdir()):
        raise UsageError(f"--out {run_dir} already holds files; pass --resume to continue that "
                         f"run, or choose another --out")
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def seed_all(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def run(args: argparse.Namespace) -> int:
    given = {k: v for k, v in vars(args).items() if k not in ("task", "func", "command")}
    cfg = build_config(args.task, given)
    from ..training.engine import check_hardware  # Lightning: only once the flags are valid

    check_hardware(cfg)
    run_dir = _run_dir(cfg)
    cfg["out"] = str(run_dir)
    from ..runs import write_yaml

    if not cfg["resume"]:
        write_yaml(run_dir / "config.yaml", cfg)  # so that --resume can rebuild the run
    seed_all(cfg["seed"])
    if cfg.get("threads"):
        import torch

        # A small model's kernels are too short to share between threads; on a busy machine the
        # threads' spin-waiting costs more than it gains (docs/reverse.md).
        torch.set_num_threads(cfg["threads"])
    print(f"attnlab train {cfg['task']} -> {run_dir}", file=sys.stderr, flush=True)
    get_task(cfg["task"]).run(cfg, run_dir)
    return 0
