"""``attnlab train jets``: top-quark tagging with a set Transformer over a jet's constituents —
the spec (flags, defaults, checks, memory); the runtime module (the part that imports torch) is
``attnlab.tasks.jets.runtime``.

    attnlab train jets --data FILE [--val FILE] [--test FILE] [--baselines]
        [--max-constituents N] [--class-token] [--no-pair-bias]

Files are in the Top Quark Tagging Reference Dataset's layout (``attnlab.tasks.jets.data``): the
reference ``train.h5`` / ``val.h5`` / ``test.h5`` or what ``attnlab data jets`` generates. They
are read in chunks of ``--chunk-size`` jets, never whole. Without ``--val`` (``--test``) the
validation (test) jets are index ranges of ``--data``: of its N jets, the last
``--test-fraction`` are the test jets, the ``--val-fraction`` before them the validation jets,
and the rest train (the reference files and generated ones are shuffled already).

Metrics on the test jets (signal = top): ``test_accuracy``, ``test_auc``, ``test_rejection_30``
and ``test_rejection_50`` (1/ε_B at ε_S = 0.3 and 0.5). Figures: ``roc.png``, ``scores.png``,
``attention.png``. ``--baselines`` scores the jet mass, τ3/τ2, their likelihood ratio and a
Particle Flow Network on the same test jets (``baselines.json``).

Imports neither torch nor Lightning (``attnlab.tasks.base``); ``validate`` reads the files'
headers and labels with pandas only.

Examples:
    >>> TASKS["jets"].defaults["max_constituents"], TASKS["jets"].defaults["pair_bias"]
    (200, True)
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar

from ...errors import UsageError
from ...models.configs import JetTaggerConfig
from ...run_config import RunSettings
from ...settings import file_setting, setting
from ..base import Capabilities, Runtime, Task
from .checks import check_files

__all__ = ["JetsSettings", "JetsTask", "TASKS"]


@dataclass
class JetsSettings:
    """The flags of ``attnlab train jets`` (docs/jets.md)."""

    data: str = file_setting("jets to train on (.h5, the reference dataset's layout)")
    val: str = file_setting("validation jets (default: a range of --data)")
    test: str = file_setting("test jets (default: the last --test-fraction of --data)")
    val_fraction: float = setting(0.1, help="without --val: this share of --data validates",
                                  low=0, above=True, below=1)
    test_fraction: float = setting(0.2, help="without --test: this share of --data tests",
                                   low=0, above=True, below=1)
    max_constituents: int = setting(200, help="constituents kept per jet, hardest first "
                                              "(fewer: faster)", low=1, below=201)
    val_jets: int = setting(4000, help="validation jets looked at per validation (at most)",
                            low=1)
    chunk_size: int = setting(8192, help="jets read from a file at a time (memory: ~3 kB "
                                         "each)", low=1)
    baselines: bool = setting(False, help="also score the jet mass, τ3/τ2, their likelihood "
                                          "ratio and a Particle Flow Network on the test jets")


@dataclass
class JetsDerived:
    """What a jets run derives when it reads its files (``runtime.run``): how many jets each
    split holds; and it resolves their paths (made absolute)."""

    resolves: ClassVar[tuple[str, ...]] = ("data", "val", "test")

    jets: dict[str, int] | None = None


class JetsRunConfig(RunSettings[JetsSettings, JetTaggerConfig, JetsDerived]):
    """The settings of a jets run: ``cfg.model`` is the ``JetTagger``'s config."""


class JetsTask(Task):
    """Top (signal, 1) against QCD (0) jets from their constituents' four-momenta."""

    name = "jets"
    help = "top-quark tagging: a set Transformer over particle jets (your .h5 files)"
    run_config = JetsRunConfig  # model flags: --class-token, --pair-bias, ...
    # val_auc: the ROC's area over the validation jets (runtime.validation_auc)
    val_metrics = ("val_loss", "val_acc", "val_auc")
    # holds out --val-fraction and --test-fraction of --data; `plot attention` draws the jet
    # itself with its strongest attention as lines, and `view` shows every constituent
    capabilities = Capabilities(holds_out_fractions=True, attention_figure=True,
                                attention_layers=True)
    # The course's set classifier: 2 post-LN blocks, D 64 (docs/jets.md, benchmarks/jets.py).
    overrides: dict[str, Any] = {
        "dim_feedforward": 128, "batch_size": 128, "warmup": 200, "max_steps": 3000,
        "val_every": 500,
    }

    def runtime(self) -> Runtime:
        """``runtime.py`` of this package (torch, the model, training), imported on first use."""
        from . import runtime

        return runtime

    def validate(self, cfg: dict[str, Any]) -> None:
        """--data is needed; every file named must be a readable jets file with both classes
        and the split of --data must leave jets of both classes in each part
        (``checks.check_files``)."""
        if not cfg.get("data"):
            raise UsageError("--data FILE is required: the jets to train on (.h5, see "
                             "docs/jets.md)")
        for key in ("test", "val"):  # every jet of such a file would be one trained on
            if cfg.get(key) and os.path.realpath(cfg[key]) == os.path.realpath(cfg["data"]):
                raise UsageError(f"--{key} {cfg[key]} is the --data file: its jets would be "
                                 f"trained on and {'tested' if key == 'test' else 'validated'} "
                                 f"on; give another file, or drop --{key} to hold out "
                                 f"--{key}-fraction of --data")
        check_files(cfg)

    def memory_estimate(self, cfg: dict[str, Any]) -> list[tuple[str, float]]:
        """The weights (default count), one chunk of jets, and one batch's attention logits
        and pair features (N × N per jet; kept for the backward pass)."""
        B, N, H = cfg["batch_size"], cfg["max_constituents"], cfg["num_heads"]
        per_pair = cfg["num_layers"] * H * 3 + (2 * cfg["pair_dim"] + 4 + H
                                                 if cfg["pair_bias"] else 0)
        return [*super().memory_estimate(cfg),
                (f"one --chunk-size of {cfg['chunk_size']:,} jets", cfg["chunk_size"] * N * 16 * 2),
                (f"a batch of {B:,} jets' attention over {N} constituents", B * N * N * per_pair * 4)]


TASKS = {"jets": JetsTask()}
