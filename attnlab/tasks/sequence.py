"""``attnlab train reverse|copy|sort``: per-element prediction on random symbol sequences.

The course's headline experiment (UvA DL Tutorial 6): a one-layer, one-head Transformer learns
to reverse sequences of 16 digits; its attention map shows the anti-diagonal. Copy and sort are
the same set-up with other labels.

Training uses ``attnlab.training.TransformerPredictor`` (Lightning); everything else here —
``load``, ``predict``, ``evaluate``, the attention maps — uses the pure-torch
``attnlab.models.predictor.ElementPredictor`` with the same state dict, so it never imports
Lightning. Test metrics are computed by ``sequence_metrics``, shared by ``run`` and ``evaluate``.

Shapes: N sequences, T = seq_len, C = num_categories.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import torch

from ..errors import UsageError
from ..models.configs import ElementPredictorConfig
from .base import Task, config_from_run, model_defaults

__all__ = ["SequenceTask", "TASKS", "sequence_metrics", "parse_tokens", "build_model",
           "model_config_of"]


def model_config_of(cfg: dict[str, Any]) -> ElementPredictorConfig:
    """The ``ElementPredictorConfig`` of a run's configuration: one-hot symbols in, a class per
    position out (both ``--num-categories``).

    Example:
        >>> from attnlab.tasks import SHARED_DEFAULTS
        >>> model_config_of({**SHARED_DEFAULTS, "num_categories": 12}).num_classes
        12
    """
    C = cfg["num_categories"]
    return config_from_run(ElementPredictorConfig, cfg, input_dim=C, num_classes=C)


def build_model(cfg: dict[str, Any]):
    """The pure-torch ``ElementPredictor`` a run's configuration describes (randomly
    initialised); training builds ``TransformerPredictor`` from the same config."""
    from ..models.predictor import ElementPredictor

    return ElementPredictor.from_config(model_config_of(cfg))


def parse_tokens(text: str, num_categories: int, seq_len: int, *, what: str = "--input") -> list[int]:
    """Tokens separated by spaces -> symbols; ``UsageError`` naming a bad token or length."""
    tokens = text.split()
    if not tokens:
        raise UsageError(f"{what} is empty; give up to {seq_len} symbols separated by spaces")
    symbols = []
    for token in tokens:
        if not (token.isdigit() and int(token) < num_categories):
            raise UsageError(f"{what}: token {token!r} is not a symbol of this model "
                             f"(integers 0..{num_categories - 1})")
        symbols.append(int(token))
    if len(symbols) > seq_len:
        raise UsageError(f"{what} has {len(symbols)} tokens; this model takes at most "
                         f"--seq-len {seq_len} (the token past the end is {tokens[seq_len]!r})")
    return symbols


@torch.no_grad()
def sequence_metrics(model, inputs: torch.Tensor, labels: torch.Tensor,
                     lengths: torch.Tensor | None = None, *, prefix: str = "test_") -> dict[str, float]:
    """Token and whole-sequence accuracy of ``model`` on inputs/labels (N, T).

    With ``lengths`` (N,), only the first lengths[i] output positions of row i count (inputs of
    a shorter sequence padded by ``pad_to_length``).
    """
    predictions = model.predict(inputs)  # (N, T)
    correct = predictions == labels  # (N, T)
    if lengths is None:
        lengths = torch.full((len(inputs),), inputs.shape[1])
    counted = torch.arange(inputs.shape[1])[None, :] < lengths[:, None]  # (N, T)
    token = (correct & counted).sum() / counted.sum()
    sequence = (correct | ~counted).all(-1).float().mean()
    return {f"{prefix}token_accuracy": float(token), f"{prefix}sequence_accuracy": float(sequence)}


class SequenceTask(Task):
    """reverse, copy or sort ``--seq-len`` symbols out of ``--num-categories``."""

    model_config = ElementPredictorConfig  # its flags: --input-dropout
    defaults: dict[str, Any] = {
        **model_defaults(ElementPredictorConfig),
        # Found by timing on a 2-core CPU (docs/reverse.md): the course's 1-layer, 1-head, 32-wide
        # model, but a 20× higher peak lr with a short warm-up reaches 100% in ~100 steps.
        "num_categories": 10, "seq_len": 16,
        "train_size": 50_000, "val_size": 1_000, "test_size": 10_000,
        "model_dim": 32, "num_heads": 1, "num_layers": 1, "dim_feedforward": 64,
        "lr": 1e-2, "warmup": 20, "batch_size": 128, "max_steps": 600,
        "val_every": 10, "early_stop": True, "threads": 1, "grad_clip": 1.0,
    }

    def __init__(self, name: str, help: str, **defaults: Any) -> None:
        self.name, self.help = name, help
        self.defaults = {**SequenceTask.defaults, **defaults}

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        g = parser.add_argument_group(f"{self.name} task")
        g.add_argument("--num-categories", type=int, metavar="N", help="symbols 0..N-1")
        g.add_argument("--seq-len", type=int, metavar="N", help="sequence length")
        g.add_argument("--train-size", type=int, metavar="N", help="training sequences")
        g.add_argument("--val-size", type=int, metavar="N", help="validation sequences")
        g.add_argument("--test-size", type=int, metavar="N", help="test sequences")
        g.add_argument("--early-stop", action=argparse.BooleanOptionalAction,
                       help="stop once validation sequence accuracy is 1.0 at three validations "
                            "in a row (--max-steps is then an upper bound)")

    def validate(self, cfg: dict[str, Any]) -> None:
        for key, low in (("num_categories", 2), ("seq_len", 1), ("train_size", 1),
                         ("val_size", 1), ("test_size", 1), ("val_every", 1), ("threads", 1)):
            value = cfg.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise UsageError(f"--{key.replace('_', '-')} must be an integer >= {low}, got {value!r}")

    def memory_estimate(self, cfg: dict[str, Any]) -> list[tuple[str, float]]:
        """The three splits' int64 inputs and labels, held in memory; and the attention maps
        of one sequence (every layer and head, T × T), which the figures draw."""
        n = cfg["train_size"] + cfg["val_size"] + cfg["test_size"]
        T = cfg["seq_len"]
        maps = cfg["num_layers"] * cfg["num_heads"] * T * T * 4
        return [*super().memory_estimate(cfg),
                (f"{n:,} sequences of --seq-len {T:,}", 2 * n * T * 8),
                (f"the attention maps of one sequence ({T:,} x {T:,} per head and layer)", maps)]

    # ---- data and model -----------------------------------------------------------------
    def dataset(self, cfg: dict[str, Any], split: str):
        from ..data import SequenceDataset

        return SequenceDataset(self.name, cfg["num_categories"], cfg["seq_len"],
                               cfg[f"{split}_size"], seed=cfg["seed"], split=split)

    def budget(self, cfg: dict[str, Any]) -> int:
        """The step budget: --epochs × batches per epoch, or --max-steps."""
        if cfg.get("epochs"):
            return cfg["epochs"] * math.ceil(cfg["train_size"] / cfg["batch_size"])
        return cfg["max_steps"]

    # ---- training -----------------------------------------------------------------------
    def run(self, cfg: dict[str, Any], run_dir: Path) -> dict[str, float]:
        from ..data import batch_loader
        from ..training import StopAtTarget, finish, fit  # Lightning is imported here
        from ..training.predictor import TransformerPredictor

        train, val = self.dataset(cfg, "train"), self.dataset(cfg, "val")
        max_steps = self.budget(cfg)
        model = model_config_of(cfg).as_dict()
        del model["max_len"]  # the course's signature has none: both use the same default
        module = TransformerPredictor(**model, lr=cfg["lr"], warmup=cfg["warmup"],
                                      max_iters=max_steps, schedule=cfg["schedule"])
        callbacks = [StopAtTarget("val_seq_acc", 1.0, times=3)] if cfg["early_stop"] else []
        result = fit(module, batch_loader(train, cfg["batch_size"], shuffle=True, seed=cfg["seed"]),
                     batch_loader(val, len(val), shuffle=False), cfg, run_dir,
                     max_steps=max_steps, val_check_interval=min(cfg["val_every"], max_steps),
                     callbacks=callbacks)
        metrics = {}
        if result.is_global_zero:
            test = self.dataset(cfg, "test")
            metrics = sequence_metrics(module, test.inputs, test.labels)
            self.figures(module, cfg, run_dir, test.inputs[0].tolist(), result.steps, max_steps)
        return finish(cfg, run_dir, module, metrics, result)

    def figures(self, model, cfg, run_dir: Path, sequence: list[int], steps: int, max_steps: int) -> None:
        """attention.png (the maps of one test sequence) and lr_schedule.png."""
        from ..viz import lr_curve, plot_attention, plot_lr_schedule

        model.eval()
        maps, x_labels, y_labels = self._maps(model, cfg, sequence, len(sequence))
        plot_attention(maps, x_labels, y_labels, Path(run_dir) / "attention.png",
                       title=f"{self.name}: attention of a test sequence")
        curve = lr_curve(cfg["schedule"], warmup=cfg["warmup"], max_iters=max_steps,
                         d_model=cfg["model_dim"], lr=cfg["lr"])
        label = (f"{cfg['schedule']} (--lr {cfg['lr']:g}, warm-up {cfg['warmup']}, "
                 f"budget {max_steps} steps)")
        plot_lr_schedule({label: curve}, Path(run_dir) / "lr_schedule.png",
                         title=f"{self.name}: learning-rate schedule",
                         mark_step=steps if steps < max_steps else None)

    # ---- using a trained run (no Lightning) ----------------------------------------------
    def load(self, run_dir: Path, cfg: dict[str, Any]):
        from ..runs import load_weights

        model = build_model(cfg)
        load_weights(model, Path(run_dir) / "model.safetensors")
        return model.eval()

    def _padded(self, cfg, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        from ..data import pad_to_length

        padded = [pad_to_length(self.name, r, cfg["seq_len"], cfg["num_categories"]) for r in rows]
        return (torch.tensor([p for p, _ in padded]), torch.tensor([len(r) for r in rows]),
                [start for _, start in padded])

    def predict(self, run_dir: Path, cfg: dict[str, Any], text: str) -> str:
        tokens = parse_tokens(text, cfg["num_categories"], cfg["seq_len"])
        inputs, _, _ = self._padded(cfg, [tokens])
        prediction = self.load(run_dir, cfg).predict(inputs)[0, : len(tokens)]
        return " ".join(str(int(t)) for t in prediction)

    def evaluate(self, run_dir: Path, cfg: dict[str, Any], data: str | None) -> dict[str, float]:
        from ..data import make_labels

        model = self.load(run_dir, cfg)
        if data is None:
            test = self.dataset(cfg, "test")
            return sequence_metrics(model, test.inputs, test.labels)
        path = Path(data)
        if not path.is_file():
            raise UsageError(f"--data: file not found: {path}")
        rows = [parse_tokens(line, cfg["num_categories"], cfg["seq_len"], what=f"--data {path} line {i}")
                for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if line.strip()]
        if not rows:
            raise UsageError(f"--data {path} holds no sequences (one per line, tokens separated by spaces)")
        inputs, lengths, _ = self._padded(cfg, rows)
        labels = torch.zeros_like(inputs)
        for i, r in enumerate(rows):
            labels[i, : len(r)] = make_labels(self.name, torch.tensor([r]))[0]
        return sequence_metrics(model, inputs, labels, lengths)

    def _maps(self, model, cfg, tokens: list[int], n: int):
        inputs, _, starts = self._padded(cfg, [tokens])
        maps = [m[0] for m in model.get_attention_maps(inputs)]  # L × (H, T, T)
        labels = [str(t) if starts[0] <= i < starts[0] + n else f"({t})"
                  for i, t in enumerate(inputs[0].tolist())]  # padding in parentheses
        return maps, labels, labels

    def attention_maps(self, run_dir: Path, cfg: dict[str, Any], text: str):
        """``attnlab plot attention``: (L × (H, T, T) maps, key labels, query labels)."""
        tokens = parse_tokens(text, cfg["num_categories"], cfg["seq_len"])
        return self._maps(self.load(run_dir, cfg), cfg, tokens, len(tokens))


TASKS = {
    "reverse": SequenceTask("reverse", "reverse a sequence of symbols (the course's experiment)"),
    "copy": SequenceTask("copy", "copy a sequence of symbols"),
    # sorting needs to compare every pair: one 1-head layer stalls at ~97% of sequences; two
    # 4-head layers do it, given the whole cosine schedule: early stopping on 1,000 validation
    # sequences ended at 0.9994 of the test set, 2,500 steps reach 1.0 (docs/reverse.md)
    "sort": SequenceTask("sort", "sort a sequence of symbols", model_dim=64, num_heads=4,
                         num_layers=2, dim_feedforward=128, lr=5e-3, max_steps=2500,
                         early_stop=False),
}
