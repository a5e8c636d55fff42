"""A --val-every beyond a run's budget: every task validates at its last step (the training
loop caps the interval at --max-steps), so that --keep-best and --patience watch one
validation. Before, graph, tag, jets and anomaly runs validated not at all and ended with "no
validation measured a finite val_loss", as if a validation had given NaN (classify had its own
cap, reverse and lm theirs)."""
import csv
import json

import pytest

from attnlab.cli import main
from tests.tasks.test_tag import capitalised, write_conll

pytestmark = pytest.mark.slow  # trains runs through the CLI

SMALL = ["--max-steps", "4", "--val-every", "50", "--keep-best", "--threads", "1"]


def _tag_args(tmp_path):
    data = write_conll(tmp_path / "caps.conll", capitalised(60))
    return ["tag", "--data", str(data), "--model-dim", "16", "--num-heads", "2",
            "--num-layers", "1", "--dim-feedforward", "16", "--warmup", "1"]


@pytest.mark.parametrize("args", [lambda tmp: ["graph"], _tag_args], ids=["graph", "tag"])
def test_a_val_every_beyond_the_budget_validates_at_the_last_step(tmp_path, capsys, args):
    out = tmp_path / "run"
    assert main(["train", *args(tmp_path), "--out", str(out), *SMALL]) == 0
    assert "no validation measured" not in capsys.readouterr().err
    rows = list(csv.DictReader(open(out / "logs" / "metrics.csv")))
    assert [int(r["step"]) for r in rows if r.get("val_loss")] == [4]
    assert json.loads((out / "metrics.json").read_text())["best_step"] == 4
