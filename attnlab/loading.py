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

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import UsageError
from .run_config import RunSettings
from .runs import read_yaml
from .settings import TrainSettings, check_record, heads_divide_width
from .tasks import TASKS, get_task
from .tasks.base import rng_kept, set_options

__all__ = ["check_run_dir", "check_config", "check_values", "load", "weights_from", "CHECKPOINTS",
           "checkpoint_file", "quantize_refusal", "quantize_tasks", "tasks_that", "tasks_phrase"]

# what ``--checkpoint`` / ``checkpoint=`` may name instead of the final model.safetensors: the
# state the training loop saved last (also the only weights of a run that was interrupted)
CHECKPOINTS = ("last",)
CHECKPOINT_FLAG = "--checkpoint"
# the commands that take it (attnlab.commands.checkpoint.add_checkpoint_flag), as a hint names them
CHECKPOINT_COMMANDS = ("predict", "translate", "generate", "evaluate", "export", "view",
                       "plot attention")


def check_values(task, values: dict, where: str, *, training: bool = False,
                 of_use: bool = False, beside: Path | None = None) -> None:
    """``values`` as a file holds them (a run's config.yaml, a ``--config`` file, named by
    ``where``) against the declarations ``attnlab train`` checks them by: the model's typed
    config and the task's settings, and with ``training`` the shared ``TrainSettings`` (they
    do not matter to loading a run; they do to resuming it or training with the file). A
    ``UsageError`` names ``where`` and the key as the file spells it (``settings.check_record``;
    ``of_use``: its rules of use too; ``beside``: a --config file's directory)."""
    for declared in ((TrainSettings,) if training else ()) + (task.model_config, task.settings):
        if declared is not None:
            check_record(declared, values, where, of_use=of_use, beside=beside)


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


def _is_a_directory(run_dir: Path, where: str) -> None:
    """Refuse a ``run_dir`` that is missing, or is a file (a run's config.yaml or weights,
    say: the message then names the run directory that holds it)."""
    if run_dir.exists() and not run_dir.is_dir():
        holder = run_dir.parent
        hint = (f"; give the run directory that holds it, {holder}"
                if (holder / "config.yaml").is_file() else "")
        raise UsageError(f"{where}{run_dir} is a file, not a run directory{hint}")
    if not run_dir.is_dir():
        raise UsageError(f"{where}run directory not found: {run_dir}")


def run_dir_path(run_dir: str | Path) -> Path:
    """``run_dir`` as a ``Path``; a ``TypeError`` naming it where it is not a path (bytes, a
    number), not pathlib's message from inside (``load`` and ``check_run_dir`` both check it).

    Examples:
        >>> run_dir_path(b"runs/r")
        Traceback (most recent call last):
        TypeError: run_dir must be a path (str or pathlib.Path), got bytes: b'runs/r'
    """
    if not isinstance(run_dir, (str, os.PathLike)):
        raise TypeError(f"run_dir must be a path (str or pathlib.Path), got "
                        f"{type(run_dir).__name__}: {run_dir!r}")
    return Path(run_dir)


def check_run_dir(run_dir: str | Path, *, tasks: tuple[str, ...] | None = None,
                  command: str = "", checkpoint: str | None = None
                  ) -> tuple[Path, RunSettings]:
    """Check that ``run_dir`` is a finished run that can be loaded, and read its settings.

    Args:
        run_dir: the run directory ``attnlab train`` wrote.
        tasks: the tasks whose runs are accepted (``export`` takes lm and translate runs);
            None accepts any.
        command: the command's name, to start every message with ("predict: ...").
        checkpoint: None for the final ``model.safetensors``; ``"last"`` for the training
            checkpoint ``checkpoints/last.ckpt`` instead (``weights_from`` reads it), which an
            interrupted run has without ``model.safetensors``.

    Returns:
        ``(Path(run_dir), config)``: the task's typed run config (``Task.read_config``),
            keys as the file's; reading a setting the file lacks is a ``UsageError`` naming
            ``config.yaml`` and the setting; a key no setting declares is kept, not refused.

    Raises:
        TypeError: ``run_dir`` is not a path (``run_dir_path``: bytes, a number).
        UsageError: no such directory, no or a broken ``config.yaml``, an unknown task or one
            outside ``tasks``, no ``model.safetensors`` (no ``checkpoints/last.ckpt`` with
            ``checkpoint="last"``), or a model setting no trained run has (heads that do not
            divide the width; held-out fractions that leave nothing to train on).

    Examples:
        >>> check_run_dir("runs/none", command="predict")
        Traceback (most recent call last):
        attnlab.errors.UsageError: predict: run directory not found: runs/none
    """
    run_dir = run_dir_path(run_dir)
    where = f"{command}: " if command else ""
    _is_a_directory(run_dir, where)
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
    if checkpoint is not None:
        _check_checkpoint(run_dir, checkpoint)
    elif not (run_dir / "model.safetensors").is_file():
        last = checkpoint_file(run_dir, "last")
        commands = tasks_phrase(CHECKPOINT_COMMANDS)  # said as task names are: "a, b and c"
        hint = (f"; {commands} take {CHECKPOINT_FLAG} last to use {last}, its last saved step"
                if last.is_file() else "")
        raise UsageError(f"{where}{run_dir} has no model.safetensors (did training "
                         f"finish?){hint}")
    cfg = get_task(task).read_config(values, cfg_path)
    check_config(cfg, cfg_path, get_task(task))
    return run_dir, cfg


def load(run_dir: str | Path, *, quantize: str | None = None, checkpoint: str | None = None):
    """The trained model (and tokenizer, where the task has one) of a run directory.

    Args:
        run_dir: the run directory ``attnlab train`` wrote (checked by ``check_run_dir``).
        quantize: ``"int8"`` for lm and translate runs: every linear layer on int8 weights
            (``attnlab.nn.quantize``); None keeps float32.
        checkpoint: ``"last"``: the weights of ``checkpoints/last.ckpt`` (the last step
            saved; an interrupted run's only weights) instead of ``model.safetensors``.

    Returns:
        The model in eval mode; ``(model, tokenizer)`` for a task with a tokenizer.
            Loading leaves torch's global random state as it was.

    Raises:
        UsageError: the directory is not a run that can be loaded (see ``check_run_dir``).
        ValueError: ``quantize`` other than None and ``"int8"``, or for a run of a task that
            does not take it; ``checkpoint`` other than None and ``"last"``.
        TypeError: ``run_dir`` is not a path (``str`` or ``os.PathLike``: bytes, a number).

    Examples:
        >>> load(b"runs/r")
        Traceback (most recent call last):
        TypeError: run_dir must be a path (str or pathlib.Path), got bytes: b'runs/r'
    """
    run_dir_path(run_dir)  # before the other arguments, as check_run_dir checks it
    if checkpoint is not None and checkpoint not in CHECKPOINTS:
        raise ValueError(f"checkpoint must be None or one of {CHECKPOINTS}, got {checkpoint!r}")
    from .nn.quantize import QUANTIZE_KINDS  # torch: loading imports it anyway

    if quantize is not None and quantize not in QUANTIZE_KINDS:
        raise ValueError(f"quantize must be None or one of {QUANTIZE_KINDS}, got {quantize!r}")
    run_dir, cfg = check_run_dir(run_dir, checkpoint=checkpoint)
    why = quantize_refusal(quantize, cfg.task, run_dir)
    if why:
        raise ValueError(f"quantize {why} (attnlab.nn.quantize converts any model)")
    task = get_task(cfg.task)
    # the model is built at random before its weights are read: a notebook's seeded draws
    # after ``load`` are the ones they were before it
    with weights_from(run_dir, cfg, checkpoint), rng_kept():
        return task.runtime().load(task, run_dir, cfg, **set_options(quantize=quantize))


def checkpoint_file(run_dir: str | Path, checkpoint: str) -> Path:
    """The file ``--checkpoint CHECKPOINT`` names in ``run_dir`` (``checkpoints/last.ckpt``)."""
    return Path(run_dir) / "checkpoints" / f"{checkpoint}.ckpt"


def _check_checkpoint(run_dir: Path, checkpoint: str) -> None:
    path = checkpoint_file(run_dir, checkpoint)
    if not path.is_file():
        raise UsageError(f"{CHECKPOINT_FLAG} {checkpoint}: {path} not found (the run saved no "
                         f"checkpoint yet)")


@contextmanager
def weights_from(run_dir: str | Path, cfg: RunSettings, checkpoint: str | None, *,
                 say: bool = False) -> Iterator[int | None]:
    """While open, loading the run ``run_dir`` (its runtime's ``load``, ``attnlab.load``) reads
    the weights of its training checkpoint ``checkpoint`` (``"last"``) instead of its
    ``model.safetensors``; None changes nothing.

    The checkpoint is read as ``--resume`` reads it (``torch.load(weights_only=True)``: no
    code runs, and no Lightning is imported): the model's weights (a bf16-true run's frozen
    ones exact, as ``--resume`` continues with them), a LoRA run's update merged into them as
    training merges it at the end.

    Args:
        say: print on stderr which file and step the weights are (a command's one line).

    Yields:
        The checkpoint's step, or None for ``model.safetensors``.

    Raises:
        UsageError: naming the file, when it is missing, unreadable, not a checkpoint, or its
            weights do not fit the model config.yaml builds.
    """
    if checkpoint is None:
        yield None
        return
    import sys

    from . import runs
    from .training.checkpoint import frozen_float32, read_checkpoint

    path = checkpoint_file(run_dir, checkpoint)
    _check_checkpoint(Path(run_dir), checkpoint)
    flag = f"{CHECKPOINT_FLAG} {checkpoint}"
    state = read_checkpoint(path, flag=flag)
    step = int(state["global_step"])
    # the TaskModule's keys: "model." + the task model's own (a compiled one adds _orig_mod.);
    # a bf16-true run's frozen weights as it trained and saves them, not rounded
    weights = {k.removeprefix("model.").replace("_orig_mod.", ""): v
               for k, v in {**state["state_dict"], **frozen_float32(state)}.items()}

    def load_into(model) -> None:
        _load_checkpoint_weights(model, weights, cfg, path, flag)

    token = runs.WEIGHTS_IN_PLACE.set((Path(os.path.abspath(Path(run_dir) / "model.safetensors")),
                                       load_into))
    if say:
        print(f"using {path} (step {step})", file=sys.stderr, flush=True)
    try:
        yield step
    finally:
        runs.WEIGHTS_IN_PLACE.reset(token)


def _load_checkpoint_weights(model, weights: dict, cfg: RunSettings, path: Path,
                             flag: str) -> None:
    """``weights`` (a checkpoint's) into ``model``, strictly; a LoRA run's adapters are added
    first and merged after, as ``attnlab train`` merges them before saving."""
    rank = cfg.lora_rank if cfg.declares("lora_rank") else None
    if rank is not None:
        from .nn.lora import add_lora

        targets = cfg.lora_targets if cfg.declares("lora_targets") else "attention"
        add_lora(model, rank, cfg.lora_alpha, targets=targets)
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as e:
        lines = str(e).strip().splitlines()
        detail = next((line.strip() for line in lines if "size mismatch" in line),
                      lines[-1].strip() if lines else "")
        raise UsageError(f"{flag}: {path} does not fit the model config.yaml builds: "
                         f"{detail}") from None
    if rank is not None:
        from .nn.lora import merge_lora

        merge_lora(model)
        model.requires_grad_(True)  # as a model read from model.safetensors


def quantize_refusal(kind: str | None, task: str, run_dir) -> str | None:
    """Why ``kind`` cannot apply to a run of ``task`` (to follow the option's name), or None.

    The one statement of which runs ``quantize`` takes: ``load(..., quantize=)`` raises it as a
    ``ValueError``, the commands' ``--quantize`` as a ``UsageError``.
    """
    if kind is None or get_task(task).capabilities.quantizable:
        return None
    return f"is for {tasks_phrase(quantize_tasks())} runs; {run_dir} is a {task} run"


def quantize_tasks() -> tuple[str, ...]:
    """The tasks whose models run on int8 weights (``attnlab.nn.quantize``): those that declare
    ``Capabilities.quantizable`` (``tasks_that``).

    Examples:
        >>> quantize_tasks()
        ('lm', 'translate')
    """
    return tasks_that(lambda task: task.capabilities.quantizable)


def tasks_that(can) -> tuple[str, ...]:
    """The names of the registered tasks of which ``can(task)`` is true, for a message to list
    them: the latest registered first, the order these messages have always named them in.

    Examples:
        >>> tasks_that(lambda task: task.capabilities.evaluate_by_length)
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
