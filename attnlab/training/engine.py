"""The training engine every task uses: a Lightning Trainer factory, ``fit`` and ``finish``.

This is the only layer that imports Lightning. A task builds its data loaders and a
``TaskModule``, calls ``fit`` (which handles seeding, checkpoints, ``--resume`` and timing),
evaluates on its test split in plain PyTorch, then calls ``finish`` to write the run directory.
"""
from __future__ import annotations

import logging
import math
import os
import signal
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning.pytorch as L
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger

from ..errors import Interrupted, UsageError
from ..runs import readable, save_weights, write_metrics, write_yaml

__all__ = ["make_trainer", "fit", "finish", "FitResult", "checkpoint_dir", "parameter_count",
           "StopAtTarget", "NonFiniteLoss", "check_hardware"]

# Lightning's start-up chatter (GPU/TPU availability, "LOCAL_RANK", dataloader worker hints)
# says nothing a user of this CLI can act on.
for _name in ("lightning.pytorch", "lightning.fabric", "lightning"):
    logging.getLogger(_name).setLevel(logging.WARNING)
warnings.filterwarnings("ignore", message=".*does not have many workers.*")
warnings.filterwarnings("ignore", message=".*number of training batches.*smaller than the logging interval.*")
warnings.filterwarnings("ignore", message=".*is an invalid version and will not be supported.*")
# --resume reuses the run's logs/ and checkpoints/ on purpose (fit keeps the old CSV log).
warnings.filterwarnings("ignore", message=".*Experiment logs directory .* exists and is not empty.*")
warnings.filterwarnings("ignore", message=".*Checkpoint directory .* exists and is not empty.*")
warnings.filterwarnings("ignore", message=".*isinstance.treespec, LeafSpec.*")
# --resume of a run directory that was moved or copied, or with another --checkpoint-every:
# the checkpoint's own record of its directory and interval is not this run's concern.
warnings.filterwarnings("ignore", message=".*The dirpath has changed from.*")
warnings.filterwarnings("ignore", message=".*Be aware that when using `ckpt_path`.*")


def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def parameter_count(model: torch.nn.Module) -> int:
    """Trainable parameters, counting tied (shared) tensors once."""
    seen, total = set(), 0
    for p in model.parameters():
        if p.requires_grad and p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            total += p.numel()
    return total


class _PrintProgress(Callback):
    """Training progress on standard error. On a terminal, one line redrawn in place at most
    every ``REDRAW`` seconds (step, bar, losses and validation metrics, steps/s, time left);
    otherwise (CI, logs) ten lines per run. Lightning's own bar is off: it redrew at every step
    and needed every step logged for it, 1.08-1.95x a small task's step time
    (benchmarks/RESULTS.md, train_loop), and it counted epochs, which these runs do not have.
    """

    REDRAW = 0.1  # seconds between redraws on a terminal

    def __init__(self, max_steps: int, stream=None) -> None:
        self.max_steps = max_steps
        self.stream = stream
        self.tty = (stream or sys.stderr).isatty()
        self.start = self.drawn = time.perf_counter()
        self.first_step = 0  # a resumed run's rate counts from where it started
        self.draws = True  # False on DDP ranks other than 0, which show nothing
        self._due: tuple[int, bool] = (-1, False)
        self._open = False  # a line is drawn and not yet ended

    def reads_train_loss(self, step: int) -> bool:
        """Whether the progress after ``step`` steps shows ``train_loss`` (``logs_this_step``):
        on a terminal when a redraw is due, else every tenth of the run, and the last step."""
        if self._due[0] != step:
            if not self.draws:
                due = False
            elif self.tty:
                due = time.perf_counter() - self.drawn >= self.REDRAW
            else:  # the steps that end each tenth of the run: ten lines (fewer steps: each)
                due = step * 10 // self.max_steps != (step - 1) * 10 // self.max_steps
            self._due = (step, due or step == self.max_steps)
        return self._due[1]

    def _write(self, text: str) -> None:
        stream = self.stream or sys.stderr
        stream.write(text)
        stream.flush()

    def on_train_start(self, trainer, pl_module) -> None:
        self.start = self.drawn = time.perf_counter()
        self.first_step = trainer.global_step
        self.draws = trainer.is_global_zero

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        if not trainer.is_global_zero or not self.reads_train_loss(step):
            return
        if self.tty:
            self._draw(trainer)
        else:
            loss = trainer.callback_metrics.get("train_loss")
            loss = f"{float(loss):.4f}" if loss is not None else "-"
            self._write(f"step {step}/{self.max_steps}  train_loss {loss}\n")

    def _redraw_due(self, trainer) -> bool:
        return (self.tty and trainer.is_global_zero and not trainer.sanity_checking
                and time.perf_counter() - self.drawn >= self.REDRAW)

    def on_validation_start(self, trainer, pl_module) -> None:
        if self._redraw_due(trainer):
            self._draw(trainer, "validating")

    def on_validation_end(self, trainer, pl_module) -> None:
        if self._redraw_due(trainer):
            self._draw(trainer)

    def _draw(self, trainer, note: str = "", *, final: bool = False) -> None:
        now = time.perf_counter()
        self.drawn = now
        step, total = trainer.global_step, self.max_steps
        share = min(1.0, step / max(1, total))
        bar = "#" * int(16 * share)
        parts = [f"step {step}/{total} [{bar:<16}] {100 * share:3.0f}%"]
        rate = (step - self.first_step) / max(now - self.start, 1e-9)
        if rate > 0:  # what fits a narrow terminal first; the line is cut at its width
            left = "" if final else f"<{_clock((total - step) / rate)}"
            parts.append(f"{_clock(now - self.start)}{left}  {rate:.3g} steps/s")
        if note:
            parts.append(note)
        metrics = trainer.progress_bar_metrics  # the losses first: the rest may be cut off
        for name in sorted(metrics, key=lambda k: (k != "train_loss", k != "val_loss")):
            parts.append(f"{name} {float(metrics[name]):.4g}")
        self._write("\r" + "  ".join(parts)[:self._width() - 1] + "\x1b[K")
        self._open = True

    def _width(self) -> int:
        """Columns of the terminal this line goes to: $COLUMNS, else the stream's own terminal
        (stderr can be one while stdout is piped), else 100."""
        import shutil

        columns = os.environ.get("COLUMNS", "")
        if columns.isdecimal() and int(columns) > 0:
            return int(columns)
        try:
            return os.get_terminal_size((self.stream or sys.stderr).fileno()).columns
        except (OSError, ValueError, AttributeError):
            return shutil.get_terminal_size((100, 20)).columns

    def _end_line(self) -> None:
        if self._open:
            self._write("\n")
            self._open = False

    def on_train_end(self, trainer, pl_module) -> None:
        if self.tty and trainer.is_global_zero:
            early = trainer.global_step < self.max_steps  # a target reached (--early-stop)
            self._draw(trainer, "stopped early" if early else "", final=True)
        self._end_line()

    def on_exception(self, trainer, pl_module, exception) -> None:
        self._end_line()  # the error starts on a line of its own


def _clock(seconds: float) -> str:
    """``m:ss``, or ``h:mm:ss`` from an hour."""
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


class _StopOnNonFinite(Callback):
    """Stop at the first NaN or infinite loss, keeping the last good checkpoint untouched."""

    # Before backward: the optimiser has not yet applied the non-finite gradient.
    def on_before_backward(self, trainer, pl_module, loss):
        # one number: a Python check (0.1 µs) instead of two tensor ops (~5 µs)
        finite = (math.isfinite(loss.item()) if loss.numel() == 1
                  else bool(torch.isfinite(loss).all()))
        if not finite:
            last = checkpoint_dir(Path(trainer.default_root_dir)) / "last.ckpt"
            kept = (f"the last good checkpoint is kept: {last} (--resume continues from it)"
                    if last.is_file() else "no checkpoint had been written yet")
            raise NonFiniteLoss(
                f"the training loss became {float(loss.detach())} at step {trainer.global_step + 1}; "
                f"stopped (lower --lr or raise --warmup); {kept}"
            )


class _RandomState(Callback):
    """The random number generators' state, saved in every checkpoint and restored on
    ``--resume``, so dropout after a resume draws the masks an uninterrupted run would draw.

    Validation is made neutral (the state at the end of each training step is put back after
    it: creating a DataLoader iterator draws a number, before any validation hook runs), so
    the state saved with the checkpoint after step k is the state step k+1 starts from, and
    ``--val-every`` does not change the dropout masks a run trains with. Under DDP every rank
    starts from the same seed and draws the same amount, so rank 0's state (the one saved) is
    every rank's. Data order does not use these generators (``attnlab.data.ResumableBatches``).
    """

    @staticmethod
    def _capture() -> dict[str, Any]:
        state = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    @staticmethod
    def _restore(state: dict[str, Any]) -> None:
        torch.set_rng_state(state["torch"])
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])

    _after_step: dict[str, Any] | None = None  # the state after the latest training step
    _loaded: dict[str, Any] | None = None  # restored from a checkpoint, for the first step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self._loaded is not None:  # setting up the loops drew numbers since the restore
            self._restore(self._loaded)
            self._loaded = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._after_step = self._capture()

    def on_validation_end(self, trainer, pl_module):
        if self._after_step is not None:
            self._restore(self._after_step)

    def state_dict(self) -> dict[str, Any]:
        return self._capture()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._loaded = self._after_step = state_dict


class NonFiniteLoss(UsageError):
    """Training diverged (NaN/inf loss)."""


class StopAtTarget(Callback):
    """Stop training once a validation metric has reached ``target`` at ``times`` validations
    in a row (e.g. ``val_seq_acc`` = 1.0): the step budget becomes an upper bound.

    Several in a row rather than one: a small validation set can be all right by chance a few
    steps before the model is right on a test set ten times larger.
    """

    def __init__(self, monitor: str, target: float, *, times: int = 2, mode: str = "max") -> None:
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
        self.monitor, self.target, self.times, self.mode = monitor, target, times, mode
        self.hits = 0
        self.stopped_at: int | None = None

    def on_validation_end(self, trainer, pl_module):
        if trainer.sanity_checking:
            return
        if self.monitor in trainer.callback_metrics:
            value = float(trainer.callback_metrics[self.monitor])
            reached = value >= self.target if self.mode == "max" else value <= self.target
            self.hits = self.hits + 1 if reached else 0
        stop = self.hits >= self.times
        strategy = getattr(trainer, "strategy", None)
        if strategy is not None:  # every rank must stop at the same step, or DDP hangs
            stop = strategy.reduce_boolean_decision(stop, all=False)
        if stop:
            trainer.should_stop = True
            self.stopped_at = trainer.global_step


AUTO_BF16_WIDTH = 128  # from this model width bf16 autocast pays on a CPU with bf16 instructions


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX-512 BF16 or AMX on x86, read from
    /proc/cpuinfo; elsewhere False: emulated bfloat16 is slower than float32)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "").split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def auto_precision(device: str, model_dim: int) -> str:
    """``--precision auto``: ``bf16-mixed`` on a CPU with bf16 instructions for a model at least
    ``AUTO_BF16_WIDTH`` wide, else ``32``. Measured (benchmarks/RESULTS.md, nanogpt): a
    128-wide language model's step 1.33x faster with the same validation loss; a 32-wide model
    1.5x slower, its products too small to pay for the casts; a GPU keeps 32.

    Examples:
        >>> auto_precision("gpu", 512), auto_precision("cpu", 64)
        ('32', '32')
    """
    if device == "cpu" and model_dim >= AUTO_BF16_WIDTH and cpu_has_bf16():
        return "bf16-mixed"
    return "32"


# The Trainer settings that depend on the machine, and their defaults.
_HARDWARE = {"accelerator": "auto", "devices": 1, "num_nodes": 1, "strategy": "auto",
             "precision": "32"}


def _hardware_kwargs(cfg: dict[str, Any]) -> dict[str, Any]:
    return {key: cfg.get(key, default) for key, default in _HARDWARE.items()}


def check_hardware(cfg: dict[str, Any], *, quiet: bool = False) -> None:
    """Refuse a --accelerator/--devices/--num-nodes/--strategy/--precision combination this
    machine cannot run (FSDP without a GPU, ``--accelerator gpu`` without one), before the run
    directory is created: Lightning's own check (a Trainer is only configured here, nothing
    is launched), its message on one line.

    What Lightning will really run is said and recorded: ``16-mixed`` on a CPU runs as
    ``bf16-mixed``, and ``cfg["precision"]`` (so config.yaml) says so (issue #8).
    """
    from lightning.pytorch.utilities.exceptions import MisconfigurationException

    auto = cfg.get("precision") == "auto"
    if auto:
        cfg["precision"] = "32"  # until the device is known
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the substitution is reported below, once
            trainer = L.Trainer(**_hardware_kwargs(cfg), logger=False, enable_checkpointing=False,
                                enable_progress_bar=False, enable_model_summary=False)
    except (ValueError, MisconfigurationException) as e:
        given = " ".join(f"--{k.replace('_', '-')} {cfg[k]}" for k in _HARDWARE if k in cfg)
        raise UsageError(f"{given}: {' '.join(str(e).split())}") from None
    asked, runs = str(cfg.get("precision", "32")), str(trainer.precision)
    device = type(trainer.accelerator).__name__.removesuffix("Accelerator").lower() or "this device"
    if auto:
        cfg["precision"] = auto_precision(device, int(cfg.get("model_dim") or 0))
        if cfg["precision"] != "32" and not quiet:  # not the float32 one might expect: say so
            print(f"note: --precision auto: {cfg['precision']} on this {device} for a model "
                  f"{cfg.get('model_dim')} wide (recorded in config.yaml; --precision 32 for "
                  f"float32)", file=sys.stderr, flush=True)
    elif runs.removesuffix("-true") != asked.removesuffix("-true"):
        cfg["precision"] = runs.removesuffix("-true") if runs in ("32-true", "64-true") else runs
        if not quiet:
            print(f"note: --precision {asked} is not available on {device}; running "
                  f"{cfg['precision']} (recorded in config.yaml)", file=sys.stderr, flush=True)
    cores = os.cpu_count() or 1
    if device == "cpu" and trainer.num_devices > cores and not quiet:
        print(f"note: --devices {trainer.num_devices} on CPU starts {trainer.num_devices} "
              f"training processes on {cores} cores; they will share them", file=sys.stderr,
              flush=True)


def make_trainer(cfg: dict[str, Any], run_dir: Path, *, max_steps: int,
                 val_check_interval: int | None = None, callbacks: list | None = None,
                 limit_val_batches: int | float | None = None) -> L.Trainer:
    """A Trainer with the CLI's settings: checkpoints every ``checkpoint_every`` steps and the
    last one, CSV logs in ``run_dir/logs``, gradient clipping, precision, devices, strategy."""
    run_dir = Path(run_dir)
    ckpt = ModelCheckpoint(dirpath=checkpoint_dir(run_dir), filename="step{step}",
                           every_n_train_steps=cfg.get("checkpoint_every") or None,
                           save_top_k=1, save_last=True, auto_insert_metric_name=False,
                           save_on_train_epoch_end=False, enable_version_counter=False)
    cbs = [ckpt, _StopOnNonFinite(), _RandomState(), _PrintProgress(max_steps),
           *(callbacks or [])]
    kwargs: dict[str, Any] = {}
    if val_check_interval is not None:
        kwargs.update(val_check_interval=val_check_interval, check_val_every_n_epoch=None)
    return L.Trainer(
        default_root_dir=str(run_dir),
        max_steps=max_steps,
        max_epochs=-1,
        **_hardware_kwargs(cfg),
        gradient_clip_val=cfg.get("grad_clip") or None,
        logger=CSVLogger(str(run_dir), name="logs", version=""),
        log_every_n_steps=max(1, min(50, max_steps // 20)),
        callbacks=cbs,
        enable_progress_bar=False,  # _PrintProgress
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=limit_val_batches,
        deterministic=False,
        **kwargs,
    )


def check_checkpoint(path: Path, module: torch.nn.Module | None = None) -> None:
    """Refuse a checkpoint that is truncated, corrupt or carries code, or (given ``module``)
    whose weights do not fit the model this configuration builds, before Lightning reads it.

    Checkpoints are unpickled with ``weights_only=True``: only tensors and plain containers are
    rebuilt, so a poisoned file raises instead of running its payload.
    """
    import pickle

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError,
            AttributeError, TypeError) as e:
        if isinstance(e, pickle.UnpicklingError) and "GLOBAL" in str(e):  # a class or function
            why = "it holds objects other than weights, which could run code when loaded"
        else:
            why = f"truncated or corrupt: {type(e).__name__}"
        raise UsageError(f"--resume: refusing checkpoint {path}: {why}") from None
    if not isinstance(state, dict) or "state_dict" not in state:
        raise UsageError(f"--resume: {path} is not an attnlab training checkpoint")
    if module is not None:
        saved, built = state["state_dict"], module.state_dict()
        wrong = [f"{k} is {tuple(saved[k].shape)} there, {tuple(v.shape)} here"
                 for k, v in built.items()
                 if k in saved and hasattr(saved[k], "shape") and saved[k].shape != v.shape]
        if wrong:
            more = f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""
            raise UsageError(f"--resume: {path} does not fit the model its config.yaml builds "
                             f"now: {wrong[0]}{more}; was config.yaml edited, or did a setting "
                             f"'auto' choose differently than when the run started?")


def _keep_previous_logs(run_dir: Path) -> None:
    """Lightning's CSV logger empties logs/ when a run starts again; keep the interrupted part
    as logs/metrics.partN.csv so --resume does not erase the history."""
    csv_log = Path(run_dir) / "logs" / "metrics.csv"
    if csv_log.is_file():
        n = 1
        while (kept := csv_log.with_name(f"metrics.part{n}.csv")).exists():
            n += 1
        csv_log.rename(kept)


class _SaveOnSignal(Callback):
    """SIGINT (Ctrl-C) and SIGTERM (what a batch scheduler sends before it preempts a job)
    end training at the end of the current step, with a checkpoint of that step: the work
    since the last periodic checkpoint is kept, and ``--resume`` continues exactly as after
    any checkpoint (issue #8). A second Ctrl-C stops at once, without that checkpoint.

    The handlers are installed when training starts (Lightning installs its own SIGTERM
    handler at the start of ``fit``, which would end the process with status 0) and put back
    when it ends. Under DDP the ranks agree on stopping, so all of them save and stop together.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, resume_hint: str) -> None:
        self.resume_hint = resume_hint
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def on_train_start(self, trainer, pl_module) -> None:
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._notice) for s in self.SIGNALS}

    def _notice(self, signum, frame) -> None:
        if self.signum is not None:
            raise Interrupted(f"interrupted again ({signal.Signals(signum).name}) before the "
                              f"step's checkpoint was written; the last checkpoint is kept; "
                              f"continue with: {self.resume_hint}", signum, checkpointed=True)
        self.signum = signum

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        stop = self.signum is not None
        if trainer.world_size > 1:
            stop = trainer.strategy.reduce_boolean_decision(stop, all=False)
        if not stop:
            return
        trainer.save_checkpoint(checkpoint_dir(Path(trainer.default_root_dir)) / "last.ckpt")
        signum = self.signum or signal.SIGTERM  # a rank told by another one
        raise Interrupted(f"interrupted at step {trainer.global_step} of {trainer.max_steps}; "
                          f"continue with: {self.resume_hint}", signum, checkpointed=True)

    def restore(self) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}

    def on_train_end(self, trainer, pl_module) -> None:
        self.restore()

    def on_exception(self, trainer, pl_module, exception) -> None:
        self.restore()


def resume_command(cfg: dict[str, Any], run_dir: Path) -> str:
    """The command that continues this run (its config.yaml holds every other setting)."""
    import shlex

    return f"attnlab train {cfg.get('task', 'TASK')} --out {shlex.quote(str(run_dir))} --resume"


# Below this share of --lr the warm-up is said not to fit the budget. The translate defaults
# (warm-up 200 of 600 steps) reach 0.75; an lm run of 200 steps with warm-up 100 reaches 0.52.
WARMUP_PEAK_WARNING = 0.7


def warmup_note(cfg: dict[str, Any], max_steps: int) -> str | None:
    """A warning when the warm-up does not fit the step budget, so the learning rate never
    gets near its peak (an lm run of 200 steps with warm-up 100 peaked at half of --lr).

    "Peak" is --lr for the cosine schedule. Its rate is ``lr · f(e)`` with f = ½(1 +
    cos(π·e/max_steps)) · min(1, e/warmup): the decay starts at step 0, so the highest rate,
    near the end of the warm-up, is below --lr, and close to it only when the warm-up is a
    small part of the run (docs/schedules.md). Noam's peak is its rate at step ``warmup``.
    The highest rate actually reached is read off the schedule itself, step by step.
    """
    from ..schedulers import cosine_warmup_factor, noam_factor

    warmup, lr = max(1, int(cfg.get("warmup") or 0)), float(cfg.get("lr", 1.0))
    if cfg.get("schedule", "cosine") == "noam":
        d_model = int(cfg.get("model_dim", 512))
        if warmup <= max_steps:
            return None
        reached = noam_factor(max_steps, d_model, warmup, lr) / noam_factor(warmup, d_model, warmup, lr)
        return (f"--warmup {warmup} is longer than the {max_steps}-step budget: the Noam "
                f"schedule reaches {reached:.2f} of its peak; shorten --warmup or raise the budget")
    if not cfg.get("warmup"):
        return None
    # The factor falls after the warm-up, so the peak lies in steps 0..min(warmup, budget);
    # at most ~10,000 of them are looked at (a budget of 10^11 steps must not hang here).
    end = min(warmup, max_steps)
    steps = [*range(0, end, max(1, end // 10_000)), end]
    peak, at = max((cosine_warmup_factor(e, warmup, max_steps), e) for e in steps)
    if peak >= WARMUP_PEAK_WARNING:
        return None
    return (f"--warmup {cfg['warmup']} with a {max_steps}-step budget: the learning rate peaks "
            f"at {peak:.2f} x --lr {lr:g} (step {at}); shorten --warmup or raise the budget")


@dataclass
class FitResult:
    steps: int
    train_seconds: float
    trainer: L.Trainer
    resumed_from: str | None

    @property
    def is_global_zero(self) -> bool:
        return self.trainer.is_global_zero


class _TrainClock(Callback):
    """Training seconds across interruptions: kept in every checkpoint, so a resumed run's
    ``train_seconds`` counts the time before the crash too (up to its last checkpoint)."""

    def __init__(self) -> None:
        self.before = 0.0  # seconds trained by earlier processes, restored from the checkpoint
        self.start = time.perf_counter()

    def on_train_start(self, trainer, pl_module) -> None:
        self.start = time.perf_counter()

    def total(self) -> float:
        return self.before + time.perf_counter() - self.start

    def state_dict(self) -> dict[str, float]:
        return {"seconds": self.total()}

    def load_state_dict(self, state_dict: dict[str, float]) -> None:
        self.before = float(state_dict.get("seconds", 0.0))


def fit(module: L.LightningModule, train_loader, val_loader, cfg: dict[str, Any], run_dir: Path, *,
        max_steps: int, val_check_interval: int | None = None, callbacks: list | None = None,
        limit_val_batches: int | float | None = None) -> FitResult:
    """Train ``module`` to ``max_steps``; with ``cfg["resume"]`` continue from the last checkpoint."""
    run_dir = Path(run_dir)
    clock = _TrainClock()
    interrupt = _SaveOnSignal(resume_command(cfg, run_dir))
    trainer = make_trainer(cfg, run_dir, max_steps=max_steps, val_check_interval=val_check_interval,
                           callbacks=[clock, *(callbacks or []), interrupt],
                           limit_val_batches=limit_val_batches)
    if not cfg.get("resume") and trainer.is_global_zero:
        # again, now that the task has resolved its 'auto' settings (translate's tokenisers):
        # --resume then rebuilds what this run trains, even if a later rule would choose otherwise
        write_yaml(run_dir / "config.yaml", cfg)
    ckpt_path = None
    if cfg.get("resume"):
        last = checkpoint_dir(run_dir) / "last.ckpt"
        if last.is_file():
            check_checkpoint(last, module)
            ckpt_path = str(last)
        elif trainer.is_global_zero:  # killed before its first checkpoint: nothing to lose
            print(f"--resume: no checkpoint yet in {checkpoint_dir(run_dir)}; training from step 0",
                  file=sys.stderr, flush=True)
        _keep_previous_logs(run_dir)
    if cfg.get("compile"):
        # In place (nn.Module.compile), so parameter names and the saved weights are unchanged;
        # the torch model inside a TaskModule, or the module's own forward.
        getattr(module, "model", module).compile()
    note = warmup_note(cfg, max_steps)
    if note and trainer.is_global_zero:
        print(f"warning: {note}", file=sys.stderr, flush=True)
    try:
        trainer.fit(module, train_dataloaders=train_loader, val_dataloaders=val_loader,
                    ckpt_path=ckpt_path, weights_only=True if ckpt_path else None)
    finally:
        interrupt.restore()
    seconds = clock.total()
    # The final state, so --resume of a finished run is a no-op. Every rank calls it (it holds
    # a barrier); only global rank 0 writes.
    trainer.save_checkpoint(checkpoint_dir(run_dir) / "last.ckpt")
    if interrupt.signum is not None:  # the signal came during the last step's validation
        raise Interrupted(f"interrupted at the end of training (step {trainer.global_step} of "
                          f"{max_steps}); finish with: {interrupt.resume_hint}", interrupt.signum,
                          checkpointed=True)
    return FitResult(trainer.global_step, seconds, trainer, ckpt_path)


def finish(cfg: dict[str, Any], run_dir: Path, model: torch.nn.Module, metrics: dict[str, float],
           result: FitResult, *, tokenizer=None, quiet: bool = False) -> dict[str, float]:
    """Write model.safetensors, tokenizer.json, config.yaml and metrics.json (all atomic), then
    print a summary table. Only the global-zero process writes."""
    run_dir = Path(run_dir)
    # numbers, and lists that say something about them (classify's classes with no test example)
    metrics = {k: v if isinstance(v, (list, str)) else float(v) for k, v in metrics.items()}
    metrics.update(steps=int(result.steps), train_seconds=round(result.train_seconds, 3),
                   parameters=parameter_count(model))
    metrics = readable(metrics)  # what metrics.json holds: 6 significant digits (issue #8)
    if not result.is_global_zero:
        return metrics
    save_weights(model, run_dir / "model.safetensors")
    if tokenizer is not None:
        tokenizer.save(run_dir / "tokenizer.json")
    write_yaml(run_dir / "config.yaml", cfg)
    write_metrics(run_dir / "metrics.json", metrics)
    if not quiet:
        print_summary(cfg.get("task", "?"), run_dir, metrics)
    return metrics


def print_summary(task: str, run_dir: Path, metrics: dict[str, float]) -> None:
    numbers = {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
    width = max(map(len, numbers))
    print(f"\n{task} run: {run_dir}")
    for key, value in numbers.items():
        text = f"{value:,.0f}" if key in ("steps", "parameters") else f"{value:.4f}"
        print(f"  {key:<{width}}  {text}")
    sys.stdout.flush()
