"""--resume with a --max-steps lowered, but not below the steps done: the run ends at the new
budget, with its learning-rate schedule ending there too, and says so (docs/cli.md, Resume)."""
import csv
import json

import pytest
import yaml

from attnlab.cli import main
from attnlab.schedulers import schedule_lr

from .conftest import TINY_REVERSE
from .test_trust_train import crash_after

pytestmark = pytest.mark.slow  # trains runs


def test_a_budget_lowered_on_resume_ends_the_run_and_its_schedule_there(tmp_path, monkeypatch,
                                                                        capsys):
    out = tmp_path / "run"
    argv = ["train", "reverse", "--out", str(out), *TINY_REVERSE, "--threads", "1"]
    crash_after(monkeypatch, 15, argv)  # of 30 steps, its checkpoint at step 10
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(out), "--resume", "--max-steps", "20"]) == 0
    assert ("note: --resume: the learning-rate schedule now ends at step 20, with the budget (it "
            "ended at step 30)") in capsys.readouterr().err
    assert json.loads((out / "metrics.json").read_text())["steps"] == 20
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["max_steps"] == 20
    rows, first = ([(int(row["step"]), float(row["lr"]))
                    for row in csv.DictReader((out / "logs" / name).open()) if row.get("lr")]
                   for name in ("metrics.csv", "metrics.part1.csv"))
    assert [step for step, _ in rows] == sorted({step for step, _ in rows})  # each step once
    # up to its checkpoint, the log is the first process's, as it logged it
    kept = [(step, lr) for step, lr in first if step <= 10]
    assert kept and [(step, lr) for step, lr in rows if step <= 10] == kept
    logged = [(step, lr) for step, lr in rows if step > 10]  # the resumed process's steps
    assert logged and logged[-1][0] == 20
    for step, lr in logged:  # the rate a step trains at is the schedule's after step - 1
        expected = schedule_lr("cosine", step - 1, lr=cfg["lr"], warmup=cfg["warmup"],
                               max_iters=20)
        assert lr == pytest.approx(expected, rel=1e-6), step
