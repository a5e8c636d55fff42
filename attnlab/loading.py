"""Opening a run directory: ``check_run_dir`` and ``attnlab.load``.

A run's ``config.yaml`` names its task, and only the task knows how to rebuild its model and
which of its settings split the width among the heads, so this module sits above
``attnlab.tasks`` (docs/architecture.md, "Layers"); the file I/O it uses stays below everything,
in ``attnlab.runs``. Importing it imports the task registry but no torch: the commands call
``check_run_dir`` before they load anything heavy.

Examples:
    >>> from attnlab.loading import quantize_refusal
    >>> quantize_refusal("int8", "reverse", "runs/r")
    'is for lm and translate runs; runs/r is a reverse run'
"""
from __future__ import annotations

from pathlib import Path

from .errors import UsageError
from .runs import RunConfig, read_yaml
from .tasks import TASKS, get_task

__all__ = ["check_run_dir", "load", "quantize_refusal", "QUANTIZE_TASKS"]

# The tasks whose models run on int8 weights (``attnlab.nn.quantize``): the ones that decode
QUANTIZE_TASKS = ("lm", "translate")

# Settings that fix the shape of a model (or how it is built): `attnlab train` checks them, so
# another value in a run's config.yaml was put there by hand, and would crash deep in torch.
_POSITIVE = ("model_dim", "num_heads", "num_layers", "dim_feedforward", "num_categories",
             "seq_len", "set_size", "block_size", "max_len", "max_target_len", "vocab_size",
             "src_vocab_size", "tgt_vocab_size")
_FRACTION = ("dropout", "input_dropout")
_SWITCH = ("norm_first", "tie_weights", "tie_embeddings")
_NAME = ("activation", "positional", "pooling")


def _check_settings(cfg: dict, cfg_path: Path, task) -> None:
    """Refuse a config.yaml whose model settings have a type or value no trained run has,
    naming the file, the setting and the value. (A setting the file lacks is reported when it
    is looked up: see ``RunConfig``.) Whether the width is split among the heads is the
    task's ``heads_split_width``, the declaration ``attnlab train`` checks too (graph and the
    recurrent translators split no width, and a run of theirs must load)."""
    def bad(key: str, what: str) -> UsageError:
        return UsageError(f"{cfg_path}: {key} must be {what}, got {cfg[key]!r}")

    for key in _POSITIVE:
        value = cfg.get(key)
        if value is None and key not in ("model_dim", "num_heads", "num_layers") and key in cfg:
            continue  # e.g. lm's vocab_size before training sets it
        if key in cfg and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise bad(key, "a positive integer")
    for key in _FRACTION:
        value = cfg.get(key, 0.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise bad(key, "a number in [0, 1)")
    for key in _SWITCH:
        if key in cfg and not isinstance(cfg[key], bool):
            raise bad(key, "true or false")
    for key in _NAME:
        if key in cfg and not isinstance(cfg[key], str):
            raise bad(key, "a name")
    if task.heads_split_width(cfg) and cfg.get("model_dim", 1) % cfg.get("num_heads", 1):
        raise UsageError(f"{cfg_path}: model_dim ({cfg['model_dim']}) must be divisible by "
                         f"num_heads ({cfg['num_heads']})")


def check_run_dir(run_dir: str | Path, *, tasks: tuple[str, ...] | None = None,
                  command: str = "") -> tuple[Path, dict]:
    """Check that ``run_dir`` is a finished run that can be loaded, and read its settings.

    Args:
        run_dir: the run directory ``attnlab train`` wrote.
        tasks: the tasks whose runs are accepted (``export`` takes lm and translate runs);
            None accepts any.
        command: the command's name, to start every message with ("predict: ...").

    Returns:
        ``(Path(run_dir), config)``; the config is a ``RunConfig``, so that looking up a setting
        the file lacks is a ``UsageError`` naming ``config.yaml`` and the setting.

    Raises:
        UsageError: no such directory, no or a broken ``config.yaml``, an unknown task or one
            outside ``tasks``, no ``model.safetensors``, or a model setting no trained run has
            (a width the heads do not divide, where the task's model splits it).

    Examples:
        >>> check_run_dir("runs/none", command="predict")
        Traceback (most recent call last):
        attnlab.errors.UsageError: predict: run directory not found: runs/none
    """
    run_dir = Path(run_dir)
    where = f"{command}: " if command else ""
    if not run_dir.is_dir():
        raise UsageError(f"{where}run directory not found: {run_dir}")
    cfg_path = run_dir / "config.yaml"
    if not cfg_path.is_file():
        raise UsageError(f"{where}{run_dir} is not a run directory (no config.yaml)")
    cfg = RunConfig(read_yaml(cfg_path, what=where.rstrip(": ") or "run directory"), cfg_path)
    task = cfg.get("task")
    if task is None:
        raise UsageError(f"{where}{cfg_path} has no 'task' setting (was the file edited by hand?)")
    if not isinstance(task, str) or task not in TASKS:
        raise UsageError(f"{where}{cfg_path}: unknown task {task!r}; expected one of: "
                         f"{', '.join(TASKS)}")
    if tasks is not None and task not in tasks:
        raise UsageError(
            f"{where}{run_dir} holds a {task!r} run; this command needs one of: {', '.join(tasks)}"
        )
    if not (run_dir / "model.safetensors").is_file():
        raise UsageError(f"{where}{run_dir} has no model.safetensors (did training finish?)")
    _check_settings(cfg, cfg_path, get_task(task))
    return run_dir, cfg


def load(run_dir: str | Path, *, quantize: str | None = None):
    """The trained model (and tokenizer, where the task has one) of a run directory.

    Args:
        run_dir: the run directory ``attnlab train`` wrote (checked by ``check_run_dir``).
        quantize: ``"int8"`` for lm and translate runs: every linear layer on int8 weights
            (``attnlab.nn.quantize``); None keeps float32.

    Returns:
        The model in eval mode; ``(model, tokenizer)`` for a task with a tokenizer.

    Raises:
        UsageError: the directory is not a run that can be loaded (see ``check_run_dir``).
        ValueError: ``quantize`` for a run of a task that does not take it.
    """
    run_dir, cfg = check_run_dir(run_dir)
    why = quantize_refusal(quantize, cfg["task"], run_dir)
    if why:
        raise ValueError(f"quantize {why} (attnlab.nn.quantize converts any model)")
    return get_task(cfg["task"]).load(run_dir, cfg, quantize=quantize)


def quantize_refusal(kind: str | None, task: str, run_dir) -> str | None:
    """Why ``kind`` cannot apply to a run of ``task`` (to follow the option's name), or None.

    The one statement of which runs ``quantize`` takes: ``load(..., quantize=)`` raises it as a
    ``ValueError``, the commands' ``--quantize`` as a ``UsageError``.
    """
    if kind is None or task in QUANTIZE_TASKS:
        return None
    return f"is for {' and '.join(QUANTIZE_TASKS)} runs; {run_dir} is a {task} run"
