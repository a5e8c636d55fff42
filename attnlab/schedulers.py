"""Learning-rate schedules, as pure functions of the step.

Cosine warm-up (the course):  f(e) = ½(1 + cos(π·e / max_iters)), times e / warmup while e ≤ warmup.
Noam (Vaswani et al., 2017, eq. 3):
    lr = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5), step 0 treated as 1.

The schedules that warm up to the peak and then fall to a floor (``--min-lr``), as multipliers
of the peak lr; W warm-up steps, N steps in all, m = min_lr / lr, p the share of the decay done:
    every one while e < W:  f(e) = e / W
    cosine (nanoGPT's get_lr):  f = m + (1 - m) · ½(1 + cos(π·p)),  p = (e - W) / (N - W)
    linear:                     f = 1 - (1 - m) · p,                p = (e - W) / (N - W)
    wsd (warm-up, stable, decay; Hu et al., 2024, MiniCPM): f = 1 until the last F·N steps,
                                f = 1 - (1 - m) · p,                p = (e - (N - F·N)) / (F·N)
                                (a warm-up past N - F·N: p = (e - W) / (N - W), as linear's)
    constant:                   f = 1
p is held in [0, 1]: after step N the rate stays at the floor.
All are ``LambdaLR``-style schedulers stepped once per optimiser step (not per epoch).
"""
from __future__ import annotations

import math

from torch import optim

# --schedule's choices that warm up and decay to --min-lr (cosine does so with --min-lr given;
# without, it is the course's ``cosine_warmup_factor``), and wsd's default decay share
from .settings import DECAY_SCHEDULES as DECAYS, WSD_COOLDOWN

__all__ = ["CosineWarmupScheduler", "NoamScheduler", "WarmupDecayScheduler", "DECAYS",
           "cosine_warmup_factor", "noam_factor", "cosine_decay_factor", "linear_decay_factor",
           "wsd_factor", "constant_factor", "decay_factor", "schedule_lr"]


def cosine_warmup_factor(step: int, warmup: int, max_iters: int) -> float:
    """The course's multiplier of the base learning rate at step ``step``; ``warmup`` 0 is
    none: step 0 trains at the cosine's 1, not at 0 (the course's e / W, read as e ≤ W, gave
    ``--warmup 0`` a first step at rate 0).

    Examples:
        >>> cosine_warmup_factor(0, 0, 100), cosine_warmup_factor(5, 10, 100) < 0.5
        (1.0, True)
    """
    lr_factor = 0.5 * (1 + math.cos(math.pi * step / max_iters))
    if step < warmup:  # at step == warmup, e / W is 1
        lr_factor *= step / warmup
    return lr_factor


def noam_factor(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The Noam learning rate itself (multiply a base lr of 1.0)."""
    step = max(step, 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def _progress(step: int, start: float, end: float) -> float:
    """The share of the way from ``start`` to ``end`` that ``step`` has gone, held in [0, 1]."""
    if end <= start:
        return 1.0
    return min(1.0, max(0.0, (step - start) / (end - start)))


def cosine_decay_factor(step: int, warmup: int, max_iters: int, floor: float = 0.0) -> float:
    """nanoGPT's ``get_lr`` as a multiplier of the peak: linear warm-up over ``warmup`` steps,
    then a cosine from 1 down to ``floor`` (min_lr / lr) over the steps after the warm-up.
    Unlike the course's ``cosine_warmup_factor`` the decay starts where the warm-up ends, so
    the peak is reached. (nanoGPT's code warms up as (e + 1) / (W + 1); attnlab as the course,
    e / W.)

    Examples:
        >>> cosine_decay_factor(10, 10, 110), cosine_decay_factor(60, 10, 110, floor=0.1)
        (1.0, 0.55)
    """
    if step < warmup:
        return step / warmup
    p = _progress(step, warmup, max_iters)
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * p))


def linear_decay_factor(step: int, warmup: int, max_iters: int, floor: float = 0.0) -> float:
    """Linear warm-up, then a straight line from 1 down to ``floor`` at ``max_iters``.

    Examples:
        >>> linear_decay_factor(5, 10, 110), linear_decay_factor(60, 10, 110)
        (0.5, 0.5)
    """
    if step < warmup:
        return step / warmup
    return 1 - (1 - floor) * _progress(step, warmup, max_iters)


def wsd_factor(step: int, warmup: int, max_iters: int, floor: float = 0.0, *,
               cooldown: float = 0.2) -> float:
    """Warm-up, stable, decay: linear warm-up, the peak held, then a straight line down to
    ``floor`` over the last ``cooldown`` share of the ``max_iters`` steps. A run can be
    continued from before its decay, and the decay is where the loss drops most.

    Examples:
        >>> wsd_factor(50, 10, 100, cooldown=0.2), wsd_factor(90, 10, 100, cooldown=0.2)
        (1.0, 0.5)
    """
    if step < warmup:
        return step / warmup
    decay_steps = cooldown * max_iters
    return 1 - (1 - floor) * _progress(step, max(warmup, max_iters - decay_steps), max_iters)


def constant_factor(step: int, warmup: int) -> float:
    """Linear warm-up, then the peak to the end.

    Examples:
        >>> constant_factor(3, 4), constant_factor(400, 4)
        (0.75, 1.0)
    """
    return step / warmup if step < warmup else 1.0


def decay_factor(schedule: str, step: int, *, warmup: int, max_iters: int, floor: float = 0.0,
                 cooldown: float | None = None) -> float:
    """The multiplier of the peak lr at ``step`` of the warm-up-and-decay schedule named
    ``schedule`` (one of ``DECAYS``); ``floor`` is min_lr / lr, ``cooldown`` wsd's share.

    Examples:
        >>> decay_factor("wsd", 95, warmup=0, max_iters=100, cooldown=0.1)
        0.5
    """
    if schedule == "cosine":
        return cosine_decay_factor(step, warmup, max_iters, floor)
    if schedule == "linear":
        return linear_decay_factor(step, warmup, max_iters, floor)
    if schedule == "wsd":
        return wsd_factor(step, warmup, max_iters, floor,
                          cooldown=WSD_COOLDOWN if cooldown is None else cooldown)
    if schedule == "constant":
        return constant_factor(step, warmup)
    raise ValueError(f"schedule must be one of {', '.join(DECAYS)}, got {schedule!r}")


def schedule_lr(schedule: str, step: int, *, lr: float, warmup: int, max_iters: int,
                min_lr: float | None = None, cooldown: float | None = None,
                d_model: int = 512) -> float:
    """The learning rate at ``step`` of the schedule ``attnlab train --schedule`` names, from
    the run's settings: Noam (``lr`` its factor), the course's cosine (cosine without
    ``min_lr``), or a warm-up-and-decay schedule ending at ``min_lr`` (``decay_factor``).
    What ``plot lr``, a run's lr_schedule.png and the warm-up warning draw and read.

    Examples:
        >>> schedule_lr("linear", 60, lr=1e-3, warmup=10, max_iters=110, min_lr=1e-4)
        0.00055
    """
    if schedule == "noam":
        return noam_factor(step, d_model, max(1, warmup), lr)
    if schedule == "cosine" and min_lr is None:
        return lr * cosine_warmup_factor(step, warmup, max_iters)
    floor = (min_lr or 0.0) / lr
    return lr * decay_factor(schedule, step, warmup=warmup, max_iters=max_iters, floor=floor,
                             cooldown=cooldown)


def _check(name: str, value: int) -> None:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _check_warmup(warmup: int) -> None:
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")


def _check_decay(schedule: str, min_lr: float, cooldown: float | None) -> None:
    """``cooldown`` is wsd's share of the steps, strictly between 0 and 1 (0 or less would put
    the rate at the floor from the end of the warm-up); ``min_lr`` is no floor of constant's.
    Both would otherwise be silently unused or misread, as ``attnlab train`` refuses them."""
    if cooldown is not None and schedule != "wsd":
        raise ValueError(f"cooldown ({cooldown!r}) is the decay share of the wsd schedule, "
                         f"not of {schedule!r}")
    if cooldown is not None and not (isinstance(cooldown, (int, float)) and 0 < cooldown < 1):
        raise ValueError(f"cooldown must be strictly between 0 and 1, got {cooldown!r}")
    if schedule == "constant" and min_lr:
        raise ValueError(f"min_lr ({min_lr!r}) with the constant schedule, which holds the "
                         f"peak lr to the end")


class CosineWarmupScheduler(optim.lr_scheduler._LRScheduler):
    """Linear warm-up to the base lr, then cosine decay to 0 at ``max_iters``.

    Args:
        optimizer: the wrapped optimizer; its lr is the peak learning rate.
        warmup: warm-up steps (0: none, the first step at the base lr).
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
        _check_warmup(warmup)
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


class WarmupDecayScheduler(optim.lr_scheduler._LRScheduler):
    """Linear warm-up to the base lr, then ``schedule``'s decay to ``min_lr`` at ``max_iters``
    (``decay_factor``): nanoGPT's cosine, a straight line, warm-up-stable-decay, or constant.

    Args:
        optimizer: the wrapped optimizer; its lr is the peak learning rate.
        schedule: "cosine", "linear", "wsd" or "constant".
        warmup: warm-up steps (0: none, the first step at the peak).
        max_iters: the step where the decay ends.
        min_lr: the rate at the end, for a group whose lr is ``peak_lr``; a group with another
            lr ends at the same share of it (min_lr / peak_lr).
        peak_lr: the lr ``min_lr`` is a share of (default: the first group's).
        cooldown: wsd's share of the steps that decay, strictly between 0 and 1 (default
            0.2).

    Raises:
        ValueError: for a schedule not in ``DECAYS``, a negative warmup, max_iters < 1,
            min_lr outside [0, peak_lr] or above 0 with "constant", or a cooldown outside
            (0, 1) or given with a schedule other than "wsd".

    Examples:
        >>> opt = torch.optim.AdamW(torch.nn.Linear(4, 2).parameters(), lr=1e-3)
        >>> sched = WarmupDecayScheduler(opt, "cosine", warmup=10, max_iters=110, min_lr=1e-4)
        >>> for _ in range(60): opt.step(); sched.step()
        >>> round(sched.get_last_lr()[0], 9)  # halfway down the cosine: (1e-3 + 1e-4) / 2
        0.00055
    """

    def __init__(self, optimizer: optim.Optimizer, schedule: str, *, warmup: int,
                 max_iters: int, min_lr: float = 0.0, peak_lr: float | None = None,
                 cooldown: float | None = None) -> None:
        if schedule not in DECAYS:
            raise ValueError(f"schedule must be one of {', '.join(DECAYS)}, got {schedule!r}")
        _check_warmup(warmup)
        _check("max_iters", max_iters)
        peak = optimizer.param_groups[0]["lr"] if peak_lr is None else peak_lr
        if not 0 <= min_lr <= peak:
            raise ValueError(f"min_lr must be in [0, the peak lr {peak:g}], got {min_lr!r}")
        _check_decay(schedule, min_lr, cooldown)
        self.schedule, self.warmup, self.max_num_iters = schedule, warmup, max_iters
        self.floor, self.cooldown = min_lr / peak if peak else 0.0, cooldown
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        lr_factor = self.get_lr_factor(self.last_epoch)
        return [base_lr * lr_factor for base_lr in self.base_lrs]

    def get_lr_factor(self, epoch: int) -> float:
        return decay_factor(self.schedule, epoch, warmup=self.warmup,
                            max_iters=self.max_num_iters, floor=self.floor,
                            cooldown=self.cooldown)
