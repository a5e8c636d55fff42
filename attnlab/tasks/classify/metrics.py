"""The scores of ``attnlab train classify``, from all of a split's predictions at once: on the
validation split while training (``validation_scores``, logged as ``val_*``) and on the test
split after it (``test_scores``, in metrics.json).

    objective    validation                     test (metrics.json)
    single       val_acc, val_f1 (macro)        test_accuracy, test_macro_f1, test_per_class
    multi        val_f1 (macro), val_micro_f1   test_accuracy (every label right),
                                                test_macro_f1, test_micro_f1, test_per_class
    regression   val_mse, val_r2, val_spearman  test_mse, test_r2, test_spearman

With the confusion matrix C (rows the true class, columns the predicted one):
precision_k = C_kk / Σ_i C_ik, recall_k = C_kk / Σ_j C_kj, F1_k = 2 TP_k / (predicted_k +
true_k), 0 where a count is 0 (scikit-learn's ``zero_division=0``). The macro F1 is the mean
over the classes that occur in the targets or the predictions (scikit-learn's ``f1_score``
does the same for one label per row; for label sets it counts a class in neither as 0, which
this leaves out too, so that a class missing from a small split does not lower the score).
The micro F1 pools every class's counts: 2 ΣTP / (Σpredicted + Σtrue).

R² = 1 − Σ(y − ŷ)² / Σ(y − ȳ)², and of constant targets (no variance to explain) 1 where every
prediction is exact and 0 otherwise, as scikit-learn's ``r2_score`` gives; Spearman's ρ is
Pearson's correlation of the ranks, a tie given the mean of its ranks (``scipy.stats.spearmanr``).

Computed from the confusion counts in torch rather than torchmetrics, whose import loads
scipy, matplotlib and transformers (benchmarks/RESULTS.md has the cost) into every run.

Shapes: N examples, K classes.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..base import ratio

__all__ = ["confusion", "per_class", "classification_metrics", "classes_without_examples",
           "Tally", "MISSING_KEY", "multi_label_counts",
           "f1_scores", "regression_scores", "spearman", "validation_scores", "decide"]


def confusion(preds: torch.Tensor, targets: torch.Tensor, k: int) -> torch.Tensor:
    """The (true, predicted) counts (K, K) of ``k`` classes.

    Examples:
        >>> confusion(torch.tensor([0, 1, 1]), torch.tensor([0, 1, 0]), 2).tolist()
        [[1, 1], [0, 1]]
    """
    return torch.bincount(targets * k + preds, minlength=k * k).reshape(k, k)


def _counts_of(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(true positives, predicted, true) per class (K,) of a confusion matrix."""
    return matrix.diag(), matrix.sum(0), matrix.sum(1)


def multi_label_counts(pred: torch.Tensor, true: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(true positives, predicted, true) per class (K,) of label sets (N, K), booleans."""
    pred, true = pred.bool(), true.bool()
    return (pred & true).sum(0), pred.sum(0), true.sum(0)


def f1_scores(tp: torch.Tensor, predicted: torch.Tensor, true: torch.Tensor) -> dict[str, float]:
    """``macro_f1`` and ``micro_f1`` of per-class counts (K,) (see the module doc)."""
    seen = predicted + true  # (K,)
    f1 = 2 * tp.double() / seen.clamp(min=1)  # (K,)
    micro = 2 * tp.sum().double() / seen.sum().clamp(min=1)
    return {"macro_f1": float(f1[seen > 0].mean()) if bool((seen > 0).any()) else 0.0,
            "micro_f1": float(micro)}


def per_class(tp: torch.Tensor, predicted: torch.Tensor, true: torch.Tensor,
              labels: list[str]) -> dict[str, dict[str, float]]:
    """{class: {precision, recall, f1, support}} of per-class counts (K,), as scikit-learn's
    ``classification_report`` (zero_division=0)."""
    tp = tp.double()
    precision = tp / predicted.clamp(min=1)
    recall = tp / true.clamp(min=1)
    f1 = 2 * tp / (predicted + true).clamp(min=1)
    return {label: {"precision": float(precision[i]), "recall": float(recall[i]),
                    "f1": float(f1[i]), "support": int(true[i])}
            for i, label in enumerate(labels)}


MISSING_KEY = "test_classes_without_examples"  # metrics.json: labels with no test example


class Tally:
    """The test scores (metrics.json's) of rows scored a chunk at a time (``add``), the same as
    of all the rows at once: one class per row adds to the confusion counts (K, K), label sets
    to each class's counts and the rows right in every label, exact integers whatever the
    chunks; numbers keep each row's answer and truth (R² and Spearman's ranks need every row:
    16 bytes a row, not the rows read).

    Args:
        labels: the run's classes (None for ``"regression"``).
        objective: "single", "multi" or "regression" (``labels.objective_of``).

    Examples:
        >>> tally = Tally(["a", "b"], "single").add(torch.tensor([0, 1]), torch.tensor([0, 0]))
        >>> tally.add(torch.tensor([1]), torch.tensor([1])).scores()["test_accuracy"]
        0.6666666666666666
    """

    def __init__(self, labels: list[str] | None, objective: str) -> None:
        self.labels, self.objective, self.rows, self.exact = labels, objective, 0, 0
        k = len(labels or ())
        self.matrix = torch.zeros(k, k, dtype=torch.long)  # (K, K)
        # (true positives, predicted, true) of label sets, (K,) each
        self.counts = (torch.zeros(k, dtype=torch.long), torch.zeros(k, dtype=torch.long),
                       torch.zeros(k, dtype=torch.long))
        self.numbers: tuple[list, list] = ([], [])

    def add(self, answers: torch.Tensor, truth: torch.Tensor) -> "Tally":
        """Count one chunk's answers and truth: classes (N,), label sets (N, K) or numbers
        (N,)."""
        self.rows += len(truth)
        if self.objective == "regression":
            self.numbers[0].append(answers.double())
            self.numbers[1].append(truth.double())
        elif self.objective == "multi":
            for total, count in zip(self.counts, multi_label_counts(answers, truth)):
                total += count
            self.exact += int((answers.bool() == truth.bool()).all(1).sum())
        else:
            self.matrix += confusion(answers, truth, len(self.matrix))
        return self

    def scores(self) -> dict[str, Any]:
        """metrics.json's test scores of every row added."""
        if self.objective == "regression":
            pred, true = (torch.cat(n) for n in self.numbers)
            return {f"test_{k}": v for k, v in regression_scores(pred, true).items()}
        if self.objective == "multi":
            counts = self.counts
            f1 = f1_scores(*counts)
            scores = {"test_accuracy": ratio(self.exact, self.rows),
                      "test_macro_f1": f1["macro_f1"], "test_micro_f1": f1["micro_f1"]}
        else:
            counts = _counts_of(self.matrix)
            scores = {"test_accuracy": ratio(int(counts[0].sum()), self.rows),
                      "test_macro_f1": f1_scores(*counts)["macro_f1"]}
        labels = self.labels or []
        support = counts[2].tolist()  # the rows of each class (that have it, label sets)
        return {**scores, "test_per_class": per_class(*counts, labels),
                MISSING_KEY: [label for label, n in zip(labels, support) if n == 0]}


def classification_metrics(preds: torch.Tensor, targets: torch.Tensor, num_classes: int) -> dict:
    """``test_accuracy`` and ``test_macro_f1`` of one class per example (multiclass F1, macro
    average, as scikit-learn's ``f1_score``: see the module doc), as ``Tally`` gives them.

    Examples:
        >>> classification_metrics(torch.tensor([0, 1, 1]), torch.tensor([0, 1, 0]), 2)
        {'test_accuracy': 0.6666666666666666, 'test_macro_f1': 0.6666666666666666}
    """
    scores = Tally([str(k) for k in range(num_classes)], "single").add(preds, targets).scores()
    return {key: scores[key] for key in ("test_accuracy", "test_macro_f1")}


def classes_without_examples(targets: torch.Tensor, labels: list[str]) -> list[str]:
    """The labels (of training) that no test example has, in ``labels`` order (``Tally``'s
    ``MISSING_KEY``): ``targets`` are class indices (N,), or label sets (N, K)."""
    objective = "multi" if targets.ndim == 2 else "single"
    return Tally(labels, objective).add(targets, targets).scores()[MISSING_KEY]


def _ranks(x: torch.Tensor) -> torch.Tensor:
    """1-based ranks of ``x`` (N,), ties given their mean rank."""
    order = x.argsort()
    ranks = torch.empty_like(x, dtype=torch.float64)
    ranks[order] = torch.arange(1, len(x) + 1, dtype=torch.float64)
    _, group, counts = torch.unique(x, return_inverse=True, return_counts=True)
    sums = torch.zeros(len(counts), dtype=torch.float64).index_add_(0, group, ranks)
    return (sums / counts)[group]


def spearman(pred: torch.Tensor, true: torch.Tensor) -> float:
    """Spearman's rank correlation of two (N,) tensors (NaN where one is constant)."""
    a, b = _ranks(pred.double()), _ranks(true.double())
    a, b = a - a.mean(), b - b.mean()
    return float((a * b).sum() / (a.norm() * b.norm()))


def regression_scores(pred: torch.Tensor, true: torch.Tensor) -> dict[str, float]:
    """``mse``, ``r2`` and ``spearman`` of predicted and true numbers (N,)."""
    pred, true = pred.double(), true.double()
    residual = ((true - pred) ** 2).sum()
    total = ((true - true.mean()) ** 2).sum()
    r2 = 1 - residual / total if total > 0 else float(residual == 0)
    return {"mse": float(residual / len(true)), "r2": float(r2),
            "spearman": spearman(pred, true)}


def decide(outputs: torch.Tensor, objective: str, *, threshold: float = 0.5,
           mean: float = 0.0, std: float = 1.0) -> torch.Tensor:
    """The model's answers of its outputs (N, K): the class (N,); the label set (N, K), the
    classes whose probability is above ``threshold``; or the number (N,), standardised
    back with the training targets' ``mean`` and ``std``."""
    if objective == "single":
        return outputs.argmax(-1)
    if objective == "multi":
        return outputs.float().sigmoid() > threshold
    return outputs[:, 0].double() * std + mean


def validation_scores(objective: str, num_classes: int, *, threshold: float = 0.5,
                      mean: float = 0.0, std: float = 1.0
                      ) -> Callable[[torch.Tensor, torch.Tensor], dict[str, float]]:
    """The function of a validation's outputs (N, K) and targets that gives its scores (the
    training loop logs them as ``val_NAME``): ``f1`` (macro) for one class per row;
    ``f1`` and ``micro_f1`` for label sets; ``mse``, ``r2`` and ``spearman`` of numbers in
    the data's own units (the targets arrive standardised)."""
    def scores(outputs: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
        answers = decide(outputs, objective, threshold=threshold, mean=mean, std=std)
        if objective == "regression":
            return regression_scores(answers, targets.double() * std + mean)
        if objective == "single":
            counts = _counts_of(confusion(answers, targets, num_classes))
            return {"f1": f1_scores(*counts)["macro_f1"]}
        found = f1_scores(*multi_label_counts(answers, targets))
        return {"f1": found["macro_f1"], "micro_f1": found["micro_f1"]}

    return scores
