"""classify's scores against scikit-learn's on small splits with the cases that trip scores up:
a class never predicted, a class with no test row (predicted or not), label sets with a class
in neither; the confusion matrix's orientation (rows the true class) and class order."""
import numpy as np
import pytest
import torch

from attnlab.tasks.classify.metrics import Tally, validation_scores

metrics = pytest.importorskip("sklearn.metrics")
TOL = 1e-12
LABELS = ["a", "b", "c", "d"]
TRUE = [0, 0, 1, 1, 3, 3, 0, 1, 3]  # "c" has no test row
PREDICTED = {"c never predicted": [0, 1, 1, 1, 0, 1, 0, 0, 1],  # nor "d"
             "c predicted": [0, 2, 1, 1, 0, 1, 0, 0, 3]}


@pytest.mark.parametrize("case", sorted(PREDICTED))
def test_one_class_per_row_equals_scikit_learn(case):
    pred = PREDICTED[case]
    scores = Tally(LABELS, "single").add(torch.tensor(pred), torch.tensor(TRUE)).scores()
    assert scores["test_accuracy"] == pytest.approx(metrics.accuracy_score(TRUE, pred), abs=TOL)
    macro = metrics.f1_score(TRUE, pred, average="macro", zero_division=0)
    assert scores["test_macro_f1"] == pytest.approx(macro, abs=TOL)
    p, r, f, support = metrics.precision_recall_fscore_support(TRUE, pred, labels=[0, 1, 2, 3],
                                                               zero_division=0)
    for k, label in enumerate(LABELS):
        row = scores["test_per_class"][label]
        assert [row["precision"], row["recall"], row["f1"]] == pytest.approx(
            [p[k], r[k], f[k]], abs=TOL)
        assert row["support"] == support[k]
    assert scores["test_classes_without_examples"] == ["c"]
    # validation's val_f1 is the same number, from the model's outputs (N, K)
    outputs = torch.nn.functional.one_hot(torch.tensor(pred), 4).float()
    assert validation_scores("single", 4)(outputs, torch.tensor(TRUE))["f1"] == pytest.approx(
        macro, abs=TOL)


def test_confusion_rows_are_the_true_class_in_label_order():
    pred = PREDICTED["c predicted"]
    tally = Tally(LABELS, "single").add(torch.tensor(pred), torch.tensor(TRUE))
    expected = metrics.confusion_matrix(TRUE, pred, labels=[0, 1, 2, 3])  # rows: true
    assert tally.matrix.tolist() == expected.tolist()
    assert tally.matrix[2].sum() == 0 and tally.matrix[:, 2].sum() == 1  # "c": predicted once


def test_label_sets_equal_scikit_learn_where_it_is_told_the_classes_that_occur():
    true = np.array([[1, 0, 1, 0], [0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0]])
    pred = np.array([[1, 0, 0, 0], [0, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])  # "d" in neither
    scores = Tally(LABELS, "multi").add(torch.tensor(pred), torch.tensor(true)).scores()
    assert scores["test_accuracy"] == pytest.approx(metrics.accuracy_score(true, pred), abs=TOL)
    micro = metrics.f1_score(true, pred, average="micro", zero_division=0)
    assert scores["test_micro_f1"] == pytest.approx(micro, abs=TOL)
    occurring = [0, 1, 2]  # docs/classification.md: the mean over the classes that occur
    macro = metrics.f1_score(true, pred, labels=occurring, average="macro", zero_division=0)
    assert scores["test_macro_f1"] == pytest.approx(macro, abs=TOL)
    assert scores["test_macro_f1"] == pytest.approx((1 + 2 / 3 + 0) / 3, abs=TOL)  # by hand
    everything = metrics.f1_score(true, pred, average="macro", zero_division=0)
    assert everything == pytest.approx((1 + 2 / 3) / 4, abs=TOL)  # scikit-learn's own mean
    p, r, f, support = metrics.precision_recall_fscore_support(true, pred, zero_division=0)
    for k, label in enumerate(LABELS):
        row = scores["test_per_class"][label]
        assert [row["precision"], row["recall"], row["f1"]] == pytest.approx(
            [p[k], r[k], f[k]], abs=TOL)
        assert row["support"] == support[k]
    assert scores["test_classes_without_examples"] == ["d"]
