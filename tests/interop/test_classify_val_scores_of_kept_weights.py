"""A fine-tune of a BERT checkpoint with ``--keep-best --patience``: the validation numbers in
``logs/metrics.csv`` are those of the weights a user then has. ``predict`` of
``model.safetensors`` on the validation file gives, by scikit-learn, the accuracy and macro F1
logged at ``best_step``, and ``predict --checkpoint last`` those logged at the last step; the
mean of -log p(true class) of their probabilities is the logged ``val_loss``.

Tolerances: the scores are shares of 40 rows, compared exactly (1e-9); ``val_loss`` is
compared with the probabilities ``--json`` prints (float32 written to 8 digits), to 1e-6.
"""
import csv
import json
import math
import random

import pytest

pytest.importorskip("transformers")
sklearn_metrics = pytest.importorskip("sklearn.metrics")

from attnlab.cli import main  # noqa: E402
from tests.interop.test_checkpoint import save_bert  # noqa: E402

pytestmark = pytest.mark.slow  # trains a run through the CLI

WORDS = {"pos": ["cat", "mat", "sat"], "neg": ["dog", "ran", "fast"],
         "mid": ["hello", "world", "there"]}


def _write(path, n, rng):
    """n texts of a class's words, a third of them with a label drawn at random (so that
    the validation scores move and differ from one step to the next)."""
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["text", "label"])
        for _ in range(n):
            label = rng.choice(sorted(WORDS))
            text = " ".join(rng.choice(WORDS[label]) for _ in range(4))
            out.writerow([text, rng.choice(sorted(WORDS)) if rng.random() < 0.33 else label])
    return path


def _predict(capsys, run, val, *extra):
    capsys.readouterr()
    assert main(["predict", str(run), "--input-file", str(val), "--text-column", "text",
                 "--json", "--threads", "1", *extra]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]


def test_logged_validation_scores_are_those_of_the_kept_and_the_last_weights(tmp_path, capsys):
    rng = random.Random(0)
    bert = save_bert(tmp_path / "bert")
    train = _write(tmp_path / "train.csv", 160, rng)
    val = _write(tmp_path / "val.csv", 40, rng)
    run = tmp_path / "run"
    assert main(["train", "classify", "--init", str(bert), "--data", str(train), "--val",
                 str(val), "--test", str(val), "--out", str(run), "--max-steps", "40",
                 "--batch-size", "8", "--lr", "3e-3", "--warmup", "2", "--val-every", "5",
                 "--keep-best", "--monitor", "val_f1", "--patience", "4",
                 "--threads", "1"]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    logged = {int(r["step"]): r for r in csv.DictReader(open(run / "logs" / "metrics.csv"))
              if r["val_loss"]}
    truth = [r["label"] for r in csv.DictReader(open(val))]
    last = max(logged)
    # two sets of weights: the kept validation is not the last one, nor as good by val_loss
    assert metrics["best_step"] < last
    assert logged[metrics["best_step"]]["val_loss"] != logged[last]["val_loss"]
    for step, extra in [(metrics["best_step"], ()), (last, ("--checkpoint", "last"))]:
        rows = _predict(capsys, run, val, *extra)
        predicted = [r["prediction"] for r in rows]
        row = logged[step]
        assert float(row["val_acc"]) == pytest.approx(
            sklearn_metrics.accuracy_score(truth, predicted), abs=1e-9), step
        assert float(row["val_f1"]) == pytest.approx(
            sklearn_metrics.f1_score(truth, predicted, average="macro"), abs=1e-9), step
        loss = sum(-math.log(r["probabilities"][t]) for r, t in zip(rows, truth)) / len(truth)
        assert float(row["val_loss"]) == pytest.approx(loss, abs=1e-6), step
    assert metrics["best_value"] == pytest.approx(float(logged[metrics["best_step"]]["val_f1"]),
                                                  abs=1e-6)
