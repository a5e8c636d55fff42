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
from .run_config import RunSettings
from .runs import read_yaml
from .settings import TrainSettings, check_record, heads_divide_width
from .tasks import TASKS, get_task

__all__ = ["check_run_dir", "check_config", "check_values", "load", "quantize_refusal", "quantize_tasks", "tasks_that",
           "tasks_phrase"]


def check_values(task, values: dict, where: str, *, training: bool = False,
                 of_use: bool = False) -> None:
    """``values`` as a file holds them (a run's config.yaml, a ``--config`` file, named by
    ``where``) against the declarations ``attnlab train`` checks them by: the model's typed
    config and the task's settings, and with ``training`` the shared ``TrainSettings`` (they
    do not matter to loading a run; they do to resuming it or training with the file). A
    ``UsageError`` names ``where`` and the key as the file spells it (``settings.check_record``;
    ``of_use``: its rules of use too)."""
    for declared in ((TrainSettings,) if training else ()) + (task.model_config, task.settings):
        if declared is not None:
            check_record(declared, values, where, of_use=of_use)


def check_config(cfg, cfg_path: Path, task, *, training: bool = False) -> None:
    """Refuse a config.yaml whose model or task settings have a type or value no trained run
    has, naming the file, the setting and the value (``check_values``; with ``training``,
    for ``--resume``, its training settings too). A setting the file lacks is reported
    when it is read (``attnlab.run_config``). Whether the heads split the width is the task's
    ``heads_split_width`` and the rule ``heads_divide_width``, both of which ``attnlab train``
    checks too (graph and the recurrent translators split no width, and a run of theirs must
    load). Likewise the fractions of its data a run held out must have left something to
    train on (``Task.fractions_broken``)."""
    values = cfg.as_trained()  # the settings dict the task's checks read, as at train time
    check_values(task, cfg.record(), str(cfg_path), training=training)
    if task.heads_split_width(values):
        # a missing key is named by the run config's lookup
        broken = heads_divide_width(cfg.model_dim, cfg.num_heads,
                                    names=("model_dim", "num_heads"))
        if broken:
            raise UsageError(f"{cfg_path}: {broken}")
    # a run that records no fractions is refused, if at all, where they are read
    if broken := task.fractions_broken(values, names=("val_fraction", "test_fraction")):
        raise UsageError(f"{cfg_path}: {broken}")


def check_run_dir(run_dir: str | Path, *, tasks: tuple[str, ...] | None = None,
                  command: str = "") -> tuple[Path, RunSettings]:
    """Check that ``run_dir`` is a finished run that can be loaded, and read its settings.

    Args:
        run_dir: the run directory ``attnlab train`` wrote.
        tasks: the tasks whose runs are accepted (``export`` takes lm and translate runs);
            None accepts any.
        command: the command's name, to start every message with ("predict: ...").

    Returns:
        ``(Path(run_dir), config)``: the task's typed run config (``Task.read_config``), whose
        keys are the file's; reading a setting the file lacks is a ``UsageError`` naming
        ``config.yaml`` and the setting, and a key no setting declares is kept, not refused.

    Raises:
        UsageError: no such directory, no or a broken ``config.yaml``, an unknown task or one
            outside ``tasks``, no ``model.safetensors``, or a model setting no trained run has
            (a width the heads do not divide, where the task's model splits it; fractions
            held out of the data that leave nothing to train on).

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
    values = read_yaml(cfg_path, what=where.rstrip(": ") or "run directory")
    task = values.get("task")
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
    cfg = get_task(task).read_config(values, cfg_path)
    check_config(cfg, cfg_path, get_task(task))
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
    why = quantize_refusal(quantize, cfg.task, run_dir)
    if why:
        raise ValueError(f"quantize {why} (attnlab.nn.quantize converts any model)")
    return get_task(cfg.task).load(run_dir, cfg, quantize=quantize)


def quantize_refusal(kind: str | None, task: str, run_dir) -> str | None:
    """Why ``kind`` cannot apply to a run of ``task`` (to follow the option's name), or None.

    The one statement of which runs ``quantize`` takes: ``load(..., quantize=)`` raises it as a
    ``ValueError``, the commands' ``--quantize`` as a ``UsageError``.
    """
    if kind is None or get_task(task).quantizable:
        return None
    return f"is for {tasks_phrase(quantize_tasks())} runs; {run_dir} is a {task} run"


def quantize_tasks() -> tuple[str, ...]:
    """The tasks whose models run on int8 weights (``attnlab.nn.quantize``): those that declare
    ``Task.quantizable`` (``tasks_that``).

    Examples:
        >>> quantize_tasks()
        ('lm', 'translate')
    """
    return tasks_that(lambda task: task.quantizable)


def tasks_that(can) -> tuple[str, ...]:
    """The names of the registered tasks of which ``can(task)`` is true, for a message to list
    them: the latest registered first, the order these messages have always named them in.

    Examples:
        >>> tasks_that(lambda task: task.evaluate_by_length is not None)
        ('translate',)
    """
    return tuple(name for name, task in reversed(TASKS.items()) if can(task))


def tasks_phrase(names: tuple[str, ...] | list[str]) -> str:
    """Task names as a message says them ("lm and translate", "classify, lm and translate").

    Examples:
        >>> tasks_phrase(("classify", "lm", "translate"))
        'classify, lm and translate'
    """
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
