"""The runtime module of ``attnlab train anomaly``, the part that imports torch (the spec:
``attnlab.tasks.anomaly``): the digit sets, the set classifier, training, the test accuracy, the
figures and the use of a trained run.

The model is a ``SequenceClassifier`` with no positional encoding (a set has no order) and the
per-element head: a score s_i per image, and softmax_i(s) over the set's positions picks the
anomaly. Validation and test sets are fixed (the same in every run, whatever ``--seed`` is);
every training set is new. Lightning is imported inside ``run`` only, matplotlib inside
``plot_sets`` only, so ``predict`` and ``evaluate`` load neither.

Shapes: N sets, T = set_size images per set, F = 64 pixel features, L layers, H heads.
"""
from __future__ import annotations

import math
from collections import Counter
from io import BytesIO
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from ...data import numbered_batches
from ...data.digits_sets import (NUM_FEATURES, DigitSets, check_image_indices, digit_images,
                                 digit_labels, digit_pools, features_of)
from ...errors import UsageError
from ...models import SequenceClassifier
from ...models.configs import SequenceClassifierConfig
from ...run_config import RunSettings
from ...notes import say
from ...runs import atomic_write, load_weights
from ...settings import epoch_steps
from ...viz import plot_attention
from ...explorer.record import fit_weights_text
from ..base import (Task, attends, config_from_run, decimal, each_input, fraction, loads,
                    predicts, probability_list, rng_kept, without_nan_metrics)
from ..spaced_input import spaced_tokens

__all__ = ["model_config_of", "build_model", "fixed_sets", "anomaly_accuracy", "run", "load",
           "input_reader", "predict_many", "evaluate", "attention_maps", "plot_figures", "plot_sets"]

_VAL_SEED, _TEST_SEED = 1, 2  # fixed: every run is tested on the same sets


def model_config_of(cfg: RunSettings) -> SequenceClassifierConfig:
    """The set classifier's config: the run's sizes, and what a set needs — 64 pixel features
    per element, a score per element, no positional encoding (a set has no order).

    Examples:
        >>> from attnlab.tasks import get_task
        >>> config = model_config_of(get_task("anomaly").config())
        >>> config.input_dim, config.head, config.positional
        (64, 'element', 'none')
    """
    return config_from_run(SequenceClassifierConfig, cfg, input_dim=NUM_FEATURES, head="element",
                           positional="none")


def build_model(cfg: RunSettings) -> SequenceClassifier:
    """The set classifier the configuration describes (randomly initialised)."""
    return SequenceClassifier(model_config_of(cfg))


def fixed_sets(split: str, cfg: RunSettings) -> DigitSets:
    """The ``--val-sets`` validation or ``--test-sets`` test sets ("val" or "test"): drawn with
    a fixed seed from their pool, the same in every run."""
    n, seed = (cfg.val_sets, _VAL_SEED) if split == "val" else (cfg.test_sets, _TEST_SEED)
    return DigitSets(digit_pools()[split], n, set_size=cfg.set_size, seed=seed)


@torch.no_grad()
def anomaly_accuracy(model, cfg: RunSettings) -> float:
    """Fraction of the fixed test sets whose anomaly the model finds (plain torch)."""
    x, targets = fixed_sets("test", cfg).materialize().tensors  # (N, T, 64), (N,)
    model.eval()
    preds = torch.cat([model.predict(chunk) for chunk in x.split(500)])
    return fraction(preds == targets)


@torch.no_grad()
def _scored(model, cfg: RunSettings) -> tuple[float, list[bool]]:
    """(``anomaly_accuracy``, for each fixed test set whether the model's scores of its
    elements are all finite) from one building of the sets and one pass of the model: the
    argmax of a NaN row is element 0, as sure as any. ``predict`` is that argmax."""
    x, targets = fixed_sets("test", cfg).materialize().tensors  # (N, T, 64), (N,)
    model.eval()
    scores = torch.cat([model(chunk) for chunk in x.split(500)])  # (N, T)
    return fraction(scores.argmax(-1) == targets), scores.isfinite().all(-1).tolist()


def _training_batches(cfg: RunSettings, steps: int):
    """``steps`` batches of new training sets. Every training index is a new set (seeded by
    --seed and the index): no set repeats. Batch number n holds sets n·B ... n·B + B - 1, so DDP
    ranks draw different sets and a resumed run continues with the sets an uninterrupted run would
    have drawn next."""
    B = cfg.batch_size
    train = DigitSets(digit_pools()["train"], steps * B, set_size=cfg.set_size,
                      seed=cfg.seed)

    def batch(n: int):
        xs, ts = zip(*(train[i] for i in range(n * B, n * B + B)))
        return torch.stack(xs), torch.tensor(ts)  # (B, T, 64), (B,)

    return numbered_batches(batch, steps)


def run(task: Task, cfg: RunSettings, run_dir: Path,
        checked: Any = None) -> dict[str, float]:
    """Train on new sets for --max-steps (or --epochs of --train-sets), validating on the fixed
    validation sets; then test and draw the figures."""
    from ...training import finish, fit  # Lightning: here only, never for predict
    from ...training.classifier import ClassifierModule

    # config.yaml keeps --epochs alone as the budget: the steps are not written back
    steps = (epoch_steps(cfg, math.ceil(cfg.train_sets / cfg.batch_size), cfg.epochs)
             if cfg.epochs else cfg.max_steps)
    val_loader = DataLoader(fixed_sets("val", cfg).materialize(), batch_size=500)
    model = build_model(cfg)
    module = ClassifierModule(model, cfg, steps)
    result = fit(module, _training_batches(cfg, steps), val_loader, cfg, run_dir, max_steps=steps,
                 val_check_interval=cfg.val_every or max(1, steps // 5))
    metrics = {}
    if result.is_global_zero:  # other DDP ranks write nothing: no need to test there
        metrics = {"test_accuracy": anomaly_accuracy(model, cfg)}
        plot_figures(model, cfg, Path(run_dir), weights=fit_weights_text(result.steps, result.best))
    return finish(cfg, run_dir, model, metrics, result)


# ---- using a trained run (no Lightning) ----------------------------------------------------
@loads
def load(task: Task, run_dir: Path, cfg: RunSettings) -> SequenceClassifier:
    """The trained set classifier of ``run_dir`` (eval mode)."""
    model = build_model(cfg)
    load_weights(model, Path(run_dir) / "model.safetensors")
    return model.eval()



def input_reader(task: Task, run_dir: Path, cfg: RunSettings):
    """One input's image indices, as ``predict_many`` reads it (``_indices``: no images)."""
    return lambda text: _indices(text, cfg)


@predicts
@torch.no_grad()
def predict_many(task: Task, run_dir: Path, cfg: RunSettings, texts: list[str],
                 labels: list[str]) -> list[dict[str, Any]]:
    """Every set's anomaly position (0-based) and the probability of each position. An input
    is the indices of images in ``load_digits()`` separated by spaces; sets of one size go
    through the model together."""
    parsed = each_input(texts, labels, input_reader(task, run_dir, cfg))
    _note_no_odd_one(parsed, labels)
    sets = [features_of(indices) for indices in parsed]  # (T_i, 64)
    model = load(task, run_dir, cfg)
    found: list[dict[str, Any]] = [{} for _ in sets]
    by_size: dict[int, list[int]] = {}
    for i, x in enumerate(sets):
        by_size.setdefault(x.shape[0], []).append(i)
    for rows in by_size.values():
        for start in range(0, len(rows), 1024):
            chunk = rows[start:start + 1024]
            p = model(torch.stack([sets[i] for i in chunk])).float().softmax(-1)  # (B, T)
            for i, row in zip(chunk, p):
                found[i] = {"prediction": str(int(row.argmax())),
                            "probabilities": probability_list(row)}
    return found


def _note_no_odd_one(sets: list[list[int]], labels: list[str]) -> None:
    """A note on stderr when an input is not what the run learned, images of one digit and one
    of another (three 3s, or two 3s and two 7s): its argmax is printed all the same, and a
    user would read it as the odd one the set does not have."""
    odd = [(label, digits) for label, digits in zip(labels, map(digit_labels, sets))
           if sorted(Counter(digits).values()) != [1, len(digits) - 1]]
    if odd:
        label, digits = odd[0]

        def line(count: int, _) -> str:
            more = f" (and {count - 1} more inputs)" if count > 1 else ""
            return (f"note: {label} is not one digit's images and one other's (digits "
                    f"{' '.join(map(str, digits))}){more}: the run learned to find that one, "
                    f"so its answer here is a guess")
        say("no odd one", len(odd), line, len(labels))


@attends
def attention_maps(task: Task, run_dir: Path, cfg: RunSettings, text: str):
    """``attnlab plot attention DIR --input "i1 ... iT"``: L × (H, T, T) maps, elements
    labelled by their position and digit."""
    indices, x = _parse_input(text, cfg)
    labels = [f"{i}:{d}" for i, d in enumerate(digit_labels(indices))]
    maps = load(task, run_dir, cfg).get_attention_maps(x)  # L × (1, H, T, T)
    return [m[0] for m in maps], labels, labels


@rng_kept()  # a notebook's seeded draws after it are as before it
def evaluate(task: Task, run_dir: Path, cfg: RunSettings, data: str | None) -> dict[str, float]:
    """The test accuracy on the fixed test sets (the task takes no data file)."""
    if data is not None:
        raise UsageError("--data: the anomaly task is evaluated on its fixed test sets; "
                         "it takes no data file")
    if cfg.set_size < 3:  # a run of before sets of 2 were refused: its scores were chance
        raise UsageError(f"{run_dir / 'config.yaml'}: set_size {cfg.set_size}: a set of 2 has "
                         f"no odd one, so no test set can score this run; train it again with "
                         f"--set-size 3 or more")
    accuracy, finite = _scored(load(task, run_dir, cfg), cfg)
    labels = [f"test set {i}" for i in range(1, len(finite) + 1)]
    return without_nan_metrics({"test_accuracy": accuracy}, finite, labels, run_dir)


def _parse_input(text: str, cfg: RunSettings) -> tuple[list[int], torch.Tensor]:
    """Image indices from ``--input`` and their features (1, T, 64); ``UsageError`` if bad."""
    indices = _indices(text, cfg)
    return indices, features_of(indices)[None]  # (1, T, 64)


def _indices(text: str, cfg: RunSettings) -> list[int]:
    """Image indices from ``--input``, each of an image of ``load_digits()``; ``UsageError``
    if bad."""
    tokens = spaced_tokens(text, "--input", "set")
    # digits only, as reverse's tokens: int() also reads '1_0' and '+10', as image 10
    numbers = [decimal(t.removeprefix("-")) for t in tokens]
    if None in numbers:
        raise UsageError(f"--input must be image indices (0..1796) separated by spaces, at "
                         f"least 3 (this run was trained on sets of {cfg.set_size}), "
                         f"got {text!r}")
    # a negative one is named by features_of's range
    indices = [-n if t.startswith("-") else n for t, n in zip(tokens, numbers)]
    if len(indices) < 3:  # of 2 images, one of each class, neither is the odd one
        raise UsageError(f"--input needs at least 3 image indices (a set of 2 has no odd one), "
                         f"got {len(indices)}")
    try:
        check_image_indices(indices)
    except ValueError as e:
        raise UsageError(f"--input: {e}") from None
    return indices


# ---- figures -------------------------------------------------------------------------------
@torch.no_grad()
def plot_figures(model, cfg: RunSettings, run_dir: Path, *, weights: str | None = None) -> None:
    """``attention.png``: every layer's and head's attention on the first test set, elements
    labelled by digit with the anomaly starred (``attnlab.viz``), its title naming ``weights``
    (``explorer.record.fit_weights_text``); ``sets.png``: test sets as
    images next to the last layer's attention (``plot_sets``), titled ``weights`` too."""
    sets = fixed_sets("test", cfg)
    x, target = sets[0]  # (T, 64), int
    rows, _ = sets.draw(0)
    labels = [f"{d}*" if j == target else str(d) for j, d in enumerate(sets.pool.labels[rows])]
    model.eval()
    pred = int(model.predict(x[None])[0])
    plot_attention(model.get_attention_maps(x[None]), labels, labels, run_dir / "attention.png",
                   title=f"anomaly (starred) at {target}, predicted {pred}"
                   + (f"\n{weights}" if weights else ""))
    plot_sets(model, cfg, run_dir / "sets.png", weights=weights)


@torch.no_grad()
def plot_sets(model, cfg: RunSettings, path: Path, *, num_sets: int = 3,
              weights: str | None = None) -> None:
    """The first ``num_sets`` test sets (fewer where --test-sets is smaller; images in a row,
    true anomaly framed red, prediction titled) next to the last layer's attention averaged
    over heads, the anomaly's column outlined: a working model attends to (or away from) the
    odd one out; ``weights``, which weights drew it (``fit_weights_text``), as its title."""
    # matplotlib only when drawing (attnlab.viz's rule): predict and evaluate never load it.
    from ...viz import _pyplot

    plt = _pyplot()

    sets = fixed_sets("test", cfg)
    num_sets = min(num_sets, len(sets))  # --test-sets 1: the one set tested, no other
    T = cfg.set_size
    fig = plt.figure(figsize=(T * 0.9 + 3.6, num_sets * 1.9), constrained_layout=True)
    grid = fig.add_gridspec(num_sets, T + 3)
    model.eval()
    for r in range(num_sets):
        x, target = sets[r]  # (T, 64), int
        pred = int(model.predict(x[None])[0])
        attention = model.get_attention_maps(x[None])[-1][0].mean(0)  # (T, T), heads averaged
        for j, image in enumerate(digit_images(sets.digit_indices(r))):
            ax = fig.add_subplot(grid[r, j])
            ax.imshow(image, cmap="gray_r")
            ax.set_xticks([]), ax.set_yticks([])
            if j == target:
                for spine in ax.spines.values():
                    spine.set(color="red", linewidth=2.5)
            if j == pred:
                ax.set_title("predicted", fontsize=7, color="green" if pred == target else "red")
        ax = fig.add_subplot(grid[r, T:])
        ax.imshow(attention.numpy(), cmap="viridis", vmin=0)
        ax.add_patch(plt.Rectangle((target - 0.5, -0.5), 1, T, fill=False, edgecolor="red",
                                   lw=1.5))
        ax.set_title(f"last-layer attention; anomaly = {target}", fontsize=7)
        ax.set_xlabel("key (attended)", fontsize=7), ax.set_ylabel("query", fontsize=7)
        ax.tick_params(labelsize=6)
    if weights:
        fig.suptitle(weights, fontsize=9, parse_math=False)
    buffer = BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    atomic_write(path, buffer.getvalue())
