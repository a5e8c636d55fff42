"""``attnlab train graph``: classify the nodes of one graph — graph attention against the same
network without attention and against an MLP that ignores the edges (the spec: flags, defaults,
checks; the runtime module, the part that imports torch, is ``attnlab.tasks.graph.runtime``).

Graphs (``--graph``), made here, nothing downloaded: ``karate`` — Zachary's karate club (34
members; which club each joined; one-hot identities as features, so only the edges tell) — and
``sbm`` — a stochastic block model with ``--communities`` groups and noisy one-hot features.
``--train-per-class`` and ``--val-per-class`` labelled nodes per class (seeded by
``--graph-seed``); every other node is a test node. Training is full-batch: each step sees the
whole graph and the loss counts the training nodes. Metric: ``test_accuracy``.

Imports neither torch nor Lightning.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ...errors import UsageError
from ...models.configs import GraphNetConfig
from ...run_config import RunSettings
from ...settings import nodes_leave_a_test_node, seed_setting, setting
from ..base import Capabilities, Runtime, Task

__all__ = ["GraphSettings", "GraphTask", "TASKS", "GRAPHS"]

GRAPHS = ("karate", "sbm")
# members of the karate club's smaller class, as split_nodes counts (17 each: networkx's "club")
KARATE_SMALLER_CLUB = 17


@dataclass
class GraphSettings:
    """The flags of ``attnlab train graph`` (docs/history.md, "Graph attention")."""

    graph: str = setting("karate", choices=GRAPHS,
                         help="karate: Zachary's karate club; sbm: a stochastic block model")
    nodes: int = setting(300, help="nodes of the sbm graph", low=4)
    communities: int = setting(3, help="groups (classes) of the sbm graph", low=2)
    p_in: float = setting(0.1, help="sbm: link probability within a group", low=0, most=1)
    p_out: float = setting(0.01, help="sbm: link probability between groups", low=0, most=1)
    feature_noise: float = setting(1.0, help="sbm: noise on the one-hot group features", low=0)
    train_per_class: int = setting(4, help="labelled training nodes per class", low=1)
    val_per_class: int = setting(4, help="validation nodes per class", low=1)
    graph_seed: int = seed_setting(0, help="seed of the sbm graph and of the node split")


@dataclass
class GraphDerived:
    """What a graph run derives from its graph (``runtime.run``): the class names; and it
    resolves the model's node features' width and number of classes."""

    resolves: ClassVar[tuple[str, ...]] = ("in_dim", "num_classes")

    classes: list[str] | None = None


class GraphRunConfig(RunSettings[GraphSettings, GraphNetConfig, GraphDerived]):
    """The settings of a graph run: ``cfg.model`` is the ``GraphNet``'s config."""


class GraphTask(Task):
    """Node classification on one graph."""

    name = "graph"
    help = "node classification with graph attention (karate club, stochastic block model)"
    run_config = GraphRunConfig
    val_metrics = ("val_loss", "val_acc")  # over the validation nodes
    model_flags = ("kind", "model_dim", "num_heads", "num_layers", "dropout")
    # the node --input names: its row is the one `plot attention` outlines and `view` pins
    capabilities = Capabilities(attention_focus=True)
    # Veličković et al. (2018)'s Cora settings (GraphNetConfig's: 8 heads of 8, dropout 0.6)
    # and their lr 5e-3
    overrides = {"max_steps": 200, "lr": 5e-3, "warmup": 10, "batch_size": 1, "threads": 1}

    def runtime(self) -> Runtime:
        """``runtime.py`` of this package (torch, the model, training), imported on first use."""
        from . import runtime

        return runtime

    def memory_estimate(self, cfg: dict[str, Any]) -> list[tuple[str, float]]:
        """The graph as an N x N mask, and for graph attention each head's N x N scores (float32)
        of one layer: dense, so --nodes 10^8 would need ~10^17 bytes (it ran the machine out
        of memory instead of being refused)."""
        n = int(cfg.get("nodes") or 0) if cfg.get("graph") == "sbm" else 34
        found = [(f"the graph's {n:,} x {n:,} neighbourhood mask", n * n)]
        if cfg.get("kind", "gat") == "gat":
            h = int(cfg.get("num_heads") or 1)
            found.append((f"one layer's attention scores ({h} heads x {n:,} x {n:,})", 4 * h * n * n))
        return found

    def adapt_layout(self, cfg: dict[str, Any]) -> dict[str, Any]:
        """Graph attention (or mean-neighbour, or MLP) layers, not Transformer blocks."""
        return {"blocks": 0, "encoder": False, "attention": False}

    def heads_split_width(self, cfg: dict[str, Any]) -> bool:
        """--model-dim is each head's width here (8 heads of 8), not split among them."""
        return False

    def unused_settings(self, cfg: dict[str, Any]) -> list[tuple[list[str], str]]:
        """The karate club is one fixed graph: the sbm's settings have nothing to set there;
        only graph attention has heads (--num-heads 4 with --kind mean was taken, unused,
        and recorded in config.yaml); and a network of one layer has only its output layer,
        of one head as wide as the classes."""
        unused = []
        if cfg.get("kind", "gat") != "gat":
            unused.append((["num_heads"], f"for --kind gat only; a --kind {cfg['kind']} "
                                          f"network has no attention heads"))
        if cfg.get("num_layers") == 1:  # --num-heads 4 trained one head, recorded as 4
            unused.append((["model_dim", "num_heads"],
                           "with --num-layers 1 the only layer is the output layer (one head, "
                           "one output per class); give --num-layers 2 or more to set it"))
        if cfg.get("graph") != "sbm":
            unused.append((["nodes", "communities", "p_in", "p_out", "feature_noise"],
                           f"for --graph sbm only; --graph {cfg.get('graph')} is a fixed graph"))
        return unused

    def unrecorded_settings(self, cfg: dict[str, Any]) -> list[str]:
        """The sbm's settings of a karate run; num_heads and model_dim stay: they are fields
        of the ``GraphNetConfig`` that the run is loaded from (their defaults, where unused)."""
        return [name for name in super().unrecorded_settings(cfg)
                if name not in ("num_heads", "model_dim")]

    def validate(self, cfg: dict[str, Any]) -> None:
        if cfg.get("epochs") is not None:
            raise UsageError("--epochs: graph training is full-batch (one step sees the whole "
                             "graph); use --max-steps")
        if cfg["graph"] == "sbm":
            least = cfg["nodes"] // cfg["communities"]
            if least < 3:  # the fewest a group can have: one node each to train, validate, test
                raise UsageError(f"--nodes {cfg['nodes']} in --communities "
                                 f"{cfg['communities']} makes groups of {least} nodes; each "
                                 f"needs at least 3 (--nodes at least {3 * cfg['communities']})")
            why = f"each group of the sbm graph has {least} nodes, and one is tested"
        else:
            least = KARATE_SMALLER_CLUB
            why = f"on the karate club, whose two clubs have {least} members each"
        broken = nodes_leave_a_test_node(cfg["train_per_class"], cfg["val_per_class"], least,
                                         why=why)
        if broken:
            raise UsageError(broken)


TASKS = {"graph": GraphTask()}
