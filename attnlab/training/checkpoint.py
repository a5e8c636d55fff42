"""Training checkpoints: what ``checkpoints/last.ckpt`` holds, how it is read back, and the
random state that makes a resumed run draw what an uninterrupted one draws.

A checkpoint is a plain dict, written by ``Fabric.save`` (FSDP gathers the whole model on rank
0 first) to a temporary name and renamed, so a kill while writing leaves the previous one:

    format          2
    global_step     optimiser steps done
    state_dict      the TaskModule's weights (keys ``model.<the task model's names>``)
    optimizer       AdamW's state; lr_scheduler: the schedule's
    rng             the random generators' state after that step (``capture_rng``)
    rng_ranks       under DDP: each process's, in rank order (``capture_rng_ranks``): the
                    processes draw their own dropout masks (``rank_seed``)
    train_seconds   training time so far, across interruptions
    train_loader    the position in the training data (``attnlab.data.ResumableBatches``)
    best            with --keep-best or --patience: the best validation so far and the
                    validations since it, with --keep-best its weights too
                    (``attnlab.training.best.BestWatch.state_dict``)
    early_stop_hits the validations in a row that reached the task's early-stop target
    max_steps       the step budget it was written under: a run that stopped early there
                    (--patience, the early stop's target) and resumes with the same budget
                    stays stopped
    validation      the last validation's step and numbers; a step it is not at validates
                    first when resumed (a signal stops a run before its step's validation)
    init_kind       a --lora-rank run's (what --init was, its model_type) as it started
                    (``attnlab.training.adapt.init_kind``), for its adapter; None otherwise

It is read with ``torch.load(weights_only=True)``: only tensors and plain containers are rebuilt,
so a poisoned file raises instead of running its payload. A checkpoint without a ``format`` key
is in Lightning Trainer's layout, which holds the same things under other keys;
``read_checkpoint`` converts it to the current format, so such a run continues
(docs/compatibility.md).
"""
from __future__ import annotations

import hashlib
import pickle
from pathlib import Path
from typing import Any

import torch

from ..errors import UsageError
from ..runs import remove_left

__all__ = ["checkpoint_dir", "partial_checkpoint", "remove_partial_checkpoint",
           "resumes_from_checkpoint", "saved_tokenizer_file", "read_checkpoint", "check_fits",
           "check_epochs", "capture_rng", "capture_rng_ranks", "rank_rng", "rank_seed",
           "restore_rng", "restore_schedule", "frozen_float32", "FORMAT"]

FORMAT = 2  # 1: Lightning's Trainer (no "format" key)


def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def partial_checkpoint(run_dir: Path) -> Path:
    """Where ``last.ckpt`` is written before it is renamed: ``checkpoints/.last.ckpt.partial``,
    whole only once renamed. A process killed while writing it (SIGKILL, out of memory, a
    node lost) leaves it there, as large as a checkpoint."""
    return checkpoint_dir(run_dir) / ".last.ckpt.partial"


def remove_partial_checkpoint(run_dir: Path, *, held: bool = True) -> str | None:
    """Remove the ``partial_checkpoint`` a killed save left in ``run_dir`` (never read: a
    resumed run continues from ``last.ckpt``), while this process holds the run directory
    (``commands.preflight.claim``), so that no save of another process is writing it. Where
    it is not ``held`` (a file system without locks: NFS), or cannot be removed (a read-only
    ``checkpoints/``), the file is named, not removed. Returns the note that says so, or None
    where there was none.

    Examples:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     partial_checkpoint(d).parent.mkdir()
        ...     _ = partial_checkpoint(d).write_bytes(b"half a checkpoint")
        ...     remove_partial_checkpoint(d).endswith(
        ...         "(17 bytes), the checkpoint a stopped save was writing")
        True
    """
    path = partial_checkpoint(run_dir)
    if path.is_symlink() or not path.is_file():  # (a link or a directory: not ours)
        return None
    return remove_left([path], run_dir, held=held,
                       left_by="a save that was stopped while writing it",
                       removed="the checkpoint a stopped save was writing")


def resumes_from_checkpoint(cfg, run_dir: Path) -> bool:
    """Whether the run continues from its ``checkpoints/last.ckpt`` (``--resume`` of a run that
    wrote one). A run resumed before its first checkpoint starts as a new run does: from
    --init's weights (read again and checked), with the same seed, so it equals a run never
    interrupted. Each task's runtime asks this, never ``cfg.resume`` alone, for its start."""
    return bool(cfg.resume) and (checkpoint_dir(run_dir) / "last.ckpt").is_file()


def saved_tokenizer_file(cfg, run_dir: Path) -> Path | None:
    """A resumed run's ``tokenizer.json`` (``fit`` writes it before the first step): a run
    resumed before its first checkpoint takes --init's weights again but this tokeniser, not
    --init's files (init_sha256 pins the weights only). None for a new run, or one killed
    before it saved its tokeniser."""
    path = Path(run_dir) / "tokenizer.json"
    return path if cfg.resume and path.is_file() else None


def check_epochs(epochs: int | None, max_steps: int, done: int) -> None:
    """``--resume`` with an ``--epochs`` whose steps (``max_steps``: ``epochs`` times the task's
    batches per epoch, known once its data is loaded) are fewer than the ``done`` steps of the
    checkpoint is refused, as ``--max-steps`` below them is before the run starts: it
    would stop at once, test the model and record the smaller budget in place of the run's.

    Examples:
        >>> check_epochs(2, 64, 40)
        >>> check_epochs(1, 32, 40)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        attnlab.errors.UsageError: --epochs 1 (32 steps) is below the 40 steps this run has ...
    """
    if not epochs or done <= max_steps:
        return
    per_epoch = max(1, max_steps // epochs)
    raise UsageError(f"--epochs {epochs} ({max_steps} steps) is below the {done} steps this run "
                     f"has done (an epoch is {per_epoch} steps); give at least --epochs "
                     f"{-(-done // per_epoch)}, or start a new run with another --out")


def capture_rng() -> dict[str, Any]:
    """The state of torch's generators (the CPU's, and CUDA's where it is in use)."""
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def capture_rng_ranks() -> list[dict[str, Any]] | None:
    """Every process's ``capture_rng``, in rank order, under ``torch.distributed`` (a
    collective: every rank calls it); None for one process."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return None
    states: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(states, capture_rng())
    return states


def rank_rng(state: dict[str, Any], rank: int, world: int) -> dict[str, Any] | None:
    """The random state a checkpoint's process ``rank`` of ``world`` continues from: its own
    where the checkpoint holds each process's and as many processes resume it; else rank 0's
    for rank 0 and None for the others (a checkpoint of one process, of before ``rng_ranks``,
    or resumed on another number of processes, which cannot draw as the run would have
    anyway): they draw from ``rank_seed``, as at a run's start, not from rank 0's state,
    which would give them rank 0's dropout masks.

    Examples:
        >>> saved = {"rng": "r0", "rng_ranks": ["r0", "r1"]}
        >>> rank_rng(saved, 1, 2), rank_rng(saved, 1, 3), rank_rng({"rng": "r0"}, 0, 2)
        ('r1', None, 'r0')
    """
    ranks = state.get("rng_ranks")
    if ranks is not None and len(ranks) == world:
        return ranks[rank]
    return state.get("rng") if rank == 0 else None


def rank_seed(seed: int, rank: int, step: int) -> int:
    """The seed of DDP process ``rank`` (above 0) for its own random draws from ``step`` on:
    its dropout masks. Every process starts from the run's ``--seed``, so every process builds
    the same initial weights; were they to go on drawing from it, every process would draw the
    same dropout masks for batches of the same shape (all of them, in the generated tasks), and
    the processes' batches, which one process accumulating them would drop out independently,
    would share their masks. The data's order is not drawn from it: each loader has its own
    generator, seeded from the run's seed, so that the processes share one order of batches.

    Examples:
        >>> rank_seed(1, 1, 0) == rank_seed(1, 1, 0) != rank_seed(1, 2, 0) != rank_seed(1, 1, 6)
        True
    """
    digest = hashlib.sha256(f"attnlab rank seed {seed} {rank} {step}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1  # torch.manual_seed takes below 2**63


def restore_rng(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def restore_schedule(scheduler, saved: dict[str, Any], *, stretch: bool = True) -> str | None:
    """Load a checkpoint's ``lr_scheduler`` state into ``scheduler`` (built for this run's
    budget), ending where this budget ends: a budget raised on resume (--max-steps, --epochs)
    stretches the decay to the new last step, as the config.yaml it records says, rather than
    keeping the old end (past it the course's cosine climbed back up, and the decays to a
    floor trained on at the floor). Returns the note that says so, or None when the end is
    this budget's. ``stretch=False`` keeps the saved end (a Trainer's checkpoint continues as
    the Trainer continued it: docs/compatibility.md).

    A cosine saved before a warm-up as long as the run was kept as given (it was cut to the
    budget, and the cosine ended one step later: the saved warm-up is shorter than the
    run's) is of the same budget: it continues as it would have, unchanged. One saved since,
    ending one step past this budget, is of a budget lowered by one, and ends with this one.

    Examples:
        >>> from attnlab.schedulers import CosineWarmupScheduler
        >>> opt = lambda: torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
        >>> old = CosineWarmupScheduler(opt(), warmup=20, max_iters=21)  # --warmup 100, 20 steps
        >>> restore_schedule(CosineWarmupScheduler(opt(), warmup=100, max_iters=20),
        ...                  old.state_dict()) is None
        True
        >>> kept = CosineWarmupScheduler(opt(), warmup=100, max_iters=21)  # 21 steps, kept
        >>> restore_schedule(CosineWarmupScheduler(opt(), warmup=100, max_iters=20),
        ...                  kept.state_dict())
        'the learning-rate schedule now ends at step 20, with the budget (it ended at step 21)'
        >>> restore_schedule(CosineWarmupScheduler(opt(), warmup=100, max_iters=40),
        ...                  old.state_dict())
        'the learning-rate schedule now ends at step 40, with the budget (it ended at step 21)'
    """
    from ..schedulers import CosineWarmupScheduler

    end = getattr(scheduler, "max_num_iters", None)  # Noam's has no end
    ends = {end}
    older = saved.get("warmup", getattr(scheduler, "warmup", 0)) < getattr(scheduler, "warmup", 0)
    if older and isinstance(scheduler, CosineWarmupScheduler) and end is not None:
        ends.add(max(end, min(scheduler.warmup, end) + 1))  # the rule before the kept warm-up
    scheduler.load_state_dict(saved)
    if not stretch or end is None or scheduler.max_num_iters in ends:
        return None
    note = (f"the learning-rate schedule now ends at step {end}, with the budget (it ended at "
            f"step {scheduler.max_num_iters})")
    scheduler.max_num_iters = end
    # the rate of the next step, as the schedule now gives it (the checkpoint's is the old
    # end's); the scheduler's own step sets it from the step after
    rates = scheduler.get_lr()
    for group, rate in zip(scheduler.optimizer.param_groups, rates):
        group["lr"] = rate
    scheduler._last_lr = rates
    return note


def read_checkpoint(path: Path, *, flag: str = "--resume") -> dict[str, Any]:
    """The checkpoint at ``path`` in the current format; ``UsageError`` (naming ``flag``, the
    option that reads it, and the file) for one that is truncated, corrupt, carries code or is
    not an attnlab training checkpoint."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError,
            AttributeError, TypeError) as e:
        if isinstance(e, pickle.UnpicklingError) and "GLOBAL" in str(e):  # a class or function
            why = "it holds objects other than weights, which could run code when loaded"
        else:
            why = f"truncated or corrupt: {type(e).__name__}"
        raise UsageError(f"{flag}: refusing checkpoint {path}: {why}") from None
    if not isinstance(state, dict) or "state_dict" not in state:
        raise UsageError(f"{flag}: {path} is not an attnlab training checkpoint")
    if state.get("format") == FORMAT:
        return state
    if "format" in state:
        raise UsageError(f"{flag}: {path} is a checkpoint of format {state['format']!r}, "
                         f"which this attnlab does not read (it reads {FORMAT} and Lightning's "
                         f"Trainer's); continue it with the attnlab that wrote it")
    return _from_trainer(path, state, flag)


def frozen_float32(state: dict[str, Any]) -> dict[str, torch.Tensor]:
    """A ``bf16-true`` checkpoint's frozen weights (``--freeze``, those under ``--lora-rank``)
    as the run keeps them, float32 and exact, by the TaskModule's names: its ``state_dict``
    holds them rounded to bfloat16. Empty for another precision's checkpoint, or one saved
    before they were kept (whose rounded weights are all there is).

    ``--resume`` continues with them and ``model.safetensors`` holds them; a command reading
    the checkpoint (``--checkpoint last``) puts them over its ``state_dict`` likewise.
    """
    return dict(state.get("frozen_float32") or {})


def _from_trainer(path: Path, state: dict[str, Any], flag: str = "--resume") -> dict[str, Any]:
    """A checkpoint in Lightning Trainer's layout, in the current format. In that layout the
    per-element tasks' weights may lack the ``model.`` prefix of the TaskModule's keys (the
    Trainer trained their module itself), the data's position is in the fit loop's state, and
    the random state and clock are in the state of attnlab's callbacks."""
    fit_loop = state.get("loops", {}).get("fit_loop", {}).get("state_dict", {})
    loader = (fit_loop.get("combined_loader") or [None])[0]
    missing = [what for what, value in (("the position in the training data", loader),
                                        ("the optimiser's state", state.get("optimizer_states")),
                                        ("the step count", state.get("global_step")))
               if value is None]
    if missing:
        raise UsageError(f"{flag}: {path} was written by Lightning's Trainer and lacks "
                         f"{missing[0]}, so the run cannot continue as it would have; "
                         f"start it again with another --out")
    weights = state["state_dict"]
    if not any(k.startswith("model.") for k in weights):
        weights = {f"model.{k}": v for k, v in weights.items()}
    callbacks = state.get("callbacks", {})
    return {"format": FORMAT, "global_step": int(state["global_step"]), "state_dict": weights,
            "optimizer": state["optimizer_states"][0],
            "lr_scheduler": (state.get("lr_schedulers") or [None])[0],
            "rng": callbacks.get("_RandomState"),
            "train_seconds": float(callbacks.get("_TrainClock", {}).get("seconds", 0.0)),
            "train_loader": loader,
            # the Trainer kept the schedule's end when the budget was raised: so does this
            "stretch_schedule": False}


def check_fits(path: Path, state: dict[str, Any], module: torch.nn.Module) -> None:
    """``UsageError`` unless the checkpoint's weights fit ``module`` (the model config.yaml
    builds now), naming the first tensor that does not and both shapes."""
    saved, built = state["state_dict"], module.state_dict()
    wrong = [f"{k.removeprefix('model.')} is {tuple(saved[k].shape)} there, {tuple(v.shape)} here"
             for k, v in built.items()
             if k in saved and hasattr(saved[k], "shape") and saved[k].shape != v.shape]
    if wrong:
        more = f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""
        raise UsageError(f"--resume: {path} does not fit the model its config.yaml builds "
                         f"now: {wrong[0]}{more}; was config.yaml edited, or did a setting "
                         f"'auto' choose differently than when the run started?")
