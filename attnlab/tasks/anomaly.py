"""``attnlab train anomaly``: find the odd digit in a set (set anomaly detection).

Sets of ``--set-size`` 8×8 digit images from scikit-learn's bundled digits (``set_size - 1`` of
one class, one of another, shuffled); a ``SequenceClassifier`` with no positional encoding (a
set has no order) and the per-element head scores every image, and a softmax over the set's
positions picks the anomaly. Validation and test sets are fixed (the same in every run) and drawn
from images never used in training. Metric: ``test_accuracy`` (the anomaly found).
The run's figure ``attention.png`` shows test sets with the last layer's attention.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from ..errors import UsageError
from ..models.configs import SequenceClassifierConfig
from .base import Task, config_from_run, model_defaults

__all__ = ["AnomalyTask", "TASKS", "TASK", "build_model", "model_config_of"]

_VAL_SEED, _TEST_SEED = 1, 2  # fixed: every run is tested on the same sets


def model_config_of(cfg: dict[str, Any]) -> SequenceClassifierConfig:
    """The set classifier's config: the run's sizes, and what a set needs — 64 pixel features
    per element, a score per element, no positional encoding (a set has no order)."""
    from ..data.digits_sets import NUM_FEATURES

    return config_from_run(SequenceClassifierConfig, cfg, input_dim=NUM_FEATURES, head="element",
                                              positional="none")


def build_model(cfg: dict[str, Any]):
    """The set classifier the configuration describes (randomly initialised)."""
    from ..models import SequenceClassifier

    return SequenceClassifier.from_config(model_config_of(cfg))


def _fixed_sets(split: str, cfg: dict[str, Any]):
    from ..data.digits_sets import DigitSets, digit_pools

    n, seed = (cfg["val_sets"], _VAL_SEED) if split == "val" else (cfg["test_sets"], _TEST_SEED)
    return DigitSets(digit_pools()[split], n, set_size=cfg["set_size"], seed=seed)


@torch.no_grad()
def anomaly_accuracy(model, cfg: dict[str, Any]) -> float:
    """Fraction of the fixed test sets whose anomaly the model finds (plain torch)."""
    x, targets = _fixed_sets("test", cfg).materialize().tensors  # (N, T, 64), (N,)
    model.eval()
    preds = torch.cat([model.predict(chunk) for chunk in x.split(500)])
    return float((preds == targets).float().mean())


class AnomalyTask(Task):
    name = "anomaly"
    help = "set anomaly detection: find the odd digit among 10 (scikit-learn's digits)"
    # Measured (benchmarks/RESULTS.md, classify_speed): test accuracy 0.992-0.997 (seeds 1, 42)
    # with 57 s of CPU (one thread) for the whole command. D 64 takes half the time but gave
    # 0.989-0.993 over four seeds; without dropout the model fits its 1,078 training images
    # and stays at ~0.985.
    model_config = SequenceClassifierConfig
    model_flags = ("input_dropout",)
    defaults = {
        **model_defaults(SequenceClassifierConfig, ("input_dropout",)),
        "max_steps": 1500, "batch_size": 64, "lr": 1e-3, "warmup": 100, "model_dim": 128,
        "num_heads": 4, "num_layers": 2, "dim_feedforward": 256, "dropout": 0.1,
        "input_dropout": 0.1, "set_size": 10, "train_sets": 10000, "val_sets": 500,
        "test_sets": 1000, "threads": 1,
    }

    def add_arguments(self, parser) -> None:
        g = parser.add_argument_group("anomaly")
        g.add_argument("--set-size", type=int, metavar="N", help="images per set (default 10)")
        g.add_argument("--train-sets", type=int, metavar="N",
                       help="sets per epoch, with --epochs (default 10000; every set is new)")
        g.add_argument("--val-sets", type=int, metavar="N", help="validation sets (default 500)")
        g.add_argument("--test-sets", type=int, metavar="N", help="test sets (default 1000)")

    def validate(self, cfg: dict[str, Any]) -> None:
        from ..data.digits_sets import NUM_CLASSES, digit_pools
        import numpy as np

        smallest = min(int(np.bincount(p.labels, minlength=NUM_CLASSES).min())
                       for p in digit_pools().values())
        for key in ("set_size", "train_sets", "val_sets", "test_sets"):
            if not isinstance(cfg[key], int) or isinstance(cfg[key], bool) or cfg[key] < 1:
                raise UsageError(f"--{key.replace('_', '-')} must be a positive integer, "
                                 f"got {cfg[key]!r}")
        if not 2 <= cfg["set_size"] <= smallest + 1:
            raise UsageError(f"--set-size must be in [2, {smallest + 1}] (the smallest digit "
                             f"class of a split has {smallest} images), got {cfg['set_size']}")

    def run(self, cfg: dict[str, Any], run_dir: Path) -> dict[str, float]:
        from torch.utils.data import DataLoader

        from ..data import numbered_batches
        from ..data.digits_sets import DigitSets, digit_pools
        from ..training import finish, fit
        from ..training.classifier import ClassifierModule

        if cfg.get("epochs"):
            cfg["max_steps"] = cfg["epochs"] * math.ceil(cfg["train_sets"] / cfg["batch_size"])
        steps = cfg["max_steps"]
        # Every training index is a new set (seeded by --seed and the index): no set repeats.
        # Batch number n holds sets n·B ... n·B + B - 1, so DDP ranks draw different sets and a
        # resumed run goes on with the sets an uninterrupted run would have drawn next.
        B = cfg["batch_size"]
        train = DigitSets(digit_pools()["train"], steps * B, set_size=cfg["set_size"],
                          seed=cfg["seed"])

        def batch(n: int):
            xs, ts = zip(*(train[i] for i in range(n * B, n * B + B)))
            return torch.stack(xs), torch.tensor(ts)

        train_loader = numbered_batches(batch, steps)
        val_loader = DataLoader(_fixed_sets("val", cfg).materialize(), batch_size=500)
        model = build_model(cfg)
        module = ClassifierModule(model, cfg, steps)
        result = fit(module, train_loader, val_loader, cfg, run_dir, max_steps=steps,
                     val_check_interval=cfg.get("val_every") or max(1, steps // 5))
        metrics = {}
        if result.is_global_zero:  # other DDP ranks write nothing: no need to test there
            metrics = {"test_accuracy": anomaly_accuracy(model, cfg)}
            plot_figures(model, cfg, Path(run_dir))
        return finish(cfg, run_dir, model, metrics, result)

    def load(self, run_dir: Path, cfg: dict[str, Any]):
        from ..runs import load_weights

        model = build_model(cfg)
        load_weights(model, Path(run_dir) / "model.safetensors")
        return model.eval()

    def predict(self, run_dir: Path, cfg: dict[str, Any], text: str) -> str:
        """``--input`` is the indices of ``set_size`` images in ``load_digits()`` separated by
        spaces; prints the position (0-based) of the anomaly."""
        _, x = _parse_input(text, cfg)
        return str(int(self.load(run_dir, cfg).predict(x)[0]))

    def attention_maps(self, run_dir: Path, cfg: dict[str, Any], text: str):
        """``attnlab plot attention DIR --input "i1 ... iT"``: elements labelled by their digit."""
        from ..data.digits_sets import digit_labels

        indices, x = _parse_input(text, cfg)
        labels = [f"{i}:{d}" for i, d in enumerate(digit_labels(indices))]
        maps = self.load(run_dir, cfg).get_attention_maps(x)
        return [m[0] for m in maps], labels, labels

    def evaluate(self, run_dir: Path, cfg: dict[str, Any], data: str | None) -> dict[str, float]:
        if data is not None:
            raise UsageError("--data: the anomaly task is evaluated on its fixed test sets; "
                             "it takes no data file")
        return {"test_accuracy": anomaly_accuracy(self.load(run_dir, cfg), cfg)}


def _parse_input(text: str, cfg: dict[str, Any]) -> tuple[list[int], torch.Tensor]:
    """Image indices from ``--input`` and their features (1, T, 64); ``UsageError`` if bad."""
    from ..data.digits_sets import features_of

    try:
        indices = [int(t) for t in text.split()]
    except ValueError:
        raise UsageError(f"--input must be {cfg['set_size']} image indices (0..1796) "
                         f"separated by spaces, got {text!r}") from None
    if len(indices) < 2:
        raise UsageError(f"--input needs at least 2 image indices, got {len(indices)}")
    try:
        return indices, features_of(indices)[None]  # (1, T, 64)
    except ValueError as e:
        raise UsageError(f"--input: {e}") from None


@torch.no_grad()
def plot_figures(model, cfg: dict[str, Any], run_dir: Path) -> None:
    """``attention.png``: every layer's and head's attention on the first test set, elements
    labelled by digit with the anomaly starred (``attnlab.viz``); ``sets.png``: test sets as
    images next to the last layer's attention (``plot_sets``)."""
    from ..viz import plot_attention

    sets = _fixed_sets("test", cfg)
    x, target = sets[0]
    rows, _ = sets.draw(0)
    labels = [f"{d}*" if j == target else str(d) for j, d in enumerate(sets.pool.labels[rows])]
    model.eval()
    pred = int(model.predict(x[None])[0])
    plot_attention(model.get_attention_maps(x[None]), labels, labels, run_dir / "attention.png",
                   title=f"anomaly (starred) at {target}, predicted {pred}")
    plot_sets(model, cfg, run_dir / "sets.png")


@torch.no_grad()
def plot_sets(model, cfg: dict[str, Any], path: Path, *, num_sets: int = 3) -> None:
    """Test sets (images in a row; true anomaly framed red, prediction titled) next to the
    last layer's attention averaged over heads, the anomaly's column outlined: a working model
    attends to (or away from) the odd one out."""
    from io import BytesIO

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from ..data.digits_sets import digit_images
    from ..runs import atomic_write

    sets = _fixed_sets("test", cfg)
    T = cfg["set_size"]
    fig = plt.figure(figsize=(T * 0.9 + 3.6, num_sets * 1.9), constrained_layout=True)
    grid = fig.add_gridspec(num_sets, T + 3)
    model.eval()
    for r in range(num_sets):
        x, target = sets[r]
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
        ax.add_patch(Rectangle((target - 0.5, -0.5), 1, T, fill=False, edgecolor="red", lw=1.5))
        ax.set_title(f"last-layer attention; anomaly = {target}", fontsize=7)
        ax.set_xlabel("key (attended)", fontsize=7), ax.set_ylabel("query", fontsize=7)
        ax.tick_params(labelsize=6)
    buffer = BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    atomic_write(path, buffer.getvalue())


TASKS = {"anomaly": AnomalyTask()}
TASK = TASKS["anomaly"]  # the one task of this module, as it has always been importable
