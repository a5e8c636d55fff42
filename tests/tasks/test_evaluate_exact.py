"""`evaluate`'s accuracies are the exact share of right answers, as scikit-learn's
`accuracy_score` gives it, on a file of any size: a float32 mean was 2e-8 off (90,091 right of
100,000 read 0.9009100198745728), which the Python API handed on and which the six digits
`evaluate` prints can round the wrong way. Checked against scikit-learn within 1e-12 on
100,003 answers of three classes."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from attnlab.tasks.anomaly.runtime import anomaly_accuracy, fixed_sets
from attnlab.tasks.classify.metrics import classification_metrics, confusion
from attnlab.tasks.classify.runtime import test_scores as classify_test_scores
from attnlab.tasks.graph.runtime import _accuracy as graph_accuracy
from attnlab.tasks.sequence.runtime import sequence_metrics

metrics = pytest.importorskip("sklearn.metrics")

N = 100_003


@pytest.fixture
def answers():
    g = torch.Generator().manual_seed(0)
    truth = torch.randint(0, 3, (N,), generator=g)
    wrong = torch.rand(N, generator=g) < 0.1  # about a tenth wrong, so no share is round
    return torch.where(wrong, (truth + 1) % 3, truth), truth


def test_classify_accuracy_f1_and_confusion_equal_scikit_learns(answers):
    preds, truth = answers
    ours = classification_metrics(preds, truth, 3)
    assert abs(ours["test_accuracy"] - metrics.accuracy_score(truth, preds)) <= 1e-12
    assert abs(ours["test_macro_f1"] - metrics.f1_score(truth, preds, average="macro")) <= 1e-12
    assert confusion(preds, truth, 3).tolist() == metrics.confusion_matrix(truth, preds).tolist()


class Fixed:
    """A model whose predictions are given."""

    def __init__(self, predictions):
        self.predictions = predictions

    def predict(self, inputs):
        return self.predictions

    def eval(self):
        return self

    def __call__(self, x, adjacency):  # a graph model: one row of scores per node
        return torch.nn.functional.one_hot(self.predictions, 3).float()


def test_sequence_accuracies_are_exact_shares(answers):
    preds, truth = answers
    rows = N // 7  # 14,286 sequences of 7 symbols, of 1 to 7 counted
    inputs, p, t = (torch.zeros(rows, 7), preds[:rows * 7].view(rows, 7),
                    truth[:rows * 7].view(rows, 7))
    lengths = torch.arange(rows) % 7 + 1
    scores = sequence_metrics(Fixed(p), inputs, t, lengths)
    counted = torch.arange(7)[None, :] < lengths[:, None]
    assert scores["test_token_accuracy"] == metrics.accuracy_score(t[counted], p[counted])
    whole = [bool((p[i, :n] == t[i, :n]).all()) for i, n in enumerate(lengths.tolist())]
    assert scores["test_sequence_accuracy"] == sum(whole) / rows


def test_graph_accuracy_is_the_exact_share(answers):
    preds, truth = answers
    mask = torch.arange(N) % 3 > 0
    ours = graph_accuracy(Fixed(preds), None, None, truth, mask)
    assert ours == metrics.accuracy_score(truth[mask], preds[mask])


def test_multi_label_exact_match_is_the_exact_share():
    """A multi-label run's ``test_accuracy`` is the share of texts whose every label is right
    (scikit-learn's subset accuracy), exactly."""
    g = torch.Generator().manual_seed(1)
    truth = (torch.rand(N, 3, generator=g) < 0.5).long()
    wrong = torch.rand(N, 3, generator=g) < 0.05  # some labels of some texts flipped
    answers = torch.where(wrong, 1 - truth, truth)
    cfg = SimpleNamespace(regression=False, multi_label=True, labels=["a", "b", "c"])
    ours = classify_test_scores(cfg, answers, truth)["test_accuracy"]
    assert ours == metrics.accuracy_score(truth.numpy(), answers.numpy())


class FirstPosition:
    """A set model that answers position 0 for every set."""

    def eval(self):
        return self

    def predict(self, x):  # (B, T, 64) -> (B,)
        return torch.zeros(len(x), dtype=torch.long)


def test_anomaly_accuracy_is_the_exact_share():
    cfg = SimpleNamespace(test_sets=3_001, set_size=5)
    targets = fixed_sets("test", cfg).materialize().tensors[1]
    ours = anomaly_accuracy(FirstPosition(), cfg)
    assert ours == metrics.accuracy_score(targets, torch.zeros_like(targets))
