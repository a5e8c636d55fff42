"""Learning-rate schedules at step 0, at the end of warm-up, and at the end."""
import math

import pytest
import torch

from attnlab.schedulers import CosineWarmupScheduler, NoamScheduler


def _optimizer(lr):
    return torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))], lr=lr)


def _advance(optimizer, scheduler, steps):
    for _ in range(steps):
        optimizer.step()
        scheduler.step()
    return optimizer.param_groups[0]["lr"]


def test_cosine_warmup_factor_at_start_end_of_warmup_and_end():
    sched = CosineWarmupScheduler(_optimizer(1e-3), warmup=100, max_iters=2000)
    assert sched.get_lr_factor(0) == 0.0
    at_peak = 0.5 * (1 + math.cos(math.pi * 100 / 2000))  # warm-up ends on the cosine curve
    assert sched.get_lr_factor(100) == pytest.approx(at_peak, rel=1e-12)
    assert sched.get_lr_factor(50) == pytest.approx(0.5 * 0.5 * (1 + math.cos(math.pi * 50 / 2000)))
    assert sched.get_lr_factor(2000) == pytest.approx(0.0, abs=1e-12)
    factors = [sched.get_lr_factor(e) for e in range(100, 2001, 100)]
    assert factors == sorted(factors, reverse=True)  # decays after warm-up


def test_cosine_warmup_sets_the_optimizer_lr():
    optimizer = _optimizer(1e-3)
    sched = CosineWarmupScheduler(optimizer, warmup=10, max_iters=100)
    assert optimizer.param_groups[0]["lr"] == 0.0  # the first step trains at lr 0
    lr = _advance(optimizer, sched, 10)
    assert lr == pytest.approx(1e-3 * 0.5 * (1 + math.cos(math.pi * 10 / 100)), rel=1e-9)
    assert _advance(optimizer, sched, 90) == pytest.approx(0.0, abs=1e-15)


def test_noam_schedule_warmup_peak_and_decay():
    d_model, warmup = 512, 4000
    optimizer = _optimizer(1.0)
    sched = NoamScheduler(optimizer, d_model, warmup=warmup)
    at_one = d_model ** -0.5 * warmup ** -1.5
    assert sched.get_lr_factor(0) == pytest.approx(at_one, rel=1e-12)  # step 0 counts as 1
    assert optimizer.param_groups[0]["lr"] == pytest.approx(at_one, rel=1e-12)
    peak = d_model ** -0.5 * warmup ** -0.5
    assert sched.get_lr_factor(warmup) == pytest.approx(peak, rel=1e-12)
    assert max(sched.get_lr_factor(s) for s in range(0, 20000, 250)) == pytest.approx(peak)
    # after warm-up lr ∝ step^-0.5: four times the steps, half the rate
    assert sched.get_lr_factor(4 * warmup) == pytest.approx(peak / 2, rel=1e-12)
    assert sched.get_lr_factor(2 * warmup) < sched.get_lr_factor(warmup)
    assert _advance(optimizer, sched, 10) == pytest.approx(10 * at_one, rel=1e-9)  # at step 10


def test_noam_factor_scales_the_rate():
    sched = NoamScheduler(_optimizer(1.0), 256, warmup=100, factor=2.0)
    assert sched.get_lr_factor(100) == pytest.approx(2.0 * 256 ** -0.5 * 100 ** -0.5)


@pytest.mark.parametrize("make,message", [
    (lambda o: CosineWarmupScheduler(o, warmup=0, max_iters=10),
     "warmup must be a positive integer, got 0"),
    (lambda o: NoamScheduler(o, d_model=-4), "d_model must be a positive integer, got -4"),
])
def test_bad_schedule_arguments(make, message):
    with pytest.raises(ValueError, match=message):
        make(_optimizer(1.0))
