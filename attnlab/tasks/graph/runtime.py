"""The runtime module of ``attnlab train graph``, the part that imports torch (the spec:
``attnlab.tasks.graph``): the graph and its node split, the GraphNet, full-batch training, the
test accuracy and a trained run's use.
Lightning is imported inside ``run`` only.

Shapes: N nodes, F features, C classes, L layers, H heads.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from ...data import numbered_batches
from ...data.graphs import block_model, karate, split_nodes
from ...errors import UsageError
from ...models.configs import GraphNetConfig
from ...models.graph_net import GraphNet
from ...run_config import RunSettings
from ...runs import load_weights
from ..base import (attends, config_from_run, each_input, fraction, loads, predicts,
                    probabilities_of, rng_kept, without_nan_metrics)

__all__ = ["graph_of", "build_model", "run", "load", "input_reader", "predict_many", "evaluate",
           "attention_maps", "attention_focus"]

IGNORE = -100  # the target of a node the loss does not count (cross_entropy's ignore_index)


def graph_of(cfg: RunSettings):
    """(features, adjacency, labels, class names, node names, masks) of the run's graph and
    split: the same for every run with the same graph settings."""
    if cfg.graph == "karate":
        x, adjacency, labels, classes, names = karate()
    else:
        x, adjacency, labels, classes, names = block_model(
            cfg.nodes, cfg.communities, cfg.p_in, cfg.p_out, cfg.feature_noise,
            seed=cfg.graph_seed)
    masks = split_nodes(labels, cfg.train_per_class, cfg.val_per_class, cfg.graph_seed)
    return x, adjacency, labels, classes, names, masks


def build_model(cfg: RunSettings) -> GraphNet:
    """The run's ``GraphNet``, from its settings and what it derived from its graph: the node
    features' width ``in_dim`` and the number of classes ``num_classes`` (both recorded in
    ``config.yaml`` by every graph run).

    Examples:
        >>> from attnlab.tasks import get_task
        >>> cfg = get_task("graph").config(in_dim=34, num_classes=2, model_dim=4, num_heads=2)
        >>> build_model(cfg)(torch.zeros(3, 34), torch.eye(3, dtype=torch.bool)).shape
        torch.Size([3, 2])
    """
    return GraphNet(config_from_run(GraphNetConfig, cfg))


def _targets(labels, mask):
    return torch.where(mask, labels, torch.full_like(labels, IGNORE))


@torch.no_grad()
def _accuracy(model, x, adjacency, labels, mask) -> float:
    return _scored(model, x, adjacency, labels, mask)[0]


@torch.no_grad()
def _scored(model, x, adjacency, labels, mask) -> tuple[float, list[bool]]:
    """(the accuracy on the nodes of ``mask``; for each of them, whether the model's scores
    of it are all finite: the argmax of a NaN row is the first class, as sure as any)."""
    model.eval()
    scores = model(x, adjacency)  # (N, C)
    return (fraction(scores.argmax(-1)[mask] == labels[mask]),
            scores[mask].isfinite().all(-1).tolist())


def run(task, cfg: RunSettings, run_dir: Path,
        checked: Any = None) -> dict[str, float]:
    """Full-batch training on the training nodes, validation on the validation nodes; then the
    test accuracy on every other node."""
    from ...training import finish, fit  # Lightning: here only
    from ...training.graph import GraphModule

    x, adjacency, labels, classes, _, masks = graph_of(cfg)
    cfg = cfg.derive(classes=classes, in_dim=x.shape[1], num_classes=len(classes))
    model = build_model(cfg)
    steps = cfg.max_steps
    train = numbered_batches(lambda n: (x, adjacency, _targets(labels, masks["train"])), steps)
    val = DataLoader([(x, adjacency, _targets(labels, masks["val"]))], batch_size=None)
    result = fit(GraphModule(model, cfg, steps), train, val, cfg, run_dir, max_steps=steps,
                 val_check_interval=cfg.val_every or max(1, steps // 5))
    metrics = {}
    if result.is_global_zero:
        metrics = {"test_accuracy": _accuracy(model, x, adjacency, labels, masks["test"])}
    return finish(cfg, run_dir, model, metrics, result)


# ---- a trained run (no Lightning) ------------------------------------------------------------
@loads
def load(task, run_dir: Path, cfg: RunSettings) -> GraphNet:
    model = build_model(cfg)
    load_weights(model, Path(run_dir) / "model.safetensors")
    return model.eval()


def _node(text: str, names: list[str]) -> int:
    if text.strip() not in names:
        raise UsageError(f"--input must be a node of the graph, 0 to {len(names) - 1}, got "
                         f"{text.strip()!r}")
    return names.index(text.strip())


def input_reader(task, run_dir: Path, cfg: RunSettings):
    """One input's node, as ``predict_many`` reads it (``_node``)."""
    names = graph_of(cfg)[4]
    return lambda text: _node(text, names)


@predicts
@torch.no_grad()
def predict_many(task, run_dir: Path, cfg: RunSettings, texts: list[str],
                 labels: list[str]) -> list[dict[str, Any]]:
    """Each named node's class and class probabilities, from one pass over the graph."""
    x, adjacency, _, classes, _, _ = graph_of(cfg)
    nodes = each_input(texts, labels, input_reader(task, run_dir, cfg))
    p = load(task, run_dir, cfg)(x, adjacency).float().softmax(-1)  # (N, C)
    return [{"prediction": classes[int(p[n].argmax())], "probabilities": probabilities_of(classes, p[n])}
            for n in nodes]


@rng_kept()  # a notebook's seeded draws after it are as before it
def evaluate(task, run_dir: Path, cfg: RunSettings, data: str | None) -> dict[str, float]:
    """The test accuracy on the run's test nodes (the graph is made again from its settings)."""
    if data is not None:
        raise UsageError("--data: a graph run is evaluated on its own graph's test nodes")
    x, adjacency, labels, _, names, masks = graph_of(cfg)
    accuracy, finite = _scored(load(task, run_dir, cfg), x, adjacency, labels, masks["test"])
    tested = [f"test node {name}" for name, test in zip(names, masks["test"].tolist()) if test]
    return without_nan_metrics({"test_accuracy": accuracy}, finite, tested, run_dir)


@attends
def attention_maps(task, run_dir: Path, cfg: RunSettings, text: str):
    """Every graph attention layer's weights over the whole graph, L × (H, N, N), the nodes
    labelled ``node:class``. The graph is the input: ``--input`` names the node whose row
    the figure and the page single out (``attention_focus``)."""
    if cfg.kind != "gat":
        raise UsageError(f"a --kind {cfg.kind} run has no attention (train --kind gat)")
    x, adjacency, labels, classes, names, _ = graph_of(cfg)
    _node(text, names)
    maps = load(task, run_dir, cfg).get_attention_maps(x, adjacency)
    tokens = [f"{n}:{classes[int(c)]}" for n, c in zip(names, labels)]
    return maps, tokens, tokens


def attention_focus(task, run_dir: Path, cfg: RunSettings, text: str) -> int:
    """The query row ``--input`` names (`plot attention` outlines it, `view` opens
    pinned on it): the node's own row, its attention over its neighbours."""
    return _node(text, graph_of(cfg)[4])
