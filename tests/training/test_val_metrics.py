"""Validation metrics measured on the whole split while training, through the CLI on tiny runs:
jets' ``val_auc`` and translate's ``val_bleu``/``val_chrf`` (``--val-bleu N``) are logged at each
validation, and metrics.json's values are what the saved model scores on those validation
examples; ``--keep-best`` on a task's own run saves the checkpoint's best weights."""
import csv
import json

import pytest
import torch
from safetensors.torch import load_file

import attnlab
from attnlab.cli import main
from attnlab.runs import read_yaml
from attnlab.tasks import get_task

pytestmark = pytest.mark.slow  # every test trains a run through the CLI


def _validations(out, *names):
    rows = list(csv.DictReader(open(out / "logs" / "metrics.csv")))
    return [(int(r["step"]), *(float(r[n]) for n in names)) for r in rows if r.get(names[0])]


def test_jets_logs_val_auc_of_the_validation_jets(tmp_path):
    from attnlab.tasks.jets.data import write_jets
    from attnlab.tasks.jets.metrics import roc_auc
    from attnlab.tasks.jets.runtime import score_split, splits

    from ..jets.test_task import TINY, synthetic_jets

    data = tmp_path / "jets.h5"
    write_jets(data, *synthetic_jets(60))
    out = tmp_path / "run"
    assert main(["train", "jets", "--data", str(data), "--out", str(out), *TINY,
                 "--keep-best", "--monitor", "val_auc"]) == 0
    logged = _validations(out, "val_auc")
    assert [step for step, _ in logged] == [8, 16]
    assert all(0 <= auc <= 1 for _, auc in logged)
    metrics = json.loads((out / "metrics.json").read_text())
    best = max(logged, key=lambda row: row[1])
    assert (metrics["best_step"], metrics["best_value"]) == (best[0], pytest.approx(best[1], rel=1e-5))
    # the number is the saved model's AUC on the validation jets, as test_auc is on the test's
    cfg = get_task("jets").typed(read_yaml(out / "config.yaml"), out)
    scores, labels = score_split(attnlab.load(out), splits(cfg)["val"], cfg)
    assert metrics["val_auc"] == pytest.approx(roc_auc(scores, labels), abs=1e-5)


def test_translate_val_bleu_scores_the_first_n_validation_pairs(tmp_path):
    from attnlab.tasks.translate.data import builtin_splits
    from attnlab.tasks.translate.scoring import score, translate_texts

    out = tmp_path / "run"
    assert main(["train", "translate", "--out", str(out), "--max-number", "200", "--test-size",
                 "12", "--val-size", "6", "--max-steps", "20", "--val-every", "10", "--lr",
                 "3e-3", "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
                 "--dim-feedforward", "32", "--batch-size", "16", "--warmup", "5",
                 "--vocab-size", "270", "--val-bleu", "4"]) == 0
    logged = _validations(out, "val_bleu", "val_chrf")
    assert [step for step, *_ in logged] == [10, 20]
    assert all(0 <= b <= 100 and 0 <= c <= 100 for _, b, c in logged)
    metrics = json.loads((out / "metrics.json").read_text())
    cfg = get_task("translate").typed(read_yaml(out / "config.yaml"), out)
    pairs = builtin_splits(cfg)[1][:4]
    model, tok = attnlab.load(out)
    hyps = translate_texts(model, tok, [s for s, _ in pairs], max_new_tokens=cfg.max_target_len)
    expected = score(hyps, [t for _, t in pairs], bleu_tokenize=cfg.bleu_tokenize)
    assert metrics["val_bleu"] == pytest.approx(expected["test_bleu"], rel=1e-5, abs=1e-6)
    assert metrics["val_chrf"] == pytest.approx(expected["test_chrf"], rel=1e-5, abs=1e-6)


def test_reverse_keep_best_and_patience_on_a_run_that_overfits(tmp_path, capsys):
    """16 training sequences and a 32-wide model: the validation loss is lowest at step 10,
    then rises; --patience 3 stops three validations later, at step 25."""
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), "--max-steps", "60", "--train-size",
                 "16", "--val-size", "64", "--test-size", "64", "--model-dim", "32",
                 "--num-heads", "1", "--batch-size", "16", "--val-every", "5", "--lr", "0.01",
                 "--warmup", "5", "--no-early-stop", "--keep-best", "--patience", "3"]) == 0
    state = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    metrics = json.loads((out / "metrics.json").read_text())
    losses = _validations(out, "val_loss")
    step, value = min(losses, key=lambda row: row[1])
    assert step == 10 and [s for s, _ in losses] == [5, 10, 15, 20, 25]
    assert metrics["steps"] == state["global_step"] == 25
    assert metrics["stopped_early"].startswith("val_loss did not improve for 3 validations")
    assert (metrics["best_step"], metrics["best_metric"]) == (10, "val_loss")
    assert metrics["best_value"] == pytest.approx(value, rel=1e-5)
    assert metrics["val_loss"] == pytest.approx(value, rel=1e-5)  # the saved weights' validation
    # model.safetensors: the best step's weights, kept in the checkpoint; not the last step's
    assert state["best"]["step"] == 10
    saved = load_file(out / "model.safetensors")
    assert saved.keys() == state["best"]["weights"].keys()
    assert all(torch.equal(saved[k], state["best"]["weights"][k]) for k in saved)
    last = {k.removeprefix("model."): v for k, v in state["state_dict"].items()}
    assert not all(torch.equal(saved[k], last[k]) for k in saved)
    # and the test split was scored on them: evaluate of the saved model agrees
    capsys.readouterr()
    assert main(["evaluate", str(out)]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["test_token_accuracy"] == pytest.approx(metrics["test_token_accuracy"],
                                                             abs=1e-6)
