"""--keep-best under two DDP processes on CPU (gloo): a tag run whose model.safetensors holds the
weights of the validation metrics.json names, as its own log shows them.

Every rank validates on the whole split (``Loop.validate``), so the log's numbers are the
split's; ``evaluate --data VAL`` scores the saved weights on the same sentences, and
``--checkpoint last`` the last step's: each must give the accuracy the log has at its step.
The validation file is made to get worse as training goes on (its names are tagged O, which
training teaches the model not to do), so that the best validation is not the last and the
two sets of weights differ.
"""
import csv
import json

import pytest

from attnlab.cli import main

from .conftest import train_ddp, write_people

pytestmark = pytest.mark.slow  # trains with two DDP processes

STEPS = 12


def _val_rows(run):
    """{step: (val_loss, val_acc)} of the run's log."""
    rows = csv.DictReader(open(run / "logs" / "metrics.csv"))
    return {int(r["step"]): (float(r["val_loss"]), float(r["val_acc"])) for r in rows
            if r.get("val_loss")}


def _accuracy(run, val, capsys, *extra):
    capsys.readouterr()
    assert main(["evaluate", str(run), "--data", str(val), *extra]) == 0
    return json.loads(capsys.readouterr().out)["test_accuracy"]


def test_ddp_keep_best_saves_the_weights_of_the_best_validation_the_log_shows(tmp_path, capsys):
    data = write_people(tmp_path / "d.conll", 160)  # names are B-PER
    val = tmp_path / "v.conll"
    val.write_text("".join(f"{a} O\n{b} O\nlives O\n\n" for a, b in
                           [("John", "Rome"), ("Mary", "Paris"), ("Rome", "John")] * 10))
    out = tmp_path / "ddp"
    proc = train_ddp("tag", out, "--data", str(data), "--val", str(val), "--max-steps",
                     str(STEPS), "--val-every", "2", "--keep-best", "--model-dim", "16",
                     "--num-heads", "2", "--num-layers", "1", "--dim-feedforward", "16",
                     "--batch-size", "8", "--lr", "3e-2", "--warmup", "2", "--threads", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    log = _val_rows(out)
    assert sorted(log) == list(range(2, STEPS + 1, 2))  # a row per validation, rank 0's alone
    best = min(log[s][0] for s in log)
    first_best = min(s for s in log if log[s][0] == best)  # an equal value is no improvement
    assert (metrics["best_metric"], metrics["best_step"]) == ("val_loss", first_best)
    assert metrics["best_value"] == pytest.approx(best, abs=1e-6)
    assert first_best < STEPS and log[first_best][1] != log[STEPS][1], log  # see the doc
    assert _accuracy(out, val, capsys) == pytest.approx(log[first_best][1], abs=1e-6)
    assert _accuracy(out, val, capsys, "--checkpoint", "last") == pytest.approx(
        log[STEPS][1], abs=1e-6)
