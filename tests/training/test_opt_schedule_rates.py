"""The rate of every step, as a practitioner prints it for 20 steps and checks it by hand:
nanoGPT's cosine to --min-lr and wsd, each with a warm-up, for AdamW's groups and Muon's
(the same factor times --muon-lr, so Muon's floor is --muon-lr × --min-lr / --lr, as
docs/schedules.md says). Exact to float rounding (rtol 1e-12)."""
import math

import pytest
import torch

from attnlab.models import CausalLM
from attnlab.models.configs import CausalLMConfig
from attnlab.training.module import make_optimizer, optimizer_groups

N, W, LR, MIN_LR, MUON_LR = 20, 4, 1e-3, 1e-4, 2e-3


def _by_hand(schedule: str, e: int) -> float:
    """docs/schedules.md's formulas, written out: warm-up e / W, then the decay."""
    if e < W:
        return e / W
    m = MIN_LR / LR
    if schedule == "cosine":
        return m + (1 - m) * 0.5 * (1 + math.cos(math.pi * (e - W) / (N - W)))
    start = N - 0.3 * N  # wsd, --cooldown 0.3: the last 6 steps decay
    return 1 - (1 - m) * min(1.0, max(0.0, (e - start) / (N - start)))


@pytest.mark.parametrize("schedule", ["cosine", "wsd"])
def test_every_steps_rate_is_the_documented_formula_for_adamw_and_muon(schedule):
    model = CausalLM(CausalLMConfig(vocab_size=20, model_dim=16, num_heads=2, num_layers=1))
    settings = {"lr": LR, "warmup": W, "schedule": schedule, "min_lr": MIN_LR,
                "cooldown": 0.3 if schedule == "wsd" else None, "optimizer": "muon",
                "muon_lr": MUON_LR, "weight_decay": 0.1}
    opt, sched = make_optimizer(optimizer_groups(model, settings), settings, model_dim=16,
                                max_steps=N)
    for e in range(N):
        f = _by_hand(schedule, e)
        for group in opt.param_groups:
            want = (MUON_LR if group["muon"] else LR) * f
            assert group["lr"] == pytest.approx(want, rel=1e-12, abs=1e-18), (e, group["muon"])
        opt.step()
        sched.step()
    # after the last step: the floor, Muon's a share min_lr / lr of its own peak
    assert {g["muon"]: g["lr"] for g in opt.param_groups} == pytest.approx(
        {False: MIN_LR, True: MUON_LR * MIN_LR / LR}, rel=1e-12)
