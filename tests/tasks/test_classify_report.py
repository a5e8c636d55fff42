"""What a classify run reports (#41): val_acc and the macro F1 at each validation, the test
split's per-class precision / recall / F1 / support and its confusion matrix (CSV and PNG), and
--class-weights in the loss. Every number is checked against scikit-learn on the same
predictions."""
import csv
import json
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnlab.cli import main
from attnlab.runs import read_yaml
from attnlab.tasks.classify import TASKS
from attnlab.tasks.classify.data import load_splits
from attnlab.tasks.classify.labels import balanced_weights, resolve_class_weights
from attnlab.tasks.classify.metrics import Tally, confusion, per_class, validation_scores
from attnlab.training.classifier import ClassifierModule

from .test_classify import write_csv

TASK = TASKS["classify"]
TINY = ["--text-column", "review", "--label-column", "sentiment", "--max-steps", "30",
        "--model-dim", "16", "--num-heads", "2", "--num-layers", "1", "--dim-feedforward", "32",
        "--lr", "3e-3", "--warmup", "5", "--pooling", "mean", "--val-every", "10"]


@pytest.fixture(scope="module")
def weighted_run(tmp_path_factory):
    """A 3-class run with unequal classes, trained with --class-weights balanced."""
    tmp = tmp_path_factory.mktemp("report")
    data = write_csv(tmp / "reviews.csv", n=150, labels=("pos", "pos", "pos", "neg", "meh"))
    out = tmp / "run"
    assert main(["train", "classify", "--data", str(data), "--out", str(out),
                 "--class-weights", "balanced", *TINY]) == 0
    return out


def _predict(run, texts):
    """The run's labels of ``texts``, as `attnlab predict` gives them."""
    cfg = TASK.typed(read_yaml(run / "config.yaml"), run)
    results = TASK.runtime().predict_many(TASK, run, cfg, texts, ["--input"] * len(texts))
    return cfg, [r["prediction"] for r in results]


@pytest.mark.slow
def test_val_acc_and_val_f1_are_logged_at_every_validation_and_agree_with_sklearn(weighted_run):
    from sklearn.metrics import accuracy_score, f1_score

    with open(weighted_run / "logs" / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["val_loss"]]
    assert [r["step"] for r in rows] == ["10", "20", "30"]
    assert all(r["val_acc"] and r["val_f1"] for r in rows)
    metrics = json.loads((weighted_run / "metrics.json").read_text())
    # the last validation is the saved model's: its numbers are sklearn's on its predictions
    cfg = TASK.typed(read_yaml(weighted_run / "config.yaml"), weighted_run)
    val = load_splits(cfg)["val"]
    _, preds = _predict(weighted_run, [t for t, _ in val])
    truth = [y for _, y in val]
    assert metrics["val_f1"] == pytest.approx(f1_score(truth, preds, average="macro"), abs=1e-5)
    assert metrics["val_acc"] == pytest.approx(accuracy_score(truth, preds), abs=1e-5)
    assert float(rows[-1]["val_f1"]) == pytest.approx(metrics["val_f1"], abs=1e-5)


@pytest.mark.slow
def test_per_class_report_and_confusion_files_agree_with_sklearn(weighted_run):
    from sklearn.metrics import classification_report, confusion_matrix

    cfg = TASK.typed(read_yaml(weighted_run / "config.yaml"), weighted_run)
    test = load_splits(cfg)["test"]
    _, preds = _predict(weighted_run, [t for t, _ in test])
    truth = [y for _, y in test]
    labels = ["meh", "neg", "pos"]
    report = classification_report(truth, preds, labels=labels, output_dict=True, zero_division=0)
    metrics = json.loads((weighted_run / "metrics.json").read_text())
    assert set(metrics["test_per_class"]) == set(labels)
    for label in labels:
        ours, theirs = metrics["test_per_class"][label], report[label]
        for key, their_key in (("precision", "precision"), ("recall", "recall"),
                               ("f1", "f1-score"), ("support", "support")):
            assert ours[key] == pytest.approx(theirs[their_key], abs=1e-5), (label, key)
    assert metrics["test_macro_f1"] == pytest.approx(report["macro avg"]["f1-score"], abs=1e-5)
    with open(weighted_run / "confusion.csv") as f:
        header, *rows = list(csv.reader(f))
    assert header[1:] == labels and [r[0] for r in rows] == labels
    expected = confusion_matrix(truth, preds, labels=labels).tolist()
    assert [[int(v) for v in r[1:]] for r in rows] == expected
    assert (weighted_run / "confusion.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_per_class_and_macro_f1_of_a_confusion_matrix_are_sklearns():
    from sklearn.metrics import classification_report, f1_score

    g = torch.Generator().manual_seed(1)
    targets = torch.randint(0, 4, (120,), generator=g)
    preds = torch.where(torch.rand(120, generator=g) < 0.6, targets,
                        torch.randint(0, 3, (120,), generator=g))  # class 3 never predicted
    matrix = confusion(preds, targets, 4)
    ours = per_class(matrix.diag(), matrix.sum(0), matrix.sum(1), list("abcd"))
    theirs = classification_report(targets, preds, output_dict=True, zero_division=0)
    for i, label in enumerate("abcd"):
        assert ours[label]["precision"] == pytest.approx(theirs[str(i)]["precision"])
        assert ours[label]["recall"] == pytest.approx(theirs[str(i)]["recall"])
        assert ours[label]["f1"] == pytest.approx(theirs[str(i)]["f1-score"])
        assert ours[label]["support"] == theirs[str(i)]["support"]
    f1 = validation_scores("single", 4)(torch.nn.functional.one_hot(preds, 4).float(), targets)
    assert f1["f1"] == pytest.approx(f1_score(targets, preds, average="macro"))


LABELS = ["a", "b", "c", "d"]
TRUE = [0, 0, 1, 1, 3, 3, 0, 1, 3]  # "c" has no test row
PREDICTED = {"c never predicted": [0, 1, 1, 1, 0, 1, 0, 0, 1],  # nor "d"
             "c predicted": [0, 2, 1, 1, 0, 1, 0, 0, 3]}


def assert_per_class_is_sklearns(scores, true, pred):
    """metrics.json's ``test_per_class`` of LABELS: each class's precision, recall, F1 and
    support as scikit-learn's, a class with no row or no prediction included (0, not NaN)."""
    from sklearn.metrics import precision_recall_fscore_support

    p, r, f, support = precision_recall_fscore_support(true, pred, labels=range(len(LABELS)),
                                                       zero_division=0)
    for k, label in enumerate(LABELS):
        row = scores["test_per_class"][label]
        assert [row["precision"], row["recall"], row["f1"]] == pytest.approx(
            [p[k], r[k], f[k]], abs=1e-12)
        assert row["support"] == support[k]


@pytest.mark.parametrize("case", sorted(PREDICTED))
def test_the_test_scores_of_a_class_with_no_test_row_are_sklearns(case):
    """A class no test row has ("c"), predicted or not: accuracy, macro F1 (over the classes in
    the answers or the truth, as scikit-learn's), per class, and named in metrics.json; val_f1
    from the model's outputs (N, K) is the same macro F1."""
    from sklearn.metrics import accuracy_score, f1_score

    pred = PREDICTED[case]
    scores = Tally(LABELS, "single").add(torch.tensor(pred), torch.tensor(TRUE)).scores()
    assert scores["test_accuracy"] == pytest.approx(accuracy_score(TRUE, pred), abs=1e-12)
    macro = f1_score(TRUE, pred, average="macro", zero_division=0)
    assert scores["test_macro_f1"] == pytest.approx(macro, abs=1e-12)
    assert_per_class_is_sklearns(scores, TRUE, pred)
    assert scores["test_classes_without_examples"] == ["c"]
    outputs = F.one_hot(torch.tensor(pred), 4).float()
    assert validation_scores("single", 4)(outputs, torch.tensor(TRUE))["f1"] == pytest.approx(
        macro, abs=1e-12)


def test_label_sets_equal_scikit_learn_where_it_is_told_the_classes_that_occur():
    """docs/classification.md: a multi-label macro F1 is the mean over the classes that occur,
    scikit-learn's ``f1_score(labels=...)`` of them, not its mean over every column."""
    from sklearn.metrics import accuracy_score, f1_score

    true = np.array([[1, 0, 1, 0], [0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0]])
    pred = np.array([[1, 0, 0, 0], [0, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])  # "d" in neither
    scores = Tally(LABELS, "multi").add(torch.tensor(pred), torch.tensor(true)).scores()
    assert scores["test_accuracy"] == pytest.approx(accuracy_score(true, pred), abs=1e-12)
    micro = f1_score(true, pred, average="micro", zero_division=0)
    assert scores["test_micro_f1"] == pytest.approx(micro, abs=1e-12)
    macro = f1_score(true, pred, labels=[0, 1, 2], average="macro", zero_division=0)
    assert scores["test_macro_f1"] == pytest.approx(macro, abs=1e-12)
    assert scores["test_macro_f1"] == pytest.approx((1 + 2 / 3 + 0) / 3, abs=1e-12)  # by hand
    everything = f1_score(true, pred, average="macro", zero_division=0)
    assert everything == pytest.approx((1 + 2 / 3) / 4, abs=1e-12)  # scikit-learn's own mean
    assert_per_class_is_sklearns(scores, true, pred)
    assert scores["test_classes_without_examples"] == ["d"]


def test_balanced_weights_are_sklearns_and_a_file_must_name_every_class(tmp_path):
    import numpy as np
    from sklearn.utils.class_weight import compute_class_weight

    train = ["a"] * 6 + ["b"] * 3 + ["c"]
    theirs = compute_class_weight("balanced", classes=np.array(["a", "b", "c"]), y=train)
    assert list(balanced_weights(train, ["a", "b", "c"]).values()) == pytest.approx(theirs,
                                                                                   rel=1e-5)
    (tmp_path / "w.csv").write_text("class,weight\nc,3\na,0.5\nb,1\n")
    assert resolve_class_weights(str(tmp_path / "w.csv"), train, ["a", "b", "c"]) == {
        "a": 0.5, "b": 1.0, "c": 3.0}
    from attnlab.errors import UsageError

    (tmp_path / "w.json").write_text('{"a": 1, "b": 2, "z": 1}')
    with pytest.raises(UsageError, match="no weight for class 'c'; names class 'z'"):
        resolve_class_weights(str(tmp_path / "w.json"), train, ["a", "b", "c"])


def test_a_json_weights_file_names_classes_as_the_data_does_spaces_around_them_aside(tmp_path):
    """Labels are read stripped (" pos" in the data is pos), and so were a CSV's classes; a
    JSON key " pos" was a class no row has."""
    from attnlab.errors import UsageError

    train = ["pos", "neg", "neg"]
    (tmp_path / "w.json").write_text('{" pos": 2, "neg ": 1}')
    assert resolve_class_weights(str(tmp_path / "w.json"), train, ["neg", "pos"]) == {
        "neg": 1.0, "pos": 2.0}
    (tmp_path / "w.json").write_text('{" pos": 2, "pos": 1, "neg": 1}')
    with pytest.raises(UsageError, match="class 'pos' is given twice"):
        resolve_class_weights(str(tmp_path / "w.json"), train, ["neg", "pos"])


@pytest.mark.parametrize("weight, kept", [("1e-320", False), ("1e300", False), ("1e-30", True),
                                           ("1e30", True)])
def test_a_weight_float32_cannot_hold_is_refused_not_made_0_or_inf(tmp_path, weight, kept):
    """1e-320 became 0 in the loss (the class silently left out); 1e300 became inf (a NaN loss
    at step 1)."""
    import torch

    from attnlab.errors import UsageError

    (tmp_path / "w.json").write_text(f'{{"neg": {weight}, "pos": 1}}')
    if kept:
        found = resolve_class_weights(str(tmp_path / "w.json"), ["neg", "pos"], ["neg", "pos"])
        assert 0 < float(torch.tensor(found["neg"], dtype=torch.float32)) < float("inf")
        return
    said = f"class 'neg', {float(weight)!r}, is outside what the loss's float32 holds (1.2e-38 to"
    with pytest.raises(UsageError, match=re.escape(said)):
        resolve_class_weights(str(tmp_path / "w.json"), ["neg", "pos"], ["neg", "pos"])


class _Logits(nn.Module):
    """Returns its input as the logits: the loss of given logits."""

    def forward(self, x):
        return x


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_class_weights_weigh_each_rows_cross_entropy(smoothing):
    cfg = TASK.config(data="d.csv", labels=["a", "b", "c"], label_smoothing=smoothing)
    logits = torch.tensor([[2.0, 0.1, -1.0], [0.3, 0.2, 0.9], [-0.5, 1.5, 0.0], [1.0, 1.0, 1.0]])
    y = torch.tensor([0, 2, 1, 2])
    w = torch.tensor([0.5, 1.0, 4.0])
    module = ClassifierModule(_Logits(), cfg, 10, class_weight=w).train()
    loss, _ = module.loss((logits, y))
    # by hand: each row's (smoothed) cross-entropy times its class's weight, over Σ w_y
    logp = logits.log_softmax(-1)
    target = F.one_hot(y, 3) * (1 - smoothing) + smoothing / 3
    rows = -(target * logp * w).sum(-1)  # PyTorch weighs each class's term of the smoothed target
    assert loss == pytest.approx(float(rows.sum() / w[y].sum()), rel=1e-6)
    plain, _ = ClassifierModule(_Logits(), cfg, 10).train().loss((logits, y))
    assert abs(float(loss) - float(plain)) > 0.05  # the weights changed the loss


@pytest.mark.slow
def test_the_resolved_weights_are_recorded_and_resume_keeps_them(tmp_path, capsys):
    data = write_csv(tmp_path / "reviews.csv", n=90)
    weights = tmp_path / "w.json"
    weights.write_text('{"pos": 1, "neg": 2, "meh": 3}')
    out = tmp_path / "run"
    argv = ["train", "classify", "--data", str(data), "--out", str(out),
            "--class-weights", str(weights), *TINY]
    assert main(argv) == 0
    assert read_yaml(out / "config.yaml")["class_weight_values"] == {"meh": 3, "neg": 2, "pos": 1}
    weights.write_text('{"pos": 9}')  # a changed (now wrong) file is not read again
    cfg = {**read_yaml(out / "config.yaml"), "resume": True}
    TASK.validate(cfg)
    assert cfg["class_weight_values"] == {"meh": 3, "neg": 2, "pos": 1}
