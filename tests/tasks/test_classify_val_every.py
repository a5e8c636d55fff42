"""``attnlab train classify --val-every N`` with N beyond the run's budget: the run still
validates at its last step, as reverse's run does (``min(--val-every, steps)``), so that
``--keep-best`` and ``--patience`` watch a validation instead of none (before, no validation
ran at all and the run ended with "no validation measured a finite val_loss", as if one had
given NaN)."""
import csv
import json

import pytest

from attnlab.cli import main
from tests.tasks.test_classify import write_csv

pytestmark = pytest.mark.slow  # trains a run through the CLI


def test_a_val_every_beyond_the_budget_validates_at_the_last_step(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "classify", "--data", str(write_csv(tmp_path / "r.csv", n=60)),
                 "--text-column", "review", "--label-column", "sentiment", "--out", str(out),
                 "--max-steps", "4", "--val-every", "50", "--keep-best", "--batch-size", "8",
                 "--warmup", "1", "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
                 "--dim-feedforward", "32", "--threads", "1"]) == 0
    assert "no validation measured" not in capsys.readouterr().err
    rows = list(csv.DictReader(open(out / "logs" / "metrics.csv")))
    assert [int(r["step"]) for r in rows if r.get("val_loss")] == [4]
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["best_step"], metrics["best_metric"]) == (4, "val_loss")
    assert "val_acc" in metrics and "val_f1" in metrics
