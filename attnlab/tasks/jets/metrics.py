"""Top-tagging metrics as the field reports them, and the classical baselines (numpy only).

Shapes: N jets, F features per jet; scores (N,) float, higher = more top-like; labels (N,) int,
1 = top (signal), 0 = QCD (background).

For a threshold t, a jet is tagged when its score is ≥ t:

    ε_S(t) = #{top jets tagged} / #{top jets}      signal efficiency (true-positive rate)
    ε_B(t) = #{QCD jets tagged} / #{QCD jets}      background efficiency (false-positive rate)
    AUC = ∫ ε_S dε_B = P(score_top > score_QCD) + ½ P(score_top = score_QCD)
    rejection at ε_S = 1 / ε_B(ε_S)                (Kasieczka, Plehn et al., 2019, table 1)

The ROC has one point per distinct score (as scikit-learn's ``roc_curve`` with
``drop_intermediate=False``); ``rejection`` reads ε_B off it at the requested ε_S, linearly
between the two ROC points around it (``np.interp(ε_S, ε_S_points, ε_B_points)``, the usual
``interp1d(tpr, fpr)`` of top-tagging code). Where ε_S is exactly that of several points (QCD
jets scored between two top jets, and always at ε_S = 1), it takes the lowest ε_B of them: the
nearest-point reading of the published taggers (LorentzNet's and PELICAN's
``fpr[argmin |tpr − ε_S|]`` on scikit-learn's ``roc_curve``). ``np.interp`` would take the
largest, and give every tagger, a perfect one too, a rejection of 1 at ε_S = 1.

Baselines: ``LikelihoodRatio`` estimates p(top | x) from histograms of x in each
class, fitted on training jets; on x = (jet mass, τ3/τ2) it is the classic two-variable
tagger, and on one variable it is the best any cut on that variable can do (Neyman–Pearson).
"""
from __future__ import annotations

import numpy as np

__all__ = ["roc", "roc_auc", "rejection", "tagging_metrics", "LikelihoodRatio",
           "baseline_scores", "BASELINES", "BASELINE_FEATURES"]

BASELINE_FEATURES = ("mass", "tau32")  # the columns of baseline_scores' features
BASELINES = ("mass", "tau32", "likelihood")


def _check(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    """(scores float64, labels bool) after checking shapes, values and both classes."""
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels)
    if s.ndim != 1 or y.shape != s.shape:
        raise ValueError(f"scores and labels must be 1-D of one length, got {s.shape} and "
                         f"{y.shape}")
    if not np.isfinite(s).all():
        raise ValueError(f"scores hold {np.count_nonzero(~np.isfinite(s))} NaN or inf values")
    if not np.isin(y, (0, 1)).all():
        raise ValueError(f"labels must be 0 or 1, got {np.unique(y)[:5].tolist()}")
    y = y.astype(bool)
    if y.all() or not y.any():
        raise ValueError(f"labels hold one class only ({int(y[0])} for all {len(y)} jets): "
                         f"efficiencies need top (1) and QCD (0) jets")
    return s, y


def roc(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    """The ROC curve: (ε_S, ε_B) at every distinct score taken as the threshold.

    Args:
        scores: (N,) higher = more top-like.
        labels: (N,) 1 = top, 0 = QCD; both must occur.

    Returns:
        (signal_eff, background_eff), both (P,) non-decreasing from (0, 0) to (1, 1), equal
        to scikit-learn's ``roc_curve(labels, scores, drop_intermediate=False)`` (tpr, fpr).

    Raises:
        ValueError: shapes differ, a score is NaN/inf, a label is not 0/1, or one class only.

    Examples:
        >>> roc([0.9, 0.8, 0.3, 0.1], [1, 0, 1, 0])
        (array([0. , 0.5, 0.5, 1. , 1. ]), array([0. , 0. , 0.5, 0.5, 1. ]))
    """
    s, y = _check(scores, labels)
    order = np.argsort(-s, kind="stable")  # highest score first
    s, y = s[order], y[order]
    last = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]  # the last jet of each distinct score
    tagged_s = np.cumsum(y)[last]
    tagged_b = last + 1 - tagged_s
    return (np.r_[0, tagged_s] / tagged_s[-1], np.r_[0, tagged_b] / tagged_b[-1])


def roc_auc(scores, labels) -> float:
    """The area under the ROC curve, ∫ ε_S dε_B (trapezoids: ties count ½), in [0, 1].

    Equal to scikit-learn's ``roc_auc_score(labels, scores)``.

    Examples:
        >>> roc_auc([0.9, 0.8, 0.3, 0.1], [1, 0, 1, 0])  # 3 of 4 (top, QCD) pairs ordered
        0.75
    """
    eff_s, eff_b = roc(scores, labels)
    return float(np.sum(np.diff(eff_b) * (eff_s[1:] + eff_s[:-1]) / 2))


def rejection(scores, labels, signal_efficiency: float) -> float:
    """Background rejection 1/ε_B at the signal efficiency ε_S (0.3 and 0.5 in the literature).

    ε_B is interpolated linearly on the ROC between the last point with a lower ε_S and the
    first point reaching ε_S; where several points have exactly ε_S, that first one is the
    lowest ε_B of them (the nearest-point reading of the published taggers). A test set of N_B
    QCD jets cannot measure ε_B below 1/N_B: where fewer than one QCD jet would be tagged
    (ε_B = 0 included, which would be an infinite rejection) the result is the bound N_B, so it
    is always finite — read it as "at least N_B". So 1/ε_B = 1 / max(ε_B, 1/N_B).

    Args:
        scores, labels: as ``roc``.
        signal_efficiency: ε_S in (0, 1].

    Returns:
        1/ε_B, between 1 and N_B.

    Examples:
        >>> scores, labels = [0.9, 0.85, 0.8, 0.7, 0.6, 0.2, 0.1], [1, 0, 1, 0, 1, 0, 0]
        >>> rejection(scores, labels, 2 / 3)  # ε_S = 2/3 at 0.8 (ε_B = 1/4) and 0.7 (2/4)
        4.0
        >>> rejection(scores, labels, 1.0)  # ε_S = 1 from 0.6 down: the lowest ε_B there is 2/4
        2.0
    """
    if not 0 < signal_efficiency <= 1:
        raise ValueError(f"signal_efficiency must be in (0, 1], got {signal_efficiency}")
    eff_s, eff_b = roc(scores, labels)
    hi = int(np.searchsorted(eff_s, signal_efficiency, side="left"))  # first with ε_S ≥ target
    lo = hi - 1  # eff_s[0] = 0 < target, so lo ≥ 0
    t = (signal_efficiency - eff_s[lo]) / (eff_s[hi] - eff_s[lo])
    eff = eff_b[lo] + t * (eff_b[hi] - eff_b[lo])
    qcd_jets = np.count_nonzero(np.asarray(labels) == 0)
    return float(1.0 / max(eff, 1.0 / qcd_jets))


def tagging_metrics(scores, labels, prefix: str = "test_") -> dict[str, float]:
    """The four numbers of metrics.json for jets: accuracy, AUC and the rejections at 30 % and
    50 % signal efficiency.

    accuracy = the fraction of jets with (score > 0.5) == label, for scores that are P(top)
    (a tie at 0.5 is QCD, as ``argmax`` of two equal logits picks class 0).

    Returns:
        {prefix + "accuracy", prefix + "auc", prefix + "rejection_30", prefix + "rejection_50"}.

    Examples:
        >>> m = tagging_metrics([0.9, 0.8, 0.3, 0.1], [1, 0, 1, 0])
        >>> m["test_accuracy"], m["test_auc"], m["test_rejection_50"]
        (0.5, 0.75, 2.0)
    """
    s, y = _check(scores, labels)
    return {f"{prefix}accuracy": float(np.mean((s > 0.5) == y)),
            f"{prefix}auc": roc_auc(s, y),
            f"{prefix}rejection_30": rejection(s, y, 0.3),
            f"{prefix}rejection_50": rejection(s, y, 0.5)}


def _smooth(h: np.ndarray, passes: int) -> np.ndarray:
    """``passes`` of the kernel [¼, ½, ¼] along every axis, edges repeated (counts are kept)."""
    for _ in range(passes):
        for axis in range(h.ndim):
            padded = np.concatenate([h.take([0], axis), h, h.take([-1], axis)], axis)
            n = h.shape[axis]
            h = (padded.take(range(0, n), axis) + 2 * h + padded.take(range(2, n + 2), axis)) / 4
    return h


class LikelihoodRatio:
    """p(top | x) from a histogram of x (F = 1 or 2 features) per class, fitted on training jets.

        p̂_c(bin) = (smoothed count_c(bin) + α·N_c/N̄) / (N_c·(1 + α·bins/N̄))   c = top, QCD
        score(x) = p̂_top(bin(x)) / (p̂_top(bin(x)) + p̂_QCD(bin(x)))  = LR / (1 + LR)

    a monotone function of the likelihood ratio LR = p̂_top/p̂_QCD, in [0, 1], above ½ where
    top is the likelier class (so ``tagging_metrics``' accuracy at 0.5 is meaningful). Bin
    edges are the quantiles of the training features (both classes together), so every bin
    holds about N/bins training jets per axis; features outside the training range fall into
    the outermost bins. Each class's counts are smoothed with ``smooth`` passes of a [¼, ½, ¼]
    kernel per axis, and α = ``pseudocount`` keeps empty bins finite. α is scaled by each
    class's share (N_c over the mean N̄ of the two), so a bin that no training jet reached has
    LR = 1 and scores exactly ½ — no evidence either way — even when the classes' sizes differ.

    Args:
        bins: bins per feature.
        smooth: smoothing passes (0: none).
        pseudocount: α, the count added to every bin (times N_c/N̄ for class c).

    Examples:
        >>> rng = np.random.default_rng(0)
        >>> x = np.r_[rng.normal(0, 1, (500, 2)), rng.normal(3, 1, (500, 2))]
        >>> y = np.r_[np.zeros(500), np.ones(500)]
        >>> lr = LikelihoodRatio(bins=10).fit(x, y)
        >>> lr.score(np.array([[0.0, 0.0], [3.0, 3.0]])).round(2)
        array([0.03, 0.98])
    """

    def __init__(self, bins: int = 40, *, smooth: int = 1, pseudocount: float = 0.5) -> None:
        if not isinstance(bins, int) or bins < 1:
            raise ValueError(f"bins must be a positive integer, got {bins!r}")
        if smooth < 0 or pseudocount <= 0:
            raise ValueError(f"smooth ({smooth}) must be >= 0 and pseudocount ({pseudocount}) > 0")
        self.bins, self.smooth, self.pseudocount = bins, smooth, pseudocount
        self.edges: list[np.ndarray] | None = None  # per feature: the inner bin edges
        self.table: np.ndarray | None = None  # the score of every bin, (bins,) * F

    def _features(self, features) -> np.ndarray:
        x = np.asarray(features, dtype=np.float64)
        x = x[:, None] if x.ndim == 1 else x
        if x.ndim != 2 or not 1 <= x.shape[1] <= 3 or not np.isfinite(x).all():
            raise ValueError(f"features must be finite, of shape (N, F) with F in 1..3, "
                             f"got shape {x.shape}")
        return x

    def _cells(self, x: np.ndarray) -> tuple[np.ndarray, ...]:
        """The bin of every jet along every feature: F arrays (N,)."""
        return tuple(np.searchsorted(e, x[:, f], side="right") for f, e in enumerate(self.edges))

    def fit(self, features, labels) -> "LikelihoodRatio":
        """Histogram the training jets' features per class. Returns self.

        Args:
            features: (N, F) (or (N,) for one feature).
            labels: (N,) 1 = top, 0 = QCD; both must occur.
        """
        x = self._features(features)
        _, y = _check(np.zeros(len(x)), labels)
        quantiles = np.linspace(0, 1, self.bins + 1)[1:-1]
        self.edges = [np.unique(np.quantile(x[:, f], quantiles)) for f in range(x.shape[1])]
        shape = tuple(len(e) + 1 for e in self.edges)
        cells = np.ravel_multi_index(self._cells(x), shape)
        density, mean = [], len(y) / 2
        for members in (y, ~y):  # top, QCD
            counts = np.bincount(cells[members], minlength=int(np.prod(shape))).reshape(shape)
            prior = self.pseudocount * np.count_nonzero(members) / mean
            counts = _smooth(counts.astype(np.float64), self.smooth) + prior
            density.append(counts / counts.sum())
        self.table = density[0] / (density[0] + density[1])
        return self

    def score(self, features) -> np.ndarray:
        """(N,) p̂(top | x) for each jet, from the fitted histograms."""
        if self.table is None:
            raise ValueError("LikelihoodRatio.score before fit: fit it on training jets first")
        x = self._features(features)
        if x.shape[1] != len(self.edges):
            raise ValueError(f"features have {x.shape[1]} columns; fitted on {len(self.edges)}")
        return self.table[self._cells(x)]


def baseline_scores(train_features, train_labels, test_features, *,
                    bins: int = 40) -> dict[str, np.ndarray]:
    """The classical taggers' scores of the test jets, each fitted on the training jets.

    Features are (N, 2): the jet mass (GeV) and τ3/τ2, in that order (``BASELINE_FEATURES``;
    ``attnlab.models.jet_physics.baseline_features`` computes them). Every score is a
    ``LikelihoodRatio`` (so in [0, 1] and comparable at 0.5):

    - "mass": on the mass alone (a top-mass window, chosen as well as the data allow);
    - "tau32": on τ3/τ2 alone (≈ a cut τ3/τ2 < c: the ratio is nearly monotone);
    - "likelihood": on both, a 2-D histogram of bins × bins.

    Returns:
        {"mass": (M,), "tau32": (M,), "likelihood": (M,)} for M test jets.

    Examples:
        >>> rng = np.random.default_rng(1)
        >>> top = np.c_[rng.normal(175, 15, 400), rng.uniform(0.2, 0.7, 400)]
        >>> qcd = np.c_[rng.uniform(20, 250, 400), rng.uniform(0.5, 1.0, 400)]
        >>> x, y = np.r_[top, qcd], np.r_[np.ones(400), np.zeros(400)]
        >>> scores = baseline_scores(x, y, x, bins=10)
        >>> {k: round(roc_auc(v, y), 2) for k, v in scores.items()}
        {'mass': 0.89, 'tau32': 0.9, 'likelihood': 0.98}
    """
    train, test = np.asarray(train_features), np.asarray(test_features)
    for name, x in (("train_features", train), ("test_features", test)):
        if x.ndim != 2 or x.shape[1] != 2:
            raise ValueError(f"{name} must have shape (N, 2): mass, tau32; got {x.shape}")
    return {"mass": LikelihoodRatio(bins).fit(train[:, :1], train_labels).score(test[:, :1]),
            "tau32": LikelihoodRatio(bins).fit(train[:, 1:], train_labels).score(test[:, 1:]),
            "likelihood": LikelihoodRatio(bins).fit(train, train_labels).score(test)}
