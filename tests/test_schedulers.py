"""Learning-rate schedules at step 0, at the end of warm-up, and at the end."""
import math

import pytest
import torch

from attnlab.schedulers import CosineWarmupScheduler, NoamScheduler, WarmupDecayScheduler


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
    (lambda o: CosineWarmupScheduler(o, warmup=-1, max_iters=10),
     "warmup must be an integer >= 0, got -1"),
    (lambda o: NoamScheduler(o, d_model=-4), "d_model must be a positive integer, got -4"),
])
def test_bad_schedule_arguments(make, message):
    with pytest.raises(ValueError, match=message):
        make(_optimizer(1.0))


# ---- the schedules that decay from the end of warm-up to --min-lr (issue 40) ---------------
# Values computed by hand: W warm-up steps, N steps, floor m = min_lr / lr.

def test_cosine_to_min_lr_is_nanogpts_get_lr_at_named_steps():
    from attnlab.schedulers import cosine_decay_factor

    f = lambda e: cosine_decay_factor(e, 10, 110, floor=0.1)  # noqa: E731
    assert f(0) == 0.0 and f(5) == 0.5  # the warm-up: e / W
    assert f(10) == 1.0  # the peak: the decay starts where the warm-up ends
    assert f(60) == pytest.approx(0.55, abs=1e-12)  # halfway: (1 + 0.1) / 2
    # a quarter of the way: 0.1 + 0.9 * ½(1 + cos(π/4)) = 0.1 + 0.9 * 0.8535534 = 0.8681981
    assert f(35) == pytest.approx(0.8681981, abs=1e-7)
    assert f(110) == pytest.approx(0.1, abs=1e-12) and f(500) == pytest.approx(0.1, abs=1e-12)


def test_linear_decay_at_named_steps():
    from attnlab.schedulers import linear_decay_factor

    f = lambda e: linear_decay_factor(e, 10, 110, floor=0.1)  # noqa: E731
    assert (f(0), f(5), f(10)) == (0.0, 0.5, 1.0)
    assert f(60) == pytest.approx(0.55) and f(85) == pytest.approx(0.325)  # 1 - 0.9 * 3/4
    assert f(110) == pytest.approx(0.1) and f(200) == pytest.approx(0.1)
    assert linear_decay_factor(0, 0, 100) == 1.0  # no warm-up: the first step at the peak


def test_wsd_holds_the_peak_then_decays_over_the_last_share():
    from attnlab.schedulers import wsd_factor

    f = lambda e: wsd_factor(e, 10, 100, 0.1, cooldown=0.2)  # noqa: E731
    assert (f(0), f(5), f(10)) == (0.0, 0.5, 1.0)
    assert f(50) == 1.0 and f(80) == 1.0  # stable until the last 20 of the 100 steps
    assert f(90) == pytest.approx(0.55) and f(95) == pytest.approx(0.325)
    assert f(100) == pytest.approx(0.1)
    # a cooldown longer than the steps after the warm-up starts decaying at the warm-up's end
    assert wsd_factor(10, 10, 100, cooldown=0.95) == 1.0
    assert wsd_factor(55, 10, 100, cooldown=0.95) == pytest.approx(0.5)


def test_constant_warms_up_then_holds():
    from attnlab.schedulers import constant_factor

    assert [constant_factor(e, 4) for e in (0, 2, 4, 1000)] == [0.0, 0.5, 1.0, 1.0]


def test_warmup_decay_scheduler_sets_each_groups_lr():
    p, q = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))
    optimizer = torch.optim.SGD([{"params": [p]}, {"params": [q], "lr": 1e-2}], lr=1e-3)
    sched = WarmupDecayScheduler(optimizer, "cosine", warmup=10, max_iters=110, min_lr=1e-4)
    assert optimizer.param_groups[0]["lr"] == 0.0
    assert _advance(optimizer, sched, 10) == pytest.approx(1e-3)
    assert _advance(optimizer, sched, 50) == pytest.approx(5.5e-4)  # (1e-3 + 1e-4) / 2
    assert _advance(optimizer, sched, 50) == pytest.approx(1e-4)
    # the second group ends at the same share of its own peak: a tenth
    assert optimizer.param_groups[1]["lr"] == pytest.approx(1e-3)


@pytest.mark.parametrize("make,message", [
    (lambda o: WarmupDecayScheduler(o, "noam", warmup=1, max_iters=10),
     "schedule must be one of cosine, wsd"),
    (lambda o: WarmupDecayScheduler(o, "linear", warmup=1, max_iters=10, min_lr=2.0),
     r"min_lr must be in \[0, the peak"),
    # a cooldown of 0 (or less) put the rate at the floor from the end of the warm-up, one of
    # 1 or more decayed from there like linear: both were accepted silently
    (lambda o: WarmupDecayScheduler(o, "wsd", warmup=1, max_iters=10, cooldown=0.0),
     r"cooldown must be strictly between 0 and 1, got 0.0"),
    (lambda o: WarmupDecayScheduler(o, "wsd", warmup=1, max_iters=10, cooldown=1.5),
     r"cooldown must be strictly between 0 and 1, got 1.5"),
    (lambda o: WarmupDecayScheduler(o, "cosine", warmup=1, max_iters=10, cooldown=0.5),
     r"cooldown \(0.5\) is the decay share of the wsd schedule, not of 'cosine'"),
    (lambda o: WarmupDecayScheduler(o, "constant", warmup=1, max_iters=10, min_lr=0.5),
     r"min_lr \(0.5\) with the constant schedule"),
])
def test_bad_decay_arguments(make, message):
    with pytest.raises(ValueError, match=message):
        make(_optimizer(1.0))


def test_a_run_without_min_lr_keeps_the_courses_cosine_and_with_it_gets_nanogpts():
    """Every run made before --min-lr trained with the course's cosine (decaying from step 0):
    resuming it must rebuild that schedule, not nanoGPT's."""
    from attnlab.training.module import make_optimizer

    params = [torch.nn.Parameter(torch.zeros(2))]
    _, old = make_optimizer(params, {"lr": 1e-3, "warmup": 10, "schedule": "cosine"},
                            model_dim=8, max_steps=100)
    assert type(old) is CosineWarmupScheduler
    _, new = make_optimizer(params, {"lr": 1e-3, "warmup": 10, "schedule": "cosine",
                                     "min_lr": 1e-4}, model_dim=8, max_steps=100)
    assert isinstance(new, WarmupDecayScheduler) and new.get_lr_factor(10) == 1.0
    _, wsd = make_optimizer(params, {"lr": 1e-3, "warmup": 0, "schedule": "wsd", "min_lr": 0.0,
                                     "cooldown": 0.5}, model_dim=8, max_steps=100)
    assert wsd.get_lr_factor(0) == 1.0 and wsd.get_lr_factor(75) == pytest.approx(0.5)


@pytest.mark.parametrize("schedule", ["cosine", "noam"])
def test_a_warmup_longer_than_the_budget_trains_the_rates_plot_lr_and_the_warning_read(schedule):
    """make_scheduler once cut the warm-up to the budget (and the cosine's length to one step
    past it): --warmup 100 --max-steps 30 trained at up to 0.27 x --lr while lr_schedule.png
    drew, and the warning said, 0.08; the course's TransformerPredictor(warmup=100,
    max_iters=50) ran another schedule than the course's CosineWarmupScheduler."""
    from attnlab.schedulers import schedule_lr
    from attnlab.training.module import make_optimizer

    params = [torch.nn.Parameter(torch.zeros(2))]
    settings = {"lr": 1e-2, "warmup": 100, "schedule": schedule}
    _, sched = make_optimizer(params, settings, model_dim=32, max_steps=30)
    for step in (1, 10, 13, 29, 30):
        drawn = schedule_lr(schedule, step, lr=1e-2, warmup=100, max_iters=30, d_model=32)
        assert sched.get_lr_factor(step) * (1.0 if schedule == "noam" else 1e-2) == \
            pytest.approx(drawn, rel=1e-12), step



@pytest.mark.parametrize("schedule", ["cosine", "noam", "wsd", "linear", "constant"])
def test_warmup_0_trains_the_first_step_at_the_peak_with_every_schedule(schedule):
    """--warmup 0 is no warm-up: the first optimiser step trains at --lr (Noam: its peak,
    step 0 counting as 1). The course's cosine read it as a warm-up of one step and trained
    step 0 at rate 0 (metrics.csv's first row: lr 0.0), while wsd, linear and constant began
    at the peak."""
    from attnlab.schedulers import noam_factor, schedule_lr
    from attnlab.training.module import make_optimizer

    params = [torch.nn.Parameter(torch.zeros(2))]
    settings = {"lr": 1e-2, "warmup": 0, "schedule": schedule}
    opt, _ = make_optimizer(params, settings, model_dim=16, max_steps=20)
    peak = noam_factor(1, 16, 1, 1e-2) if schedule == "noam" else 1e-2
    assert opt.param_groups[0]["lr"] == pytest.approx(peak, rel=1e-12)
    assert schedule_lr(schedule, 0, lr=1e-2, warmup=0, max_iters=20, d_model=16) == \
        pytest.approx(peak, rel=1e-12)
