"""jets' numbers against the field's reference computation: scikit-learn's ``roc_auc_score``,
and its ``roc_curve`` read at ε_S with ``np.interp`` for the rejection, on test sets whose
size puts ROC points exactly at ε_S = 0.3 and 0.5 (1,000 top jets: 300 and 500 of them), as
the reference data's 50/50 test splits do."""
import numpy as np
import pytest

from attnlab.tasks.jets.metrics import rejection, roc_auc, tagging_metrics

sklearn_metrics = pytest.importorskip("sklearn.metrics")
TOL = 1e-12


def scores_with_qcd_between_tops(rounded: bool):
    """1,000 tops and 1,500 QCD jets with overlapping scores (rounded: many ties), and QCD
    jets placed between the 300th and 301st, and the 500th and 501st, best tops."""
    rng = np.random.default_rng(3)
    top, qcd = rng.normal(1.0, 1.0, 1000), rng.normal(0.0, 1.0, 1500)
    ranked = np.sort(top)[::-1]
    for k in (300, 500):  # three QCD jets between the k-th and (k+1)-th best tops
        qcd[k:k + 3] = ranked[k - 1] - np.array([0.1, 0.2, 0.3]) * (ranked[k - 1] - ranked[k])
    scores = 1 / (1 + np.exp(-np.r_[top, qcd]))
    labels = np.r_[np.ones(1000, int), np.zeros(1500, int)]
    return (np.round(scores, 3) if rounded else scores), labels


def reference_rejection(scores, labels, efficiency):
    fpr, tpr, _ = sklearn_metrics.roc_curve(labels, scores)
    return 1 / max(np.interp(efficiency, tpr, fpr), 1 / np.count_nonzero(labels == 0))


@pytest.mark.parametrize("rounded", [False, True])
def test_metrics_json_numbers_equal_scikit_learns(rounded):
    scores, labels = scores_with_qcd_between_tops(rounded)
    m = tagging_metrics(scores, labels)
    assert m["test_auc"] == pytest.approx(sklearn_metrics.roc_auc_score(labels, scores), abs=TOL)
    assert m["test_accuracy"] == sklearn_metrics.accuracy_score(labels, scores > 0.5)
    for key, efficiency in (("test_rejection_30", 0.3), ("test_rejection_50", 0.5)):
        assert m[key] == pytest.approx(reference_rejection(scores, labels, efficiency), rel=TOL)


def test_rejection_at_an_roc_point_with_qcd_jets_between_two_tops():
    """ε_S = 1/2 is reached at 0.8 (1 of 4 QCD jets tagged) and still at 0.7 (2 of 4): the
    reference reads the 0.7, so 1/ε_B = 2, not 4."""
    scores = np.array([0.9, 0.85, 0.8, 0.7, 0.6, 0.5, 0.2, 0.1])
    labels = np.array([1, 0, 1, 0, 1, 1, 0, 0])
    assert reference_rejection(scores, labels, 0.5) == 2.0
    assert rejection(scores, labels, 0.5) == 2.0


def test_auc_with_ties_across_classes_counts_them_half():
    scores, labels = [0.5, 0.5, 0.5, 0.9, 0.1], [1, 0, 0, 1, 0]
    assert roc_auc(scores, labels) == pytest.approx(sklearn_metrics.roc_auc_score(labels, scores),
                                                    abs=TOL)
    # by hand: 0.9 beats all 3 QCD jets, 0.5 beats 0.1 and ties two: (3 + 1 + ½ + ½) / 6
    assert roc_auc(scores, labels) == pytest.approx(5 / 6, abs=TOL)
