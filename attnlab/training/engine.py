"""The training loop every ``attnlab train`` run goes through, written out on Lightning Fabric.

One step, top to bottom in ``Loop.train_step``:

    batch to the device -> forward and the task's loss (``TaskModule.loss``) in the run's
    precision -> backward -> clip -> optimiser (16-mixed: through the gradient scaler) -> schedule

With ``--accumulate N`` the step takes N batches, each through forward and backward on its own
with its loss weighted by its share of the step's targets (``TaskModule.targets``: the tokens
of a padded batch, else the examples), so the gradients add up to those of one batch of all N;
under DDP the processes average the gradients after the last one only.

and around it, in ``Loop.run``: every N steps log, validate, checkpoint; stop at the budget, at
a target (``StopAt``, checked after validation), after ``--patience`` validations without
improvement (``BestWatch``, which with ``--keep-best`` also keeps the best validation's weights
for ``fit`` to hand back), at a signal or at a non-finite loss.

Fabric (``attnlab.training.hardware``) brings what depends on the machine: the processes of
DDP and FSDP across devices and nodes, mixed precision (autocast and, for ``16-mixed``, the
gradient scaler), the gradients' clipping where FSDP shards them, and checkpoint I/O. The rest
is here, in attnlab's own words: resuming mid-epoch with the random state of an uninterrupted
run, Ctrl-C and SIGTERM that save the current step, the progress line, the training log
(``runlog``: CSV and TensorBoard).

The step reads nothing off the device (no ``.item()``) except at the steps that show or log
it, so on a GPU the host queues work ahead; on one CPU process a non-finite loss is caught
before its gradients are applied (reading a CPU tensor costs nothing), elsewhere at the next
step that logs, validates or saves, before a checkpoint is written.

A task builds its data loaders and a ``TaskModule``, calls ``fit``, evaluates on its test
split in plain PyTorch, then calls ``finish`` to write the run directory.
"""
from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from ..errors import TERMINATING, Interrupted, UsageError
from ..run_config import RunSettings
from ..runs import naming, readable, save_weights, sync, write_config, write_metrics
from ..settings import epoch_steps, later_process, processes
from .clock import TrainClock
from .checkpoint import (FORMAT, capture_rng, capture_rng_ranks, check_epochs, check_fits,
                         checkpoint_dir, frozen_float32, partial_checkpoint, rank_rng, rank_seed,
                         read_checkpoint, restore_rng, restore_schedule)
from .csvlog import keep_previous_log
from .runlog import RunLog
from .stepstats import StepStats
from .adapt import adapt, init_kind, merge_lora, parameter_share, save_adapter
from .best import BestWatch, cpu_copy
# check_hardware: for commands/train
from .hardware import (check_hardware, compile_options, launch, launch_id,  # noqa: F401
                       make_fabric, sums_in)
from . import ranks
from ..nn.lora import lora_factors
from ..nn.stacks import checkpoint_activations
from .module import (OptimizerSettings, TaskModule, back_to_float32, batch_size, exact_tables,
                     frozen_weights, make_optimizer, optimizer_groups)
from .progress import Progress
from .totals import is_total

__all__ = ["fit", "finish", "FitResult", "StopAt", "NonFiniteLoss",
           "checkpoint_dir", "parameter_count", "check_hardware", "resume_command",
           "on_resume_accepted", "loss_shares"]

# what ``attnlab train`` does to its run directory once a --resume is accepted (set by
# ``on_resume_accepted``)
_ACCEPTED: list[Callable[[], None] | None] = [None]


def on_resume_accepted(do: Callable[[], None] | None) -> None:
    """``do()``: what the first process does to the run directory once every refusal of a
    ``--resume`` has passed (its checkpoint read and checked against the model and the
    flags), before the run's first write: remove what a killed process left there, record a
    data file given at its new path. A refused --resume then leaves the run as it found it,
    byte for byte. None: nothing (the next run in this process is another)."""
    _ACCEPTED[0] = do


def parameter_count(model: torch.nn.Module) -> int:
    """Trainable parameters, counting tied (shared) tensors once."""
    return parameter_share(model)[0]


@dataclass(frozen=True)
class StopAt:
    """Stop training once the validation metric ``metric`` has reached ``target`` at ``times``
    validations in a row (e.g. ``val_seq_acc`` = 1.0): the step budget becomes an upper bound.
    ``mode`` "max": reached means at least ``target``; "min": at most.

    Several in a row rather than one: a small validation set can be all right by chance a few
    steps before the model is right on a test set ten times larger.
    """

    metric: str
    target: float
    times: int = 2
    mode: str = "max"

    def __post_init__(self) -> None:
        if self.mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got {self.mode!r}")

    def streak(self, hits: int, metrics: dict[str, float]) -> int:
        """Validations in a row that reached the target, ``hits`` before ``metrics``; a
        validation without the metric leaves the count as it was."""
        if self.metric not in metrics:
            return hits
        value = metrics[self.metric]
        reached = value >= self.target if self.mode == "max" else value <= self.target
        return hits + 1 if reached else 0

    def reason(self) -> str:
        return f"{self.metric} reached {self.target:g} at {self.times} validations in a row"


class NonFiniteLoss(UsageError):
    """Training diverged (NaN/inf loss)."""


class _Signals:
    """SIGINT (Ctrl-C), SIGTERM (what a batch scheduler sends before it preempts a job) and
    SIGHUP (the terminal closed, an ssh session dropped) end training at the end of the
    current step, with a checkpoint of that step: the work since the last periodic checkpoint
    is kept, and ``--resume`` continues exactly as after any checkpoint. A second one stops at
    once, without that checkpoint. A signal the process was started ignoring (``nohup``, a
    job started with ``&`` by a script) stays ignored.

    The handlers are installed while the loop runs and put back after it. Under DDP the ranks
    agree on stopping (``Loop._told_to_stop``), so all of them save and stop together.
    """

    SIGNALS = (signal.SIGINT, *TERMINATING)

    def __init__(self, resume_hint: str) -> None:
        self.resume_hint = resume_hint
        self.signum: int | None = None
        self.quiet = False  # a DDP rank but global rank 0: its line would repeat rank 0's
        self._previous: dict[int, Any] = {}

    def stopped(self, message: str) -> Interrupted:
        """The ``Interrupted`` that ends a run after a signal, the step saved: every rank
        stops with it, and only global rank 0 says so."""
        stop = Interrupted(message, self.signum or signal.SIGTERM, checkpointed=True,
                           quiet=self.quiet)
        stop.agreed = True  # every rank stops with it (ranks.agreed)
        return stop

    def __enter__(self) -> "_Signals":
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._notice) for s in self.SIGNALS
                              if signal.getsignal(s) is not signal.SIG_IGN}
        return self

    def _notice(self, signum, frame) -> None:
        if self.signum is not None:
            raise Interrupted(f"interrupted again ({signal.Signals(signum).name}) before the "
                              f"step's checkpoint was written; the last checkpoint is kept; "
                              f"continue with: {self.resume_hint}", signum, checkpointed=True,
                              quiet=self.quiet)
        self.signum = signum

    def __exit__(self, *exc) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}


@dataclass
class FitResult:
    steps: int
    train_seconds: float
    resumed_from: str | None
    is_global_zero: bool
    # the validation of the weights fit hands back ({"val_loss": ...}), in the precision the
    # run trained in: with --keep-best the best one's; else the last step's, empty when the
    # last step was not validated
    validation: dict[str, float] = field(default_factory=dict)
    # --keep-best: best_step, best_metric, best_value (BestWatch.summary); else empty
    best: dict[str, Any] = field(default_factory=dict)
    stopped: str | None = None  # why training stopped before its budget
    # a --lora-rank run's update, (A, B) by layer, as trained (``nn.lora.lora_factors``)
    lora: dict[str, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    # what --init was when the run started (``adapt.init_kind``), for the adapter
    started: tuple[str | None, str | None] | None = None
    # --compile: the seconds its first step took (compiling, then the step), which
    # train_seconds leaves out; None without --compile
    compile_seconds: float | None = None


def loss_shares(counts: list, dtype: torch.dtype = torch.float32) -> list:
    """Each batch's share of a step's loss, in proportion to what its mean is over (its
    targets: ``TaskModule.targets``), so that ``--accumulate N`` batches train as one batch N
    times larger even where their padding differs (``train_step`` gives one batch 1, so it
    trains as it always did). Tensors stay on the device: nothing here waits for it; their
    shares are in ``dtype`` (a float64 run's float64: a share of 1/3 in float32 would cost
    its gradients their last nine digits)."""
    total = sum(counts)
    if isinstance(total, torch.Tensor):
        total = total.to(dtype)
    return [count / total for count in counts]


def _weighted(shares: list, losses: list[torch.Tensor], logged: list[dict[str, torch.Tensor]]
              ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The step's loss and logged numbers: its batches' weighted by their ``loss_shares`` (one
    batch: its own, as given), in the numbers' own dtype (float64 shares log no more digits
    than the losses have, as a DDP run's rows have them)."""
    if len(losses) == 1:
        return losses[0], logged[0]

    def mean(values: list[torch.Tensor]) -> torch.Tensor:
        return sum(share * v.detach() for share, v in zip(shares, values)).to(values[0].dtype)

    return mean(losses), {k: mean([logs[k] for logs in logged]) for k in logged[0]}


class Loop:
    """One run of training: the state the step changes, the step itself (``train_step``) and the
    loop around it (``run``)."""

    def __init__(self, module: TaskModule, train_loader, val_loader, cfg: RunSettings,
                 run_dir: Path, *, max_steps: int, val_check_interval: int | None,
                 stop_at: StopAt | None, limit_val_batches: int | None) -> None:
        self.cfg, self.run_dir, self.max_steps = cfg, Path(run_dir), max_steps
        self.train_loader, self.val_loader = train_loader, val_loader
        self.limit_val_batches = limit_val_batches
        self.accumulate = int(cfg.accumulate)  # batches per optimiser step
        # an epoch is a pass over the training data (its last step takes the batches left),
        # unless the loader is an endless supply of fresh ones
        self.passes = bool(getattr(train_loader, "passes", True))
        self._carried: list = []  # batches carried into the next "epoch" of an endless supply
        # validated once an epoch (no --val-every): counted again when resumed (_restore)
        self._per_epoch = (val_check_interval is None and self.passes
                           and hasattr(train_loader, "__len__"))
        if val_check_interval is None:  # once an epoch of the training data (an endless
            # supply's "epoch": its length, as it always was)
            val_check_interval = (max_steps if not hasattr(train_loader, "__len__")
                                  else epoch_steps(cfg, len(train_loader))
                                  if self.passes else len(train_loader))
        # a --val-every beyond the budget validates at the last step: --keep-best and
        # --patience then watch one validation, not none
        self.val_every = max(1, min(int(val_check_interval), max_steps))
        self.checkpoint_every = int(cfg.checkpoint_every or 0)
        self.log_every = max(1, min(50, max_steps // 20))
        self.fabric = make_fabric(cfg)
        self.dtype = sums_in(self.fabric)  # the step's shares and loss (--precision 64: float64)
        self.grad_clip = float(cfg.grad_clip or 0.0)  # 0: no clipping
        self.stop_at, self.hits = stop_at, 0  # hits: validations in a row at stop_at's target
        self.watch = watch_of(cfg)  # --keep-best, --patience
        self.module = module  # the TaskModule as built: its weights are what a run saves
        self.step, self.clock = 0, TrainClock()
        self.to_compile = bool(cfg.compile)  # the next step compiles the model first
        self.stopped: str | None = None  # why training stopped before max_steps
        self.shown: dict[str, float] = {}  # what the progress line shows: the latest numbers
        self.progress = Progress(max_steps)
        self.log = RunLog.for_run(self.run_dir / "logs")  # metrics.csv and TensorBoard's events
        self.stats = StepStats(size=batch_size, tokens=module.tokens)  # lr, norm, throughput
        self.signals = _Signals(resume_command(cfg, self.run_dir))
        self._rng_to_restore: dict[str, Any] | None = None
        self._reseed: int | None = None  # a DDP rank above 0: its own seed (``rank_seed``)
        self._rank_weight: torch.Tensor | float = 1.0  # DDP: the process's share of targets
        self._unvalidated = False  # resumed after a step whose validation did not run
        self.started: tuple[str | None, str | None] | None = None  # set up by setup()
        self.validated: tuple[int, dict[str, float]] = (-1, {})  # the last validation's step
        self.saved: int | None = None  # the step of checkpoints/last.ckpt, once there is one

    # ---- set-up ---------------------------------------------------------------------------
    def setup(self) -> str | None:
        """Launch the processes, put the model and optimiser where they train, and restore the
        last checkpoint when resuming. Returns the checkpoint resumed from, if any."""
        fabric, cfg = self.fabric, self.cfg
        self._check_batches(launched=False)  # before the other ranks start, not after
        launch(fabric, cfg)  # DDP: starts the other ranks, which re-run this command
        self.signals.quiet = not fabric.is_global_zero
        # --freeze / --lora-rank: before the optimiser sees the parameters (and a checkpoint
        # is restored into them: a LoRA run's holds its adapters)
        adapted = adapt(self.module.model, cfg)
        # what --init is, for a LoRA run's adapter: read now (a resumed run: its checkpoint's)
        self.started = init_kind(cfg) if cfg.declares("lora_rank") and cfg.lora_rank else None
        if adapted and fabric.is_global_zero:
            print(f"note: {adapted}", file=sys.stderr, flush=True)
        if cfg.checkpoint_activations and not checkpoint_activations(self.module.model):
            if fabric.is_global_zero:  # a GRU translator, a graph network: no blocks
                print("note: --checkpoint-activations: this model has no Transformer blocks; "
                      "every activation is kept", file=sys.stderr, flush=True)
        if cfg.compile:
            # In place (nn.Module.compile), so parameter names and the saved weights are
            # unchanged; the torch model inside the TaskModule. On a CPU with eager's dropout
            # masks (compile_options), so its losses are the eager run's.
            self.module.model.compile(**compile_options(fabric.device.type))
        self.tables = exact_tables(self.module)  # before a *-true precision rounds them
        # bf16-true rounds the frozen weights too: kept exact, to be saved as they were
        self.frozen = frozen_weights(self.module) if cfg.precision == "bf16-true" else {}
        self.model = fabric.setup_module(self.module)
        # the step calls the task's loss by name through Fabric's wrapper: under DDP and FSDP
        # the call goes through their forward (gradient syncing, sharded parameters)
        self.model.mark_forward_method("loss")
        # after setup_module: under FSDP these are the sharded parameters (use_orig_params)
        params = optimizer_groups(self.model, cfg)
        self.optimizer, self.scheduler = self._optimizer(params)
        last = checkpoint_dir(self.run_dir) / "last.ckpt"
        state = self._checkpoint(last) if cfg.resume else None
        if state:
            self._groups_saved(state)
        self.optimizer = fabric.setup_optimizers(self.optimizer)
        if state:
            self._restore(last, state)
        if cfg.resume and fabric.is_global_zero:  # after every refusal of the checkpoint
            if _ACCEPTED[0] is not None:
                _ACCEPTED[0]()
            keep_previous_log(self.run_dir / "logs")  # (a refused --resume adds no file)
        if not state and fabric.is_global_zero:
            # again, now that the task has resolved its 'auto' settings (translate's
            # tokenisers): --resume then rebuilds what this run trains; a resumed run without
            # a checkpoint too (killed before it got here, its config.yaml lacks them)
            write_config(self.run_dir, cfg)
        if fabric.global_rank > 0 and self._rng_to_restore is None:  # its own dropout masks
            self._reseed = rank_seed(int(cfg.seed), fabric.global_rank, self.step)
        self.immediate = fabric.world_size == 1 and fabric.device.type == "cpu"
        self._bad = torch.zeros((), dtype=torch.long, device=fabric.device)  # step of a NaN
        self._bad_loss = torch.zeros((), device=fabric.device)
        self.device_batches = fabric.device.type != "cpu"
        self.scaler = self._scaler()
        return str(last) if state else None

    def _groups_saved(self, state: dict[str, Any]) -> None:
        """--resume: the optimiser's parameter groups as the checkpoint has them
        (docs/compatibility.md): one group (saved by a run without weight decay that trained
        with one), or a class token in the decayed group (saved before it was left out)."""
        saved = [len(g["params"]) for g in state["optimizer"]["param_groups"]]
        if len(saved) != len(self.optimizer.param_groups):
            self.optimizer, self.scheduler = self._optimizer(list(self.model.parameters()))
            return
        if saved == [len(g["params"]) for g in self.optimizer.param_groups]:
            return
        older = self._optimizer(optimizer_groups(self.model, self.cfg, decay_tokens=True))
        if saved == [len(g["params"]) for g in older[0].param_groups]:
            self.optimizer, self.scheduler = older

    def _scaler(self):
        """The gradient scaler of ``16-mixed`` on a GPU (None under every other precision)."""
        return getattr(self.fabric.strategy.precision, "scaler", None)

    def _optimizer(self, params):
        # Gradients are unscaled before they are clipped (or their norm is measured, at the
        # steps that log). Fabric refuses to do that for an optimiser that unscales inside its
        # own step (fused AdamW); the loop does it itself (train_step), except under FSDP,
        # whose clipping must be Fabric's: there, with a scaler, the per-tensor AdamW.
        sharded = self._scaler() is not None and self.cfg.strategy == "fsdp"
        return make_optimizer(params, self.cfg, model_dim=int(self.cfg.model_dim),
                              max_steps=self.max_steps, fused=not sharded)

    def _checkpoint(self, last: Path) -> dict[str, Any] | None:
        """``--resume``: the checkpoint, checked against the model before anything changes
        (a refused --resume leaves the run as it was); None when the run has none yet."""
        if not last.is_file():
            if self.fabric.is_global_zero:  # killed before its first checkpoint: nothing lost
                print(f"--resume: no checkpoint yet in {checkpoint_dir(self.run_dir)}; "
                      f"training from step 0", file=sys.stderr, flush=True)
            return None
        state = read_checkpoint(last)
        check_fits(last, state, self.module)
        check_epochs(self.cfg.epochs, self.max_steps, int(state["global_step"]))
        return state

    def _restore(self, last: Path, state: dict[str, Any]) -> None:
        """Weights, optimiser, schedule, the data's position, the step, the clock and (at the
        first batch) the random state of the checkpoint."""
        # the best so far first: it may refuse (a --monitor the checkpoint did not watch),
        # before any note on what the resumed run continues with
        if self.watch is not None and state.get("best") is not None:
            note = self.watch.load_state_dict(state["best"], str(last))
            if note and self.fabric.is_global_zero:
                print(f"note: {note}", file=sys.stderr, flush=True)
        if self.cfg.strategy == "fsdp":  # the sharded model and optimiser: via Fabric
            self.fabric.load(last, {"state_dict": self.model, "optimizer": self.optimizer},
                             strict=False, weights_only=True)
        else:
            self.module.load_state_dict(state["state_dict"])
            self.optimizer.load_state_dict(state["optimizer"])
        if state.get("lr_scheduler") is not None:
            note = restore_schedule(self.scheduler, state["lr_scheduler"],
                                    stretch=state.get("stretch_schedule", True))
            if note and self.fabric.is_global_zero:
                print(f"note: --resume: {note}", file=sys.stderr, flush=True)
        if state.get("train_loader") is not None and hasattr(self.train_loader, "load_state_dict"):
            self.train_loader.load_state_dict(state["train_loader"])
            note = getattr(self.train_loader, "dealing_note", lambda: None)()
            if note and self.fabric.is_global_zero:
                print(f"note: --resume: {note}", file=sys.stderr, flush=True)
            self._epoch_of_resumed()
        # a checkpoint saved before compile_seconds was kept: none compiled before
        self.step = self.saved = int(state["global_step"])
        self.clock = TrainClock(float(state["train_seconds"]),
                                compiled_before=float(state.get("compile_seconds", 0.0)))
        if self.frozen:  # the model was built anew: its frozen weights are the checkpoint's,
            # rounded; exact, where the checkpoint has them (one saved before: left rounded)
            self.frozen = frozen_float32(state)
        # this process's own (DDP: each draws its own dropout masks)
        self._rng_to_restore = rank_rng(state, self.fabric.global_rank, self.fabric.world_size)
        self.hits = int(state.get("early_stop_hits", 0))  # the early stop's streak so far
        saved = state.get("max_steps")  # the budget it was saved under; a raised one trains on
        if saved is not None and self.max_steps <= int(saved):
            self.stopped = self._stop_reached()
        if state.get("init_kind"):  # what --init was when the run started (DIR may be gone)
            self.started = tuple(state["init_kind"])
        # a signal stops a run before its step's validation: the resumed run validates that
        # step first, as the run would have (its best, --patience's count, the early stop);
        # a checkpoint written after it keeps its numbers, for metrics.json
        # (a checkpoint of before this key: validated as far as it can tell)
        validation = state.get("validation", {"step": self.step, "metrics": {}})
        self.validated = (int(validation["step"]), dict(validation["metrics"]))
        self._unvalidated = self._validates(self.step) and self.validated[0] != self.step

    def _epoch_of_resumed(self) -> None:
        """Once an epoch (no --val-every), resumed on other processes than the run's were
        first dealt out to: the steps of an epoch of the batches these keep (``kept``), as the
        run validated. Counted before the checkpoint told them, one process resuming two
        validated at other steps (3, 6 for 2, 4, 6), so --keep-best and --patience watched
        other validations than the uninterrupted run's."""
        loader = self.train_loader
        batches = getattr(loader, "all_batches", lambda: None)()
        if (not self._per_epoch or batches is None
                or getattr(loader, "dealt", None) in (None, self.fabric.world_size)):
            return
        self.val_every = max(1, min(epoch_steps(self.cfg, loader.kept(batches)), self.max_steps))

    def _stop_reached(self) -> str | None:
        """Why a restored run stops where its checkpoint is (the early stop's target reached
        at enough validations in a row, or --patience validations without a gain), else None.
        A run that stopped early is saved before its test split is scored: resumed after a
        Ctrl-C during that last validation or a kill during the test, it trained on past its
        stop, to other weights than the uninterrupted run's."""
        if self.stop_at is not None and self.hits >= self.stop_at.times:
            return self.stop_at.reason()
        if self.watch is not None and self.watch.exhausted():
            return self.watch.reason()
        return None

    # ---- the step -------------------------------------------------------------------------
    def _check_batches(self, *, launched: bool = True) -> None:
        """Every process takes a batch of its own each step: a training split of fewer
        batches than processes left one with none, and training looked for a batch forever
        (deaf to Ctrl-C, whose stop waits for a step). Refused before ``launch`` from the
        loader's batches of all processes (before launch it deals them to one), so that no
        other rank starts for a run refused; after it on every process at once (the batches
        of a rank where a launcher started the processes with their process group)."""
        if not hasattr(self.train_loader, "__len__"):
            return
        if not launched:
            world = processes(self.cfg)
            if world > 1 and len(self.train_loader) < world:
                self._refuse_batches(world, first=not later_process())
            return
        fewest = torch.tensor(len(self.train_loader), device=self.fabric.device)
        world = self.fabric.world_size
        if world > 1:
            import torch.distributed as dist

            dist.all_reduce(fewest, op=dist.ReduceOp.MIN)
        if int(fewest) == 0:
            self._refuse_batches(world, first=self.fabric.is_global_zero)

    def _refuse_batches(self, world: int, *, first: bool) -> None:
        if not first:
            raise SystemExit(2)  # rank 0 says why, once
        raise UsageError(f"--batch-size {self.cfg.batch_size}: the training split makes fewer "
                         f"batches than the {world} processes (--devices x --num-nodes), each of "
                         f"which takes one every step; lower --batch-size or run fewer processes"
                         if world > 1 else "the training split makes no batch")

    def run(self) -> None:
        """Train from ``self.step`` to ``max_steps``, or until a stop: ``stop_at``'s target
        reached at validation, a signal (the step is saved, then ``Interrupted``), or a
        non-finite loss (``NonFiniteLoss``)."""
        self._check_batches()
        self.progress.begin(self.step, draws=self.fabric.is_global_zero)
        if self.fabric.is_global_zero:  # the only rank that writes the log
            self.log.begin(self.step)
        self.stats.begin(self.seconds())
        if self._unvalidated:  # before the clock starts: it leaves validation out
            self._validate_step()
        self.model.train()
        while self.step < self.max_steps and self.stopped is None:
            for batches in self._steps_batches():
                self.clock.start()  # train_seconds count from the first step
                # --compile compiles in its first step, counted apart (compile_seconds)
                with self.clock.compiling() if self.to_compile else contextlib.nullcontext():
                    loss, logs = self.train_step(*batches)
                self.to_compile = False
                self._show(loss, logs)
                if self._told_to_stop():
                    self.save()
                    raise self.signals.stopped(f"interrupted at step {self.step} of "
                                               f"{self.max_steps}; continue with: "
                                               f"{self.signals.resume_hint}")
                # validation before the checkpoint of the same step: the checkpoint holds what
                # it decided (the best so far, --patience's count), which a resumed run,
                # starting after that step, would otherwise never see
                if self._validates(self.step):
                    with self.clock.paused():  # train_seconds leave validation out
                        self._validate_step()
                # the last step's checkpoint (and that of a step training stops at) is the one
                # ``fit`` writes after the loop: written here too, the same weights and
                # optimiser would be written twice
                if (self.checkpoint_every and self.step % self.checkpoint_every == 0
                        and self.step < self.max_steps and self.stopped is None):
                    self.save()
                if self.step >= self.max_steps or self.stopped is not None:
                    break
        self.progress.end(self.step, self.shown, self.stopped)

    def _steps_batches(self):
        """One pass over the training loader, as the batches of each step: --accumulate of
        them. Where an epoch is a pass over the training data, its last step takes the batches
        left (fewer; ``loss_shares`` weighs them as they are), so that --epochs N shows every
        example N times and an epoch has ``epoch_steps`` steps; an endless supply
        of fresh batches (``numbered_batches``) carries them over into its next "epoch"."""
        batches = self._carried
        self._carried = []
        for batch in self.train_loader:
            if self._rng_to_restore is not None:  # setting up drew numbers since the save
                restore_rng(self._rng_to_restore)
                self._rng_to_restore = None
            if self._reseed is not None:  # (after the loader's first batch, as the restore)
                torch.manual_seed(self._reseed)
                self._reseed = None
            batches.append(batch)
            if len(batches) == self.accumulate:
                yield batches
                batches = []
        if batches and self.passes:
            yield batches
        elif batches:
            self._carried = batches

    def _step_shares(self, batches: tuple) -> tuple[list, list]:
        """(each batch's share of this process's loss, the weight of its loss's gradient): the
        same list but under DDP, where the processes' targets are summed first (a collective
        every step), so that a process whose batches hold fewer targets (shorter replies, more
        padding) counts for less, as in one batch of all of them; DDP then averages the
        gradients over the processes. ``self._rank_weight``: this process's share of the
        step's targets times the processes (1: one process), for the logged mean. One batch
        on one process: [1], no count, no reduction on the device."""
        world = self.fabric.world_size
        if world == 1 and len(batches) == 1:
            return [1], [1]
        counts = [self.module.targets(batch) for batch in batches]
        shares = loss_shares(counts, self.dtype)
        if world == 1:
            return shares, shares
        mine = torch.as_tensor(sum(counts), dtype=self.dtype, device=self.fabric.device)
        total = mine.clone()  # torch's own collective: Fabric's waits at a barrier before it
        torch.distributed.all_reduce(total)  # (a sum; queued on the device, not waited for)
        self._rank_weight = mine * world / total
        return shares, [share * self._rank_weight for share in shares]

    def _validates(self, step: int) -> bool:
        """Whether the run validates after ``step`` steps."""
        return self.val_loader is not None and step > 0 and step % self.val_every == 0

    def _validate_step(self) -> None:
        """The validation after a step, and what it decides: an early stop, the best so far."""
        metrics = self.validate()
        self._check_target(metrics)
        self._watch(metrics)

    def train_step(self, *batches) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """One optimiser step on ``batches`` (one batch, or ``--accumulate`` of them), top to
        bottom; returns the loss and the task's other numbers (their means over the batches),
        still on the device (nothing here waits for the GPU: see the module's docstring).
        ``self.model`` is Fabric's wrapper of the ``TaskModule``."""
        fabric, optimizer, scaler = self.fabric, self.optimizer.optimizer, self.scaler
        if self.device_batches:
            batches = tuple(fabric.to_device(batch) for batch in batches)
        n, losses, logged = len(batches), [], []
        shares, weights = self._step_shares(batches)
        for i, batch in enumerate(batches):
            # DDP: the gradients are synced after the step's last batch only (its forward and
            # backward both inside, as DDP asks); one process: nothing to skip
            with fabric.no_backward_sync(self.model, enabled=i < n - 1):
                # forward and the task's loss, in the run's precision: autocast for bf16-mixed
                # and 16-mixed; for 64 and bf16-true, inputs and new tensors in the weights'
                # dtype; for 32, nothing. The numbers come out in float32.
                precision = fabric.strategy.precision
                with precision.forward_context():
                    computed, logs = self.model.loss(precision.convert_input(batch))
                loss, logs = precision.convert_output((computed, logs))
                self._watch_finite(loss)  # one CPU process: raises here, before the update
                # backward, through Fabric: DDP averages the gradients over the processes, and
                # under 16-mixed the loss is first multiplied by the scaler's scale (small
                # float16 gradients would otherwise round to zero). Each of N batches' loss is
                # weighted by its share of the step's targets: the gradients add up to those
                # of one batch of all N (x * 1 is x exactly: one batch trains as it always did).
                # --precision 64: through the float64 loss, not its float32 copy, whose
                # gradient would round each weight to float32
                fabric.backward((computed if self.dtype == torch.float64 else loss) * weights[i])
            losses.append(loss)
            logged.append(logs)
        loss, logs = _weighted(shares, losses, logged)
        self.stats.count(batches)
        # clipping the gradients' global norm to --grad-clip (0: no clipping); a step that logs
        # measures the norm even without clipping (a limit of inf scales by exactly 1)
        logs_step = self._logs(self.step + 1)
        max_norm, norm = self.grad_clip or (math.inf if logs_step else 0.0), None
        if max_norm and self.cfg.strategy == "fsdp":  # the norm over all shards: Fabric's
            norm = fabric.clip_gradients(self.model, self.optimizer, max_norm=max_norm,
                                         error_if_nonfinite=False)
        elif max_norm:
            if scaler is not None:  # 16-mixed: divide the scale out first
                scaler.unscale_(optimizer)
            params = [p for group in optimizer.param_groups for p in group["params"]]
            norm = torch.nn.utils.clip_grad_norm_(params, max_norm, error_if_nonfinite=False)
        if logs_step:  # the rate this step trains at, before the schedule moves it on
            self.stats.note(optimizer, norm)
        # the update, then the learning rate of the next step
        if scaler is not None:  # 16-mixed: skips a step whose gradients overflowed, and
            scaler.step(optimizer)  # lowers the scale then (raises it after a run of good ones)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.step += 1
        return loss, logs

    def _check_target(self, metrics: dict[str, float]) -> None:
        """After a validation: stop once ``stop_at``'s target was reached often enough in a
        row. Under DDP every rank decides together (one that stopped alone would hang the
        others); their metrics agree, as every rank validates on every batch."""
        if self.stop_at is None:
            return
        self.hits = self.stop_at.streak(self.hits, metrics)
        stop = self.hits >= self.stop_at.times
        if self.fabric.world_size > 1:
            stop = self.fabric.strategy.reduce_boolean_decision(stop, all=False)
        if stop:
            self.stopped = self.stop_at.reason()

    def _watch(self, metrics: dict[str, float]) -> None:
        """After a validation: a new best (with --keep-best, a copy of its weights, on the
        process that writes them), or one more validation without; stop when --patience
        such validations have gone by. Under DDP every rank decides together, as in
        ``_check_target``."""
        if self.watch is None:
            return
        keeps = self.watch.keep and self.fabric.is_global_zero
        self.watch.see(self.step, metrics, (lambda: cpu_copy(self.module.model)) if keeps else None)
        stop = self.watch.exhausted()
        if self.fabric.world_size > 1:
            stop = self.fabric.strategy.reduce_boolean_decision(stop, all=False)
        if stop and self.stopped is None:
            self.stopped = self.watch.reason()

    def _watch_finite(self, loss: torch.Tensor) -> None:
        """A non-finite loss: on one CPU process, raise before its gradients are applied;
        elsewhere, note the first step on the device (no synchronisation) for ``_check_finite``."""
        if self.immediate:
            value = loss.item()
            if not math.isfinite(value):
                self._non_finite(value, self.step + 1)
            return
        first = ~torch.isfinite(loss.detach()) & (self._bad == 0)
        self._bad = torch.where(first, self.step + 1, self._bad)
        self._bad_loss = torch.where(first, loss.detach().float(), self._bad_loss)

    def _check_finite(self) -> None:
        if self.immediate:
            return
        bad = self._bad
        if self.fabric.world_size > 1:
            bad = self.fabric.all_reduce(bad.clone(), reduce_op="max")
        if int(bad):
            self._non_finite(float(self._bad_loss), int(bad))

    def _non_finite(self, value: float, step: int) -> None:
        last = checkpoint_dir(self.run_dir) / "last.ckpt"
        kept = (f"the last good checkpoint is kept: {last} (--resume continues from it)"
                if last.is_file() else "no checkpoint had been written yet")
        raise NonFiniteLoss(f"the training loss became {value} at step {step}; stopped "
                            f"(lower --lr or raise --warmup); {kept}")

    def _show(self, loss: torch.Tensor, logs: dict[str, torch.Tensor]) -> None:
        """Read this step's numbers off the device only where they are logged or shown. Under
        DDP a logged row holds the mean over the processes (each trained on its own part of
        the step's batch): every rank takes part in that reduction, at the steps that log (a
        decision of the step alone, the same on every rank); the progress line, drawn by rank
        0 between them, shows rank 0's own."""
        if self._logs(self.step) and self.fabric.world_size > 1:
            loss, logs = self._mean_of_ranks(loss, logs)
        logged = self._logs(self.step) and self.fabric.is_global_zero
        shown = self.progress.reads_train_loss(self.step)
        if not (logged or shown):
            return
        if self.fabric.world_size == 1:
            self._check_finite()
        numbers = {"train_loss": float(loss.detach()),
                   **{f"train_{k}": float(v.detach()) for k, v in logs.items()}}
        self.shown["train_loss"] = numbers["train_loss"]
        if logged:
            seconds = self.seconds()  # after the loss was read: the device has caught up
            numbers.update(self.stats.row(seconds, processes=self.fabric.world_size))
            self.log.write(self.step, numbers, seconds=seconds)
        if shown:
            self.progress.show(self.step, self.shown)

    def _mean_of_ranks(self, loss: torch.Tensor, logs: dict[str, torch.Tensor]
                       ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The step's numbers averaged over the DDP processes, each weighed by its share of the
        step's targets (``_step_shares``; a collective: every rank)."""
        numbers = {"loss": loss.detach().float(),
                   **{k: v.detach().float() for k, v in logs.items()}}
        # by targets; back to float32 after a float64 weight (--precision 64), as one
        # process's rows are (``_weighted``)
        numbers = {k: (v * self._rank_weight).float() for k, v in numbers.items()}
        mean = self.fabric.all_reduce(numbers, reduce_op="mean")
        return mean.pop("loss"), mean

    def _logs(self, step: int) -> bool:
        """Whether the log has a training row after ``step`` steps."""
        return step % self.log_every == 0

    def _told_to_stop(self) -> bool:
        """Whether a signal asks to stop; under DDP, whether it reached any rank (every rank
        must save and stop at the same step, or the others wait for it forever)."""
        stop = self.signals.signum is not None
        if self.fabric.world_size > 1:
            stop = self.fabric.strategy.reduce_boolean_decision(stop, all=False)
        return stop

    @torch.no_grad()
    def validate(self) -> dict[str, float]:
        """The mean of each of ``step``'s numbers over the validation batches, weighted by
        batch size, and the split's sum of each of its sums and counts (``totals``), which
        the module's ``summarise`` divides out. Every rank sees every batch, so they agree
        with no reduction across ranks. The random state is put back as it was, so
        ``--val-every`` does not change the dropout masks training draws."""
        self._check_finite()
        rng = capture_rng()
        self.progress.validating(self.step, self.shown)
        self.model.eval()
        self.module.validation_start()
        totals: dict[str, torch.Tensor] = {}
        count = 0
        for i, batch in enumerate(self.val_loader):
            if self.limit_val_batches is not None and i >= self.limit_val_batches:
                break
            if self.device_batches:
                batch = self.fabric.to_device(batch)
            precision = self.fabric.strategy.precision  # as in train_step
            with precision.forward_context():
                loss, logs = self.model.loss(precision.convert_input(batch))
            loss, logs = precision.convert_output((loss, logs))
            n = batch_size(batch)
            for name, value in {"loss": loss, **logs}.items():
                weight = 1 if is_total(name) else n  # a sum or a count: added up as it is
                totals[name] = totals.get(name, 0) + value.detach().float() * weight
            count += n
        numbers = {k: float(v) if is_total(k) else float(v) / max(count, 1)
                   for k, v in totals.items()}
        # the ratios of the split's sums (a loss per target) and what is derived from its
        # counts (tag's entity F1), then what is measured on the whole split at once
        # (classify's macro F1, jets' AUC, translate's BLEU)
        metrics = {f"val_{k}": v for k, v in self.module.summarise(numbers).items()}
        with self.fabric.strategy.precision.forward_context():
            metrics.update(self.module.validation_end())
        self.model.train()
        restore_rng(rng)
        if self.fabric.is_global_zero and metrics:
            self.log.write(self.step, metrics, seconds=self.seconds())
        self.shown.update(metrics)
        self.validated = (self.step, metrics)
        self.progress.validating(self.step, self.shown, done=True)
        return metrics

    # ---- checkpoints ----------------------------------------------------------------------
    def seconds(self) -> float:
        """Training seconds since the first step, validation left out, across interruptions
        (the checkpoint keeps the earlier ones)."""
        return self.clock.seconds()

    def save(self) -> None:
        """``checkpoints/last.ckpt`` of this step, written whole or not at all (a temporary
        file renamed), and never of a run whose loss went non-finite."""
        self._check_finite()
        path = checkpoint_dir(self.run_dir) / "last.ckpt"
        temporary = partial_checkpoint(self.run_dir)
        loader = self.train_loader
        state = {"format": FORMAT, "global_step": self.step, "state_dict": self.model,
                 "optimizer": self.optimizer, "lr_scheduler": self.scheduler.state_dict(),
                 "rng": capture_rng(), "rng_ranks": capture_rng_ranks(),
                 "train_seconds": self.seconds(), "compile_seconds": self.clock.compile_seconds,
                 "train_loader": loader.state_dict() if hasattr(loader, "state_dict") else None,
                 "validation": {"step": self.validated[0], "metrics": self.validated[1]},
                 "early_stop_hits": self.hits, "init_kind": self.started,
                 "max_steps": self.max_steps}
        if self.watch is not None:  # the best so far, and its weights (training/best.py)
            state["best"] = self.watch.state_dict()
        if self.frozen:  # bf16-true: the frozen weights as float32, for model.safetensors
            state["frozen_float32"] = self.frozen
        if self.fabric.is_global_zero:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.fabric.save(temporary, state)
            if self.fabric.is_global_zero:
                # on the disk before it is named last.ckpt, whoever wrote it (under FSDP,
                # Lightning's own torch.save): a machine that crashed just after the rename
                # left a last.ckpt whose data never reached the disk
                sync(temporary)
        except BaseException as e:  # a full disk: no half-written file left taking its space
            temporary.unlink(missing_ok=True)
            stop = _interruption(e)
            if stop is not None:  # a second Ctrl-C, whatever torch.save raised on top of it
                raise stop from None
            raise naming(e, path)
        if self.fabric.is_global_zero:
            os.replace(temporary, path)
        self.saved = self.step
        self.fabric.barrier()


def _interruption(error: BaseException | None) -> Interrupted | None:
    """The ``Interrupted`` (a second signal) that ``error`` is, or was raised while handling:
    raised inside ``torch.save``'s zip writer, it made the writer fail on closing the
    half-written file, and that ``RuntimeError`` ("unexpected pos ...") replaced it, so that
    a second Ctrl-C during a checkpoint's write ended in a traceback and exit status 1."""
    while error is not None and not isinstance(error, Interrupted):
        error = error.__context__
    return error


def fit(module: TaskModule, train_loader, val_loader, cfg: RunSettings, run_dir: Path, *,
        max_steps: int, val_check_interval: int | None = None, stop_at: StopAt | None = None,
        limit_val_batches: int | None = None, tokenizer=None) -> FitResult:
    """Train ``module`` to ``max_steps``; with ``cfg.resume`` continue from the last
    checkpoint. Validates every ``val_check_interval`` steps (default: once an epoch; at most
    ``max_steps``, so that a run validates at least once) on at most ``limit_val_batches``
    batches of ``val_loader``; saves ``checkpoints/last.ckpt`` every
    ``cfg.checkpoint_every`` steps and at the end; with ``stop_at``, stops early once its
    target is reached; with ``cfg.patience``, after that many validations without improvement
    of ``cfg.monitor``. Afterwards the module is on the CPU with float32 weights, whatever
    device and ``--precision`` trained it: with ``cfg.keep_best`` the best validation's, else
    the last step's (the task then scores its test split on them). ``tokenizer`` (the
    task's, if it has one) is written to ``tokenizer.json`` before the first step, so that
    ``--checkpoint last`` reads an interrupted run (``finish`` writes it again, the same)."""
    loop = Loop(module, train_loader, val_loader, cfg, run_dir, max_steps=max_steps,
                val_check_interval=val_check_interval, stop_at=stop_at,
                limit_val_batches=limit_val_batches)
    ranks.where(lambda: _where_stopped(loop))
    try:
        return _fit(loop, module, train_loader, cfg, run_dir, max_steps, tokenizer)
    except BaseException as e:  # the ranks launched from here end before the run is reported
        # a rank died: named in one line, not gloo's traceback (one that torchrun or srun
        # started: its launcher names it)
        failure = ranks.failed(e) or ranks.elsewhere(e, launch_id())
        ranks.end(ranks.ENDING_GRACE if ranks.agreed(e) else 0.0)
        if failure is not None:
            raise failure from None
        raise


def _where_stopped(loop: Loop) -> str:
    """What the line of a rank that died while ``loop`` trained adds: the step, and where to
    go on from (before the first checkpoint: none; ``attnlab train`` removes the run and says
    so in the same line)."""
    if loop.saved is None:
        return f" at step {loop.step}, before the first checkpoint; the others were stopped"
    return (f" at step {loop.step}; the others were stopped; the last checkpoint is of step "
            f"{loop.saved}: continue with: {loop.signals.resume_hint}")


def _fit(loop: Loop, module: TaskModule, train_loader, cfg: RunSettings, run_dir: Path,
         max_steps: int, tokenizer) -> FitResult:
    """``fit`` once its ``Loop`` is built: launch, train, and hand back the weights."""
    resumed = loop.setup()
    if tokenizer is not None and loop.fabric.is_global_zero:
        tokenizer.save(Path(run_dir) / "tokenizer.json")
    note = warmup_note(cfg, max_steps)
    if note and loop.fabric.is_global_zero:
        print(f"warning: {note}", file=sys.stderr, flush=True)
    note = batch_note(train_loader, cfg.batch_size)
    if note and loop.fabric.is_global_zero:
        print(f"note: {note}", file=sys.stderr, flush=True)
    try:
        with loop.signals:
            loop.run()
            # The final state, so --resume of a finished run is a no-op. Every rank calls it
            # (it holds a barrier); only global rank 0 writes.
            loop.save()
    finally:
        loop.progress.end_line()  # an error starts on a line of its own
        loop.log.close()
    if loop.signals.signum is not None:  # the signal came during the last step's validation
        raise loop.signals.stopped(f"interrupted at the end of training (step {loop.step} "
                                   f"of {max_steps}); finish with: {loop.signals.resume_hint}")
    module.cpu()  # what follows (the test split, figures, saving) is plain torch on the CPU
    validation = keep_best(loop)
    if cfg.compile:  # ... and eager: each new shape of it would compile the model again
        module.model._compiled_call_impl = None
    back_to_float32(module, {**loop.tables, **loop.frozen})
    lora = lora_factors(module.model)  # --lora-rank: finish writes them as a peft adapter
    merge_lora(module.model)  # the saved model is an ordinary one ...
    module.model.requires_grad_(True)  # ... which knows nothing of what --freeze froze
    if validation is None:
        step, metrics = loop.validated
        validation = metrics if step == loop.step else {}
    watch = loop.watch
    return FitResult(loop.step, loop.seconds(), resumed, loop.fabric.is_global_zero,
                     validation=validation,
                     stopped=loop.stopped if loop.step < max_steps else None,
                     best=watch.summary() if watch is not None and watch.keep else {},
                     lora=lora, started=loop.started,
                     compile_seconds=loop.clock.compile_seconds if cfg.compile else None)


def watch_of(cfg: RunSettings) -> BestWatch | None:
    """The ``BestWatch`` of a run with --keep-best or --patience (None without either)."""
    if not cfg.keep_best and cfg.patience is None:
        return None
    return BestWatch(cfg.monitor, min_delta=cfg.min_delta, patience=cfg.patience,
                     keep=cfg.keep_best)


def keep_best(loop: Loop) -> dict[str, float] | None:
    """--keep-best, after training: the best validation's weights into the model (on the CPU,
    before the loop puts its float32 weights back and merges LoRA: the copy is of the weights
    as they trained), and that validation's numbers; None without --keep-best or on a process
    that keeps no copy (a DDP rank but 0, which writes nothing)."""
    watch = loop.watch
    if watch is None or not watch.keep or not loop.fabric.is_global_zero:
        return None
    if watch.weights is None:  # no validation gave a finite value
        print(f"warning: --keep-best: no validation measured a finite {watch.metric}; "
              f"model.safetensors holds the last step's weights", file=sys.stderr, flush=True)
        return None
    loop.module.model.load_state_dict(watch.weights)
    return watch.metrics


def resume_command(cfg: RunSettings, run_dir: Path) -> str:
    """The command that continues this run (its config.yaml holds every other setting)."""
    import shlex

    return f"attnlab train {cfg.task} --out {shlex.quote(str(run_dir))} --resume"


# Below this share of --lr the warm-up is said not to fit the budget. The translate defaults
# (warm-up 200 of 600 steps) reach 0.75; an lm run of 200 steps with warm-up 100 reaches 0.52.
WARMUP_PEAK_WARNING = 0.7


def batch_note(train_loader, batch_size: int) -> str | None:
    """A note when ``batch_size`` is more than the training examples an epoch of
    ``train_loader`` passes over (its ``examples``; None for an endless supply): each step
    trains on all of them, not on ``batch_size``, which config.yaml records as given."""
    rows = getattr(train_loader, "examples", None)
    if rows is None or rows >= batch_size:
        return None
    return (f"--batch-size {batch_size} is more than the {rows:,} training examples: each "
            f"step trains on all {rows:,}")


def warmup_note(cfg: RunSettings | OptimizerSettings | dict, max_steps: int) -> str | None:
    """A warning when the warm-up does not fit the step budget, so the learning rate never
    gets near its peak (an lm run of 200 steps with warm-up 100 peaked at half of --lr).
    ``cfg`` is read through ``OptimizerSettings.of`` (a run config, or a plain mapping).

    "Peak" is --lr for the cosine schedule. The course's rate is ``lr · f(e)`` with f = ½(1 +
    cos(π·e/max_steps)) · min(1, e/warmup): the decay starts at step 0, so the highest rate,
    near the end of the warm-up, is below --lr, and close to it only when the warm-up is a
    small part of the run (docs/schedules.md). The schedules that decay from the end of the
    warm-up (cosine with --min-lr, wsd, linear, constant) reach --lr where the warm-up fits.
    Noam's peak is its rate at step ``warmup``. The highest rate actually reached is read off
    the schedule itself (``schedule_lr``), step by step.
    """
    from ..schedulers import noam_factor, schedule_lr

    opt_cfg = OptimizerSettings.of(cfg)
    warmup, lr = max(1, int(opt_cfg.warmup)), float(opt_cfg.lr)
    if opt_cfg.schedule == "noam":
        # the model's width: the run config's (OptimizerSettings holds the optimiser's only)
        d_model = int(cfg["model_dim"] if isinstance(cfg, dict) else cfg.model_dim)
        if warmup <= max_steps:
            return None
        last = max_steps - 1  # the rate of the last step trained: steps are 0..max_steps-1
        reached = noam_factor(last, d_model, warmup, lr) / noam_factor(warmup, d_model, warmup, lr)
        return (f"--warmup {warmup} is longer than the {max_steps}-step budget: the Noam "
                f"schedule reaches {reached:.2f} of its peak; shorten --warmup or raise the budget")
    if not opt_cfg.warmup:
        return None
    # The factor falls after the warm-up, so the peak lies in steps 0..min(warmup, budget - 1)
    # (step max_steps is never trained: metrics.csv's last lr is step max_steps - 1's); at
    # most ~10,000 of them are looked at (a budget of 10^11 steps must not hang here).
    end = min(warmup, max_steps - 1)
    steps = [*range(0, end, max(1, end // 10_000)), end]
    peak, at = max((schedule_lr(opt_cfg.schedule, e, lr=1.0, warmup=warmup, max_iters=max_steps,
                                min_lr=None if opt_cfg.min_lr is None else opt_cfg.min_lr / lr,
                                cooldown=opt_cfg.cooldown), e) for e in steps)
    if peak >= WARMUP_PEAK_WARNING:
        return None
    # the step as logs/metrics.csv counts it (steps done: 1 is the first, at the schedule's e=0)
    return (f"--warmup {opt_cfg.warmup} with a {max_steps}-step budget: the learning rate peaks "
            f"at {peak:.2f} x --lr {lr:g} (step {at + 1}); shorten --warmup or raise the budget")


def finish(cfg: RunSettings, run_dir: Path, model: torch.nn.Module, metrics: dict[str, float],
           result: FitResult, *, tokenizer=None, quiet: bool = False) -> dict[str, float]:
    """Write model.safetensors, tokenizer.json, config.yaml and metrics.json (all atomic), then
    print a summary table. Only the global-zero process writes."""
    run_dir = Path(run_dir)
    # numbers, and lists and tables that say something about them (classify's classes with no
    # test example, its per-class scores)
    metrics = {k: v if isinstance(v, (list, str, dict)) else float(v)
               for k, v in metrics.items()}
    # the saved weights' validation (a task's own measurement of a key wins: lm's val_loss),
    # recorded but not printed: the summary stays the test split's numbers
    validation = {k: float(v) for k, v in result.validation.items() if k not in metrics}
    metrics.update(validation)
    metrics.update(result.best)  # --keep-best: which validation the weights are of
    if result.stopped is not None:
        metrics["stopped_early"] = result.stopped
    metrics.update(steps=int(result.steps), train_seconds=round(result.train_seconds, 3),
                   parameters=parameter_count(model))
    # how it trained, beside how long: config.yaml holds them too, but a reader comparing
    # runs' train_seconds reads this file (what --precision auto, or a CPU's stand-in for
    # 16-mixed, ran; whether compiled, and how long compiling took, left out of train_seconds)
    metrics.update(precision=str(cfg.precision), compile=bool(cfg.compile))
    if result.compile_seconds is not None:
        metrics["compile_seconds"] = round(result.compile_seconds, 3)
    metrics = readable(metrics)  # what metrics.json holds: 6 significant digits, not float noise
    if not result.is_global_zero:
        return metrics
    save_weights(model, run_dir / "model.safetensors")
    if result.lora:
        save_adapter(run_dir, cfg, model, result.lora, result.started)
    if tokenizer is not None:
        tokenizer.save(run_dir / "tokenizer.json")
    write_config(run_dir, cfg)
    write_metrics(run_dir / "metrics.json", metrics)
    if not quiet:
        print_summary(cfg.task, run_dir, {k: v for k, v in metrics.items() if k not in validation})
    return metrics


def print_summary(task: str, run_dir: Path, metrics: dict[str, float]) -> None:
    """The run's numbers for people: counts whole, scores to 4 decimals, a number below
    0.001 to 4 significant digits (a regression's test_mse of 1.6e-07 in years is no 0.0000),
    and one that is not finite as ``null``, as metrics.json writes it (a val_perplexity past
    the largest float printed ``inf`` above the note saying it is null).
    """
    numbers = {k: v for k, v in metrics.items()  # (compile, true or false, is no number)
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    width = max(map(len, numbers))
    if sys.stdout.isatty():  # apart from the progress above it; in a pipe or a file (`| head
        # -1`, a script reading the run's directory off the first line) the summary comes first
        print()
    print(f"{task} run: {run_dir}")
    for key, value in numbers.items():
        text = ("null" if not math.isfinite(value)
                else f"{value:,.0f}" if key in ("steps", "parameters", "best_step")
                else f"{value:.4g}" if 0 < abs(value) < 1e-3 else f"{value:.4f}")
        print(f"  {key:<{width}}  {text}")
    sys.stdout.flush()
