"""Learning-rate schedules, as pure functions of the step.

Cosine warm-up (the course):  f(e) = ½(1 + cos(π·e / max_iters)), times e / warmup while e ≤ warmup.
Noam (Vaswani et al., 2017, eq. 3):
    lr = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5), step 0 treated as 1.
Both are ``LambdaLR``-style schedulers stepped once per optimiser step (not per epoch).
"""
from __future__ import annotations

import math

from torch import optim

__all__ = ["CosineWarmupScheduler", "NoamScheduler", "cosine_warmup_factor", "noam_factor"]


def cosine_warmup_factor(step: int, warmup: int, max_iters: int) -> float:
    """The course's multiplier of the base learning rate at step ``step``."""
    lr_factor = 0.5 * (1 + math.cos(math.pi * step / max_iters))
    if step <= warmup:
        lr_factor *= step / warmup
    return lr_factor


def noam_factor(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The Noam learning rate itself (multiply a base lr of 1.0)."""
    step = max(step, 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def _check(name: str, value: int) -> None:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


class CosineWarmupScheduler(optim.lr_scheduler._LRScheduler):
    """Linear warm-up to the base lr, then cosine decay to 0 at ``max_iters``.

    Args:
        optimizer: the wrapped optimizer; its lr is the peak learning rate.
        warmup: warm-up steps.
        max_iters: steps until the factor reaches 0.

    Examples:
        >>> model = torch.nn.Linear(4, 2)
        >>> opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        >>> sched = CosineWarmupScheduler(opt, warmup=100, max_iters=2000)  # sched.step() per batch
        >>> for _ in range(100): opt.step(); sched.step()
        >>> round(sched.get_last_lr()[0], 6)  # the end of warm-up: the peak, times the cosine
        0.000994
    """

    def __init__(self, optimizer: optim.Optimizer, warmup: int, max_iters: int) -> None:
        _check("warmup", warmup)
        _check("max_iters", max_iters)
        self.warmup, self.max_num_iters = warmup, max_iters
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        lr_factor = self.get_lr_factor(epoch=self.last_epoch)
        return [base_lr * lr_factor for base_lr in self.base_lrs]

    def get_lr_factor(self, epoch: int) -> float:
        return cosine_warmup_factor(epoch, self.warmup, self.max_num_iters)


class NoamScheduler(optim.lr_scheduler._LRScheduler):
    """The paper's schedule: lr = factor·d_model^-0.5·min(step^-0.5, step·warmup^-1.5).

    The schedule sets the absolute value: set the optimizer's lr to 1.0 (a group's own lr
    multiplies it, as Muon's ``--muon-lr`` / ``--lr`` does under ``--optimizer muon``).

    Args:
        optimizer: the wrapped optimizer.
        d_model: model width.
        warmup: warm-up steps (4000 in the paper).
        factor: overall multiplier.

    Examples:
        >>> params = torch.nn.Linear(4, 2).parameters()
        >>> sched = NoamScheduler(torch.optim.Adam(params, lr=1.0, betas=(0.9, 0.98)), d_model=512)
        >>> round(sched.get_last_lr()[0], 9)  # step 0 counts as step 1: 512^-0.5 · 4000^-1.5
        1.75e-07
    """

    def __init__(self, optimizer: optim.Optimizer, d_model: int, warmup: int = 4000,
                 factor: float = 1.0) -> None:
        _check("d_model", d_model)
        _check("warmup", warmup)
        self.d_model, self.warmup, self.factor = d_model, warmup, factor
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        lr = self.get_lr_factor(self.last_epoch)
        return [base_lr * lr for base_lr in self.base_lrs]

    def get_lr_factor(self, epoch: int) -> float:
        return noam_factor(epoch, self.d_model, self.warmup, self.factor)
