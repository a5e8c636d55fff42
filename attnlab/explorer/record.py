"""What a page or figure of a run says of that run: which weights it shows (the file, the step,
the last or the best validation's) and the numbers the run reached (its ``metrics.json``).

A reader comparing runs reads what each run reached beside its attention; a figure that does
not say which step it shows cannot be told from one of an earlier run in the same directory.

``run_record(run_dir)`` reads them once; ``weights_text`` and ``metrics_text`` write them as
the page (``attnlab view``) and the figure (``attnlab plot attention``) show them. A number is
shown as ``metrics.json`` holds it (6 significant digits), never rounded again: two runs
that differ in the fifth digit are shown to differ. A metric ``metrics.json`` holds as null
(it writes a NaN or infinite value so) is shown "not finite (null)".
"""
from __future__ import annotations

import math
import numbers
from pathlib import Path
from typing import Any

__all__ = ["run_record", "saved_weights", "fit_weights_text", "weights_text", "metrics_text", "metrics_of_text", "shown_metrics",
           "check_record", "shown_value"]

WEIGHTS_FILE = "model.safetensors"
NOT_FINITE = "not finite (null)"


def _read_metrics(run_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(the scalars of ``metrics.json``, or None; a note saying why there are none)."""
    from ..errors import UsageError
    from ..runs import read_json

    path = run_dir / "metrics.json"
    try:
        metrics = read_json(path, what="a metrics file")
    except FileNotFoundError:
        return None, (f"no metrics yet: {path} is not written (training stopped before its "
                      f"end, or is still running)")
    except (OSError, UsageError) as e:
        return None, f"no metrics: {e}"
    if not isinstance(metrics, dict):
        return None, f"no metrics: {path} holds no table of metrics"
    # numbers, and null for a value that was not finite (as metrics.json writes one; an older
    # attnlab wrote NaN, which Python's json reads); lists and tables (classify's per-class
    # scores) stay in the file
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v
            for k, v in metrics.items()
            if v is None or isinstance(v, (bool, numbers.Real, str))}, None


def run_record(run_dir: str | Path, *, step: int | None = None,
               checkpoint: str | None = None) -> dict[str, Any]:
    """What the run in ``run_dir`` reached and which of its weights are shown.

    Args:
        run_dir: the run directory.
        step: the step of the weights shown, where it is known otherwise (a checkpoint's).
        checkpoint: the checkpoint file shown instead of ``model.safetensors``, relative to
            ``run_dir`` (``checkpoints/last.ckpt``), or None.

    Returns:
        ``{"weights": {"file", "step", "steps", "which", ...}, "metrics": {...} or None}`` and
        ``"note"`` where there are no metrics. ``which`` is "last" (the last step trained),
        "best" (``--keep-best``: the best validation's, with ``monitor`` and ``value``) or
        None where the run does not record it; ``steps`` the steps trained. With a
        ``checkpoint`` whose step is not the one ``metrics.json`` scored (``model.safetensors``'s:
        ``best_step``, else ``steps``), ``"metrics_of": {"file", "step"}`` names the weights
        the metrics are of (``metrics_of_text``).

    Examples:
        >>> import json; _ = Path("run").mkdir(exist_ok=True)
        >>> _ = Path("run/metrics.json").write_text(json.dumps({"steps": 30, "val_loss": None}))
        >>> run_record("run")["weights"]
        {'file': 'model.safetensors', 'step': 30, 'steps': 30, 'which': 'last'}
    """
    run_dir = Path(run_dir)
    metrics, note = _read_metrics(run_dir)
    metrics = metrics or {}
    steps = metrics.get("steps") if isinstance(metrics.get("steps"), int) else None
    best = metrics.get("best_step")
    scored = best if isinstance(best, int) else steps  # model.safetensors' step
    weights = (saved_weights(metrics) if checkpoint is None
               else {"file": checkpoint, "step": step, "steps": steps, "which": "last"})
    if weights["step"] is None:  # metrics.json holds no steps: the step given, if any
        weights["step"] = step
    record = {"weights": weights, "metrics": metrics if note is None else None}
    if note is not None:
        record["note"] = note
    elif checkpoint is not None and (step is None or step != scored):
        # metrics.json scores model.safetensors: a checkpoint of another step (the last of a
        # --keep-best run, one resumed past the end) must not be read beside its scores
        record["metrics_of"] = {"file": WEIGHTS_FILE, "step": scored}
    return record


def saved_weights(metrics: dict[str, Any]) -> dict[str, Any]:
    """``run_record``'s ``"weights"`` of ``model.safetensors``, from the ``steps`` and
    (``--keep-best``) ``best_step``, ``best_metric`` and ``best_value`` that ``metrics.json``
    holds (``which`` None, ``step`` None where it holds no ``steps``).

    Examples:
        >>> saved_weights({"steps": 30, "best_step": 20, "best_metric": "val_loss",
        ...                "best_value": 1.25})["step"]
        20
    """
    steps = metrics.get("steps") if isinstance(metrics.get("steps"), int) else None
    best = metrics.get("best_step")
    if isinstance(best, int):
        return {"file": WEIGHTS_FILE, "step": best, "steps": steps, "which": "best",
                "monitor": metrics.get("best_metric"), "value": metrics.get("best_value")}
    return {"file": WEIGHTS_FILE, "step": steps, "steps": steps,
            "which": None if steps is None else "last"}


def fit_weights_text(steps: int, best: dict[str, Any]) -> str:
    """``weights_text`` of the weights a run has just saved, from what training returns
    (``FitResult.steps`` and ``.best``) rounded as ``metrics.json`` writes it: the figures
    drawn as a run ends name their weights in the words ``attnlab plot attention`` and
    ``attnlab view`` use.

    Examples:
        >>> fit_weights_text(300, {})
        'model.safetensors: step 300 of 300, the last step'
        >>> fit_weights_text(300, {"best_step": 200, "best_metric": "val_loss",
        ...                        "best_value": 0.50000001})
        'model.safetensors: step 200 of 300, the best val_loss (0.5)'
    """
    from ..runs import readable

    return weights_text({"weights": saved_weights(readable({**best, "steps": int(steps)}))})


def metrics_of_text(record: dict[str, Any]) -> str | None:
    """Whose weights ``metrics.json``'s scores are of, where they are not the weights shown;
    None where they are (or there are no metrics).

    Examples:
        >>> metrics_of_text({"weights": {"file": "checkpoints/last.ckpt", "step": 30},
        ...                  "metrics": {}, "metrics_of": {"file": "model.safetensors",
        ...                                                "step": 18}})
        'metrics.json: of model.safetensors, step 18, not these weights'
    """
    of = record.get("metrics_of")
    if of is None:
        return None
    step = "step not recorded" if of["step"] is None else f"step {of['step']}"
    these = ("not these weights" if record["weights"].get("step") is not None
             else "maybe not these weights (their step is not recorded)")
    return f"metrics.json: of {of['file']}, {step}, {these}"


def shown_value(value: Any) -> str:
    """A metric as the page and figures show it: its text in ``metrics.json`` (null: "not
    finite (null)").

    Examples:
        >>> [shown_value(v) for v in (0.0957031, 7210, 1e-07, None, False, "32")]
        ['0.0957031', '7210', '1e-07', 'not finite (null)', 'false', '32']
    """
    import json

    if value is None:
        return NOT_FINITE
    return value if isinstance(value, str) else json.dumps(value)


# what a reader compares first: the held-out scores, then the saved weights' validation
FIRST = ("test_", "val_", "best_")


def shown_metrics(record: dict[str, Any]) -> list[list[str]]:
    """[[name, value as shown], ...] of the record's metrics: the test split's first, then the
    validation's and the best step's, then the rest (steps, train_seconds, parameters, ...),
    each in ``metrics.json``'s order."""
    metrics = record.get("metrics") or {}
    rank = {k: next((i for i, p in enumerate(FIRST) if k.startswith(p)), len(FIRST))
            for k in metrics}
    return [[k, shown_value(metrics[k])] for k in sorted(metrics, key=rank.__getitem__)]


def weights_text(record: dict[str, Any]) -> str:
    """Which weights are shown, in words.

    Examples:
        >>> weights_text({"weights": {"file": "model.safetensors", "step": 20, "steps": 30,
        ...               "which": "best", "monitor": "val_loss", "value": 1.25}})
        'model.safetensors: step 20 of 30, the best val_loss (1.25)'
        >>> weights_text({"weights": {"file": "model.safetensors", "step": 30, "steps": 30,
        ...               "which": "last"}})
        'model.safetensors: step 30 of 30, the last step'
    """
    w = record["weights"]
    if w["step"] is None:
        return f"{w['file']}: step not recorded"
    # "of N" only up to N: a run resumed past its end and stopped is not at step 25206 of 500
    of = (f" of {w['steps']}" if w.get("steps") is not None and w["step"] <= w["steps"]
          else "")
    if w["which"] == "best":
        value = w.get("value")
        return (f"{w['file']}: step {w['step']}{of}, the best {w.get('monitor') or 'validation'}"
                f"{'' if value is None and 'value' not in w else f' ({shown_value(value)})'}")
    saved = "" if w["file"] == WEIGHTS_FILE else " saved"  # a checkpoint: the last saved
    return f"{w['file']}: step {w['step']}{of}, the last{saved} step"


def metrics_text(record: dict[str, Any], *, keys: tuple[str, ...] | None = None) -> str:
    """The run's metrics as one line, ``key value`` pairs in ``metrics.json``'s order (only
    ``keys``' prefixes where given), or the note saying why there are none."""
    metrics = record.get("metrics")
    if metrics is None:
        return record.get("note", "no metrics")
    shown = [f"{k} {v}" for k, v in shown_metrics(record)
             if keys is None or k.startswith(keys)]
    return ", ".join(shown) if shown else "no " + "/".join(k + "*" for k in keys or ()) + \
        " metrics in metrics.json"


def check_record(record: Any) -> None:
    """Raise ``ValueError`` unless ``record`` has ``run_record``'s layout (a page's ``run``
    record, read back by other tools)."""
    if not isinstance(record, dict) or not isinstance(record.get("weights"), dict):
        raise ValueError(f"run record {record!r} has no weights table")
    w = record["weights"]
    if not isinstance(w.get("file"), str) or any(
            w.get(k) is not None and type(w.get(k)) is not int for k in ("step", "steps")):
        raise ValueError(f"run record's weights {w!r}: file must be text, step and steps "
                         f"whole numbers or null")
    metrics = record.get("metrics")
    if metrics is not None and (not isinstance(metrics, dict) or any(
            not (v is None or isinstance(v, (bool, str))
                 or isinstance(v, numbers.Real) and math.isfinite(v))
            for v in metrics.values())):
        raise ValueError("run record's metrics must map names to numbers, text or null")
    of = record.get("metrics_of")
    if of is not None and not (isinstance(of, dict) and isinstance(of.get("file"), str)
                               and (of.get("step") is None or type(of["step"]) is int)):
        raise ValueError(f"run record's metrics_of {of!r}: file must be text, step a whole "
                         f"number or null")
