"""The LightningModule base every task's training module extends.

A subclass implements ``step(batch) -> (loss, logs)``; this class logs ``train_loss`` and
``val_loss`` (and the logs, prefixed ``val_``), and configures AdamW with a warm-up schedule
stepped every iteration: the course's cosine warm-up (``schedule: cosine``) or the paper's
Noam schedule (``schedule: noam``; then --lr is the Noam factor). After the fit the weights
are float32 whatever ``--precision`` trained them in (``Float32AfterFit``).
"""
from __future__ import annotations

from typing import Any

import lightning.pytorch as L
import torch

from ..schedulers import CosineWarmupScheduler, NoamScheduler

__all__ = ["TaskModule", "make_optimizer", "fuse_for", "Float32AfterFit", "CPUBatches", "logs_this_step"]


def logs_this_step(module: L.LightningModule) -> bool:
    """Whether ``training_step`` should ``self.log`` this step's training loss and metrics.

    One ``self.log`` costs Lightning 0.1-0.7 ms, up to a third of a small model's step
    (``benchmarks/train_loop.py``). With a logger and no progress bar, only the steps something
    reads need it: those the logger writes (when the step count after this step is a multiple
    of ``log_every_n_steps``) and those a callback reads ``train_loss`` at (a callback with a
    ``reads_train_loss(step)`` method, such as the progress lines). With a live progress bar, or
    no logger, every step.
    """
    trainer = module._trainer
    if trainer is None or trainer.progress_bar_callback is not None or not trainer.loggers:
        return True
    done = module.global_step + 1  # steps done once this one is
    if done % max(1, trainer.log_every_n_steps) == 0:
        return True
    return any(cb.reads_train_loss(done) for cb in trainer.callbacks
               if hasattr(cb, "reads_train_loss"))


# Devices with PyTorch's fused AdamW kernel (one kernel per parameter for the whole update).
FUSED_DEVICES = ("cpu", "cuda")


def _tensors(params: list) -> list[torch.Tensor]:
    """The tensors of a parameter list, which may hold parameter groups (dicts)."""
    out = []
    for p in params:
        if isinstance(p, dict):
            group = p["params"]
            out += [group] if isinstance(group, torch.Tensor) else list(group)
        else:
            out.append(p)
    return out


def fused_adamw_ok(params: list) -> bool:
    """Whether AdamW can take ``fused=True`` for these parameters (tensors or parameter
    groups): floating point, all on the CPU or all on CUDA. On the CPU it is 3.8-5x faster than
    the default per-tensor update (0.34 -> 0.07 ms a step for the reverse task's 20 tensors,
    1.71 -> 0.44 ms for the lm task's 52; benchmarks/RESULTS.md, adamw) and agrees with it to
    float32 rounding. (PyTorch before 2.4 has no CPU kernel: ``make_optimizer`` then falls
    back to the per-tensor update.)"""
    params = _tensors(params)
    devices = {p.device.type for p in params}
    return (len(devices) == 1 and devices <= set(FUSED_DEVICES)
            and all(p.is_floating_point() for p in params))


def fuse_for(module: L.LightningModule) -> bool:
    """Whether ``module``'s optimiser may be fused: not under a mixed precision, where
    Lightning refuses gradient clipping with an optimiser that unscales its own gradients."""
    trainer = module._trainer
    return trainer is None or "mixed" not in str(trainer.precision)


def make_optimizer(params, cfg: dict[str, Any], *, model_dim: int, max_steps: int,
                   fused: bool = True):
    """AdamW (with ``fused``, the fused kernel where PyTorch has it) and a per-step warm-up
    scheduler from the configuration."""
    schedule = cfg.get("schedule", "cosine")
    warmup = max(1, min(int(cfg.get("warmup", 100)), max_steps))
    wd = float(cfg.get("weight_decay", 0.0))
    params = list(params)
    fused = (fused and fused_adamw_ok(params)) or None  # None: PyTorch's per-tensor default
    noam = schedule == "noam"
    options = (dict(lr=1.0, betas=(0.9, 0.98), eps=1e-9) if noam
               else dict(lr=float(cfg["lr"])))
    try:
        opt = torch.optim.AdamW(params, weight_decay=wd, fused=fused, **options)
    except RuntimeError:  # a PyTorch without the fused kernel for this device
        if not fused:
            raise
        opt = torch.optim.AdamW(params, weight_decay=wd, **options)
    if noam:
        sched = NoamScheduler(opt, model_dim, warmup=warmup, factor=float(cfg["lr"]))
    else:
        sched = CosineWarmupScheduler(opt, warmup=warmup, max_iters=max(max_steps, warmup + 1))
    return opt, sched


class Float32AfterFit:
    """Mixin for a LightningModule: back to float32 weights once ``trainer.fit`` is done.

    ``--precision 64`` and ``bf16-true`` train float64 / bfloat16 weights (Lightning converts
    the module when the fit starts). What comes after the fit — the test split in plain torch,
    the figures, ``model.safetensors`` — then uses float32, the dtype ``attnlab.load``,
    ``predict`` and ``evaluate`` build, so ``metrics.json`` is what ``attnlab evaluate`` reports
    for the saved weights (bfloat16 -> float32 is exact; float64 -> float32 rounds to 24 bits).
    The mixed precisions keep float32 weights already: nothing changes for them.

    The tables a model computes rather than learns (non-persistent buffers: the sinusoidal
    positions, RoPE's angles, ALiBi's slopes) are put back as they were before the fit, not
    rounded through bfloat16: the test metrics in ``metrics.json`` are then those of the saved
    model, which ``attnlab.load`` rebuilds with exact tables.
    """

    def setup(self, stage: str) -> None:
        super().setup(stage)
        if stage == "fit":  # before Lightning converts the module to a --precision *-true dtype
            self._computed_tables = {name: b.detach().clone()
                                     for name, b in _computed_tables(self).items()
                                     if b.dtype == torch.float32}

    def on_fit_end(self) -> None:
        super().on_fit_end()
        if any(p.is_floating_point() and p.dtype != torch.float32 for p in self.parameters()):
            self.to(torch.float32)
            tables = _computed_tables(self)
            with torch.no_grad():
                for name, exact in getattr(self, "_computed_tables", {}).items():
                    if name in tables and tables[name].shape == exact.shape:
                        tables[name].copy_(exact)
        self._computed_tables = {}


def _computed_tables(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """``module``'s non-persistent floating-point buffers (not in its state dict), by name."""
    tables = {}
    for prefix, sub in module.named_modules():
        for name in sub._non_persistent_buffers_set:
            buffer = sub._buffers.get(name)
            if buffer is not None and buffer.is_floating_point():
                tables[f"{prefix}.{name}" if prefix else name] = buffer
    return tables


class CPUBatches:
    """Mixin for a LightningModule: batches stay as they are on the CPU (Lightning would walk
    every batch to move each tensor to the device it is already on)."""

    def transfer_batch_to_device(self, batch, device, dataloader_idx):
        if device.type == "cpu":
            return batch
        return super().transfer_batch_to_device(batch, device, dataloader_idx)


class TaskModule(CPUBatches, Float32AfterFit, L.LightningModule):
    """Wraps a torch model for training; ``cfg`` is the run's configuration dict.

    Args:
        model: the task's torch model (saved as ``model.safetensors`` after training).
        cfg: the run configuration (``lr``, ``warmup``, ``schedule``, ``model_dim`` ...).
        max_steps: the step budget, for the schedule.
    """

    def __init__(self, model: torch.nn.Module, cfg: dict[str, Any], max_steps: int) -> None:
        super().__init__()
        self.model = model
        self.cfg = dict(cfg)
        self.max_steps = max_steps

    def step(self, batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        raise NotImplementedError

    def training_step(self, batch, batch_idx):
        loss, logs = self.step(batch)
        if not logs_this_step(self):  # nothing reads this step's logs
            return loss
        self.log("train_loss", loss, prog_bar=True)
        for k, v in logs.items():
            self.log(f"train_{k}", v)
        return loss

    def validation_step(self, batch, batch_idx):
        loss, logs = self.step(batch)
        self.log("val_loss", loss, prog_bar=True, sync_dist=True)
        for k, v in logs.items():
            self.log(f"val_{k}", v, prog_bar=True, sync_dist=True)

    def configure_optimizers(self):
        opt, sched = make_optimizer(self.parameters(), self.cfg,
                                    model_dim=int(self.cfg.get("model_dim", 64)),
                                    max_steps=self.max_steps, fused=fuse_for(self))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
