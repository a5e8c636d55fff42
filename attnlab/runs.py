"""Run directories: atomic writes, configuration, weights, and ``attnlab.load``.

A run directory (DESIGN.md) holds ``config.yaml``, ``model.safetensors``, ``metrics.json``,
``tokenizer.json`` (when the task has one), ``checkpoints/`` and PNG figures. Every file is
written to a temporary name and renamed, so a kill never leaves a half-written file behind.
Weights are only ever read from safetensors (no pickle, so no code runs on load).
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .errors import UsageError

__all__ = [
    "atomic_write", "write_json", "write_yaml", "read_yaml", "save_weights", "load_weights",
    "check_run_dir", "load", "record_data_files", "check_data_files", "pin_data_files",
]


def atomic_write(path: str | Path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` through a temporary file and an atomic rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | Path, obj: Any) -> None:
    atomic_write(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def write_yaml(path: str | Path, obj: dict) -> None:
    import yaml

    atomic_write(path, yaml.safe_dump(obj, sort_keys=True))


def read_yaml(path: str | Path, *, what: str = "--config") -> dict:
    """A YAML mapping from ``path``; ``UsageError`` naming the file when missing or broken."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{what}: file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UsageError(f"{what}: {path} is not valid YAML ({first})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UsageError(f"{what}: {path} must hold a mapping of settings, got {type(data).__name__}")
    return data


def check_run_dir(run_dir: str | Path, *, tasks: tuple[str, ...] | None = None,
                  command: str = "") -> tuple[Path, dict]:
    """Validate a run directory and return (path, config). ``tasks`` limits the accepted kinds."""
    run_dir = Path(run_dir)
    where = f"{command}: " if command else ""
    if not run_dir.is_dir():
        raise UsageError(f"{where}run directory not found: {run_dir}")
    cfg_path = run_dir / "config.yaml"
    if not cfg_path.is_file():
        raise UsageError(f"{where}{run_dir} is not a run directory (no config.yaml)")
    cfg = read_yaml(cfg_path, what=where.rstrip(": ") or "run directory")
    task = cfg.get("task")
    if tasks is not None and task not in tasks:
        raise UsageError(
            f"{where}{run_dir} holds a {task!r} run; this command needs one of: {', '.join(tasks)}"
        )
    if not (run_dir / "model.safetensors").is_file():
        raise UsageError(f"{where}{run_dir} has no model.safetensors (did training finish?)")
    return run_dir, cfg


def file_digest(path: str | Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB pieces."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def record_data_files(cfg: dict, keys: tuple[str, ...]) -> None:
    """Make each data file path ``cfg[key]`` absolute (``evaluate`` may run from another
    directory) and note its digest in ``cfg["data_sha256"]``, so that ``evaluate`` can tell
    whether a split re-drawn from the same file is still the held-out one."""
    present = [key for key in keys if cfg.get(key)]
    cfg.update({key: str(Path(cfg[key]).resolve()) for key in present})
    cfg["data_sha256"] = {key: file_digest(cfg[key]) for key in present}


_CHANGED = {  # purpose: (since when, why a changed file matters, what to do instead)
    "evaluate": ("was trained", "the test split drawn from it again would not be the held-out rows",
                 "evaluate on a file of your choice with --data FILE"),
    "resume": ("started", "its splits would not be the ones trained on so far",
               "put the file back or start a new run"),
}


def check_data_files(cfg: dict, *, purpose: str = "evaluate") -> None:
    """Refuse to re-draw a run's splits from a data file that changed since the run started
    (``purpose`` "resume") or was trained ("evaluate"): its "test" rows would no longer be the
    rows the model never saw."""
    when, why, remedy = _CHANGED[purpose]
    for key, digest in (cfg.get("data_sha256") or {}).items():
        path = Path(cfg[key])
        if not path.is_file():
            raise UsageError(f"--{key} {path} (the file this run {when} on) is gone; {remedy}")
        if file_digest(path) != digest:
            raise UsageError(f"--{key} {path} changed since this run {when} (its SHA-256 "
                             f"differs from config.yaml's data_sha256), so {why}; {remedy}")


def pin_data_files(cfg: dict, keys: tuple[str, ...]) -> None:
    """``record_data_files`` for a new run; for ``--resume``, ``check_data_files`` against what
    the run recorded when it started."""
    if cfg.get("resume") and cfg.get("data_sha256"):
        check_data_files(cfg, purpose="resume")
    else:
        record_data_files(cfg, keys)


def save_weights(model, path: str | Path) -> None:
    """Save a module's state dict as safetensors, atomically (shared tensors are de-duplicated)."""
    from safetensors.torch import save_model

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    save_model(model, str(tmp))
    os.replace(tmp, path)


def load_weights(model, path: str | Path) -> None:
    """Load safetensors weights into ``model``; ``UsageError`` naming the file on any mismatch."""
    from safetensors import SafetensorError
    from safetensors.torch import load_model

    path = Path(path)
    if not path.is_file():
        raise UsageError(f"weights file not found: {path}")
    try:
        missing, unexpected = load_model(model, str(path), strict=False)
    except (SafetensorError, OSError, ValueError) as e:
        raise UsageError(f"{path} is not a readable safetensors file ({e})") from None
    except RuntimeError as e:  # shape mismatch
        msg = str(e).strip().splitlines()
        detail = next((line.strip() for line in msg if "size mismatch" in line), msg[0] if msg else "")
        raise UsageError(f"{path} does not match config.yaml: {detail}") from None
    if missing or unexpected:
        raise UsageError(
            f"{path} does not match config.yaml: missing {sorted(missing)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]}"
        )


def load(run_dir: str | Path):
    """The trained model (and tokenizer, where the task has one) of a run directory."""
    from .tasks import get_task

    run_dir, cfg = check_run_dir(run_dir)
    return get_task(cfg["task"]).load(run_dir, cfg)
