"""A run directory copied while its run trained: its files from different moments.

``rsync`` or ``cp -r`` of a run that is training (or that a ``--resume`` with a raised budget is
training on) copies each file as it is when the copy reaches it, so ``checkpoints/last.ckpt``
may be of another step than ``metrics.json`` and ``model.safetensors`` (written together when
the run finishes) or than ``logs/metrics.csv``. In a run directory that one process wrote,
they agree: the last checkpoint is of the step ``metrics.json`` counts (``engine.fit`` saves
one when the loop ends), and the log holds the row of the validation that checkpoint records
(validation is logged before the checkpoint of its step is written). Where they disagree,
the commands say which file does, instead of resuming from an older step than the run had
done or evaluating older weights than the run's last without a word.

Reads only the checkpoint's small values (a memory map: no weights are read), the log and
``metrics.json``; imports torch only when there is a checkpoint to read.
"""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..loading import CHECKPOINT_FLAG, checkpoint_file

__all__ = ["checkpoint_state", "final_steps", "refuse_older_checkpoint", "log_behind_note",
           "newer_checkpoint_note"]


def checkpoint_state(run_dir: str | Path) -> dict[str, Any] | None:
    """The values of ``run_dir``'s ``checkpoints/last.ckpt`` (memory-mapped: its weights are
    not read), or None without a readable one (what reads it for training names what is
    wrong with it)."""
    path = checkpoint_file(run_dir, "last")
    if not path.is_file():
        return None
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001 -- any unreadable file: the engine names what is wrong
        return None
    step = state.get("global_step") if isinstance(state, dict) else None
    return state if isinstance(step, int) and not isinstance(step, bool) else None


def final_steps(run_dir: str | Path) -> int | None:
    """The steps ``metrics.json`` says the finished run trained, or None (no such file, or
    no whole number of steps in it)."""
    return _saved(run_dir)["steps"]


def _saved(run_dir: str | Path) -> dict[str, Any]:
    """``explorer.record.saved_weights`` of ``run_dir``'s ``metrics.json``: the steps the run
    trained and the step of its ``model.safetensors`` (``best_step`` after ``--keep-best``),
    both None where no ``metrics.json`` with whole ``steps`` is read."""
    from ..explorer.record import saved_weights

    try:
        metrics = json.loads((Path(run_dir) / "metrics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        metrics = None
    if not isinstance(metrics, dict) or isinstance(metrics.get("steps"), bool):
        metrics = {}
    return saved_weights(metrics)


def _weights_words(run_dir: Path, saved: dict[str, Any]) -> str:
    """``run_dir``'s ``model.safetensors`` as ``explorer.record.weights_text`` words it
    ("RUN/model.safetensors: step 10 of 20, the best val_loss (1.25)")."""
    from ..explorer.record import weights_text

    return f"{run_dir}/{weights_text({'weights': saved})}"


def refuse_older_checkpoint(run_dir: Path) -> None:
    """``--resume`` of a run whose checkpoint is of an earlier step than the steps its
    ``metrics.json`` and ``model.safetensors`` were written after (the checkpoint copied
    before the run finished) is refused: it would train again from that earlier step and, at
    its end, write over the finished run's weights and numbers."""
    state, saved = checkpoint_state(run_dir), _saved(run_dir)
    steps = saved["steps"]
    if state is None or steps is None or state["global_step"] >= steps:
        return
    raise UsageError(f"--resume: {checkpoint_file(run_dir, 'last')} is of step "
                     f"{state['global_step']}, but {run_dir}/metrics.json is of step {steps} "
                     f"({_weights_words(run_dir, saved)}): the checkpoint is older than the "
                     f"run (copied before it finished?), and resuming from it would train "
                     f"steps {state['global_step'] + 1}-{steps} again and replace the finished "
                     f"weights; copy checkpoints/last.ckpt again from where the run trained")


def newer_checkpoint_note(run_dir: Path) -> str | None:
    """For a command using ``model.safetensors``: a note when the run's checkpoint is of a
    later step than ``metrics.json``'s (a finished run resumed with a raised budget, still
    training or interrupted, or copied while it trained), naming both; else None."""
    state, saved = checkpoint_state(run_dir), _saved(run_dir)
    steps = saved["steps"]
    if state is None or steps is None or state["global_step"] <= steps:
        return None
    return (f"note: evaluating {_weights_words(run_dir, saved)} (metrics.json), but "
            f"{checkpoint_file(run_dir, 'last')} is of step {state['global_step']}: the run "
            f"trained on after step {steps} (resumed, or copied while it trained); "
            f"{CHECKPOINT_FLAG} last uses step {state['global_step']}'s weights")


def log_behind_note(run_dir: Path) -> str | None:
    """For ``--resume``: a warning when ``logs/metrics.csv`` lacks the row of the validation
    the checkpoint records (the log copied before the checkpoint, or another run's), naming
    both files and the steps the resumed run's log will have no rows of; else None. A log
    with rows after the checkpoint is an interrupted run's, which ``--resume`` expects."""
    state = checkpoint_state(run_dir)
    validation = (state or {}).get("validation") or {}
    step, metrics = validation.get("step"), validation.get("metrics") or {}
    if not metrics or not isinstance(step, int):
        return None  # no validation logged yet: nothing the log must hold
    log = Path(run_dir) / "logs" / "metrics.csv"
    rows = _rows(log)
    if any(_holds(row, step, metrics) for row in rows):
        return None
    steps = [s for s in (_step(row) for row in rows) if s is not None]
    ckpt = checkpoint_file(run_dir, "last")
    if step in steps:  # a row of that step, of other numbers: no gap, but not this run's row
        return (f"warning: --resume: {log}'s row of step {step} holds other numbers than the "
                f"validation at step {step} that {ckpt} holds (another run's log?): the "
                f"resumed run's log keeps its rows up to step {step}")
    last = max((s for s in steps if s < step), default=0)
    had = (f"its last row before it is of step {last}" if last
           else "it has no row before it" if log.is_file() else "it is missing")
    return (f"warning: --resume: {log} has no row of the validation at step {step} that "
            f"{ckpt} holds ({had}): the log is older than the checkpoint (copied before "
            f"it?), so the resumed run's log has no rows of steps "
            f"{last + 1}-{state['global_step']}")


def _rows(log: Path) -> list[dict[str, str]]:
    try:
        with open(log, newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error):
        return []


def _step(row: dict[str, str]) -> int | None:
    try:
        return int(float(row.get("step") or ""))
    except ValueError:
        return None


def _holds(row: dict[str, str], step: int, metrics: dict[str, Any]) -> bool:
    """Whether ``row`` is the log's row of the validation at ``step`` that logged ``metrics``
    (the same numbers: the log writes each float as Python prints it, exactly)."""
    return _step(row) == step and all(_same(row.get(name), value)
                                      for name, value in metrics.items())


def _same(cell: str | None, value: Any) -> bool:
    """Whether a cell of the log holds ``value`` (a number, NaN as NaN; None as an empty
    cell, as ``csv`` writes it)."""
    try:
        logged, held = float(cell or ""), float(value)
    except (TypeError, ValueError):
        return (cell or "") == ("" if value is None else str(value))
    return logged == held or (math.isnan(logged) and math.isnan(held))
