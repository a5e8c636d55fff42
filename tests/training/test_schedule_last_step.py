"""What docs/schedules.md says of a run's last step: a run of ``--max-steps N`` trains its step s
at the schedule's rate of e = s - 1, so its last step one step of the decay above ``--min-lr``,
and the schedule is left at ``--min-lr`` when training stops (the docs said the run decayed to
``--min-lr`` "at the last step", which its metrics.csv never showed)."""
import csv

import pytest
import torch

from attnlab.cli import main
from attnlab.schedulers import schedule_lr

SCHEDULE = dict(lr=3e-3, warmup=5, max_iters=30, min_lr=3e-4, cooldown=0.8)  # the docs' example


@pytest.mark.slow
def test_the_last_step_trains_one_decay_step_above_the_floor_and_the_schedule_ends_on_it(
        tmp_path):
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), "--max-steps", "30", "--warmup", "5",
                 "--schedule", "wsd", "--cooldown", "0.8", "--lr", "3e-3", "--min-lr", "3e-4",
                 "--train-size", "32", "--val-size", "8", "--test-size", "8", "--model-dim",
                 "8", "--num-heads", "1", "--batch-size", "8", "--threads", "1"]) == 0
    rates = {int(r["step"]): float(r["lr"]) for r in csv.DictReader(open(out / "logs" /
                                                                        "metrics.csv"))
             if r["lr"]}
    assert sorted(rates) == list(range(1, 31))  # every step logged
    for step, rate in rates.items():
        assert rate == pytest.approx(schedule_lr("wsd", step - 1, **SCHEDULE), rel=1e-12), step
    assert rates[30] == pytest.approx(4.125e-4) and rates[30] > 3e-4  # as the docs print
    saved = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    assert saved["optimizer"]["param_groups"][0]["lr"] == pytest.approx(3e-4)  # the floor, left
