"""``attnlab train classify``: a text classifier trained on the user's own file.

    attnlab train classify --data reviews.csv [--test test.csv] [--text-column text]
        [--label-column label] [--tokenizer char|word|bpe] [--vocab-size N]

The file is CSV, TSV, JSONL or Parquet, or a Hugging Face datasets directory
(``attnlab.data.tables``). Without ``--test`` (or ``--val``) the
rows are split per class, with ``--seed``, into train / validation / test. The tokeniser is fit
on the training texts only; batches are padded with id 0 and masked, and grouped by length so
that little padding is computed. The model is a ``SequenceClassifier`` (per-sequence head;
``--pooling cls|mean``). Metrics on the test split: ``test_accuracy`` and ``test_macro_f1``
(torchmetrics; the macro average is over the classes that occur in the test labels or in the
predictions, see ``runtime.classification_metrics``), then a per-class table. A class
seen in training but with no test example is named on stderr and listed in metrics.json under
``test_classes_without_examples``, since its row of the table (support 0) measures nothing. The
labels (strings, sorted) are stored in config.yaml, so ``attnlab predict DIR --input TEXT``
prints a label.

With ``--set-column NAME`` it classifies sets of feature vectors instead (one row per element,
``attnlab.data.feature_sets``): no tokeniser; features standardised with the training split's
mean/std (kept in config.yaml); no positional encoding and mean pooling over the real elements,
so the prediction does not depend on the order of a set's rows. ``--feature-columns a,b`` picks
the features (default: every other column); ``predict --input "x1,y1;x2,y2"`` takes one set.

With ``--init DIR`` (a Hugging Face BERT, RoBERTa, XLM-R, CamemBERT or DistilBERT directory on
disk, or a classify run) it fine-tunes a pretrained encoder under a new head (``BertClassifier``:
the checkpoint's pooler on [CLS], or the mean of the real tokens where it has none), reading the
texts with the checkpoint's own tokenizer; the shape, ``arch`` (its model_type) and the
encoder's fields come from DIR (``pretrained.py``), ``--max-len`` defaults to all the model
holds, and ``--tokenizer``, ``--vocab-size`` and ``--set-column`` are refused. A corrupt or
unsupported checkpoint is refused before the run directory is written: ``validate`` reads it.

Data problems stop the command before a run directory is written (exit 2, one line): missing
file, missing or repeated column (also --text-column equal to --label-column), empty file,
undecodable bytes or an unclosed quote (file and line), a single class, labels in the test or
validation file never seen in training (file and line), and a file whose bytes changed between
being read and being recorded in config.yaml's ``data_sha256``.

This module is the task's spec (``attnlab/tasks/base.py``): its settings, defaults and checks,
imported by ``attnlab train --help`` without torch. Reading the files and the splits is
``data.py``; the tokeniser, batches, model, metrics, training and inference are
``runtime.py``.

Examples:
    >>> from attnlab.tasks import SHARED_DEFAULTS
    >>> task = TASKS["classify"]
    >>> cfg = {**SHARED_DEFAULTS, **task.defaults, "val_fraction": 0.5, "test_fraction": 0.5}
    >>> task.check_settings(cfg)
    Traceback (most recent call last):
    ...
    attnlab.errors.UsageError: --val-fraction (0.5) + --test-fraction (0.5) must be < 1: nothing would be left to train on
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from ...errors import UsageError
from ...interop.source import INIT_MODEL_TYPES
from ...models.configs import PretrainedEncoderFields, SequenceClassifierConfig
from ...settings import (AdaptSettings, file_setting, flag, held_out_setting,
                         label_smoothing_setting, setting)
from ...tokenizers import SMALLEST_VOCAB, TOKENIZER_KINDS, normalize_setting, vocab_too_small
from ...run_config import RunSettings
from ..base import Capabilities, Runtime, Task
from ..memory import activations_in_host_memory, weight_bytes
from . import pretrained
from .checkpoint_notes import init_notes
from .data import classes_of, print_notes, read_and_pin
from .labels import LABEL_SEP, resolve_class_weights

__all__ = ["ClassifyTask", "ClassifySettings", "TASKS"]

_MODEL_FLAGS = ("model_dim", "num_heads", "num_layers", "dim_feedforward", "dropout",
                "norm_first", "pooling", "positional", "max_len")  # the classifier's flags here
# how --val-fraction and --test-fraction draw (data._classes): a label set or a number has no
# one class to draw by
_DRAWN = "per class; from all rows with --multi-label or --regression"


@dataclass
class ClassifySettings(AdaptSettings, PretrainedEncoderFields):
    """The flags of ``attnlab train classify`` besides the shared and the model ones; and,
    without a flag, what ``--init DIR`` reads from a pretrained encoder (``arch``, the
    encoder's fields that attnlab's own lacks)."""

    data: str = file_setting("training data: .csv, .tsv, .jsonl, .parquet or a datasets "
                             "directory (a DatasetDict's split: DIR/train)")
    test: str = file_setting(f"test data (default: --test-fraction of --data, {_DRAWN})")
    val: str = file_setting(f"validation data (default: --val-fraction of --data, {_DRAWN})")
    text_column: str = setting("text", help="column of the texts", metavar="NAME")
    label_column: str = setting("label", help="column of the labels", metavar="NAME")
    tokenizer: str = setting("word", help="how texts become tokens",
                             choices=tuple(TOKENIZER_KINDS))
    vocab_size: int = setting(10000, help="largest vocabulary; bpe needs at least 260",
                              low=min(SMALLEST_VOCAB.values()))
    normalize: str = normalize_setting()
    val_fraction: float = held_out_setting("val")
    test_fraction: float = held_out_setting("test")
    label_smoothing: float = label_smoothing_setting(0.0, absent=0.0)
    set_column: str = setting(None, help="classify sets of feature rows: rows with the same value "
                                         "here form a set", metavar="NAME", optional=True,
                              absent=None,  # a text run with --init leaves it out
                              blank_why="name the column whose value groups rows into sets")
    feature_columns: str = setting(None, help="with --set-column: the numeric features "
                                              "(default: every other column)",
                                   metavar="A,B,...", optional=True, list_sep=",")
    class_weights: str = setting(None, optional=True, absent=None, metavar="balanced|FILE",
                                 blank_why="give balanced or a .json/.csv file of class, weight",
                                 help="weigh each class in the cross-entropy: balanced (n / "
                                      "(K * n_class) of the training split) or a .json / .csv "
                                      "file of class, weight")
    multi_label: bool = setting(False, absent=False,
                                help="several labels per row, joined by --label-sep (or a "
                                     "list: .jsonl, .parquet, datasets): a sigmoid per class "
                                     "and binary cross-entropy")
    label_sep: str = setting(LABEL_SEP, absent=LABEL_SEP, metavar="S",
                             blank_why="give the text between a row's labels",
                             help="with --multi-label: what separates a row's labels")
    threshold: float = setting(0.5, low=0, above=True, below=1, absent=0.5, metavar="F",
                               help="with --multi-label: a class is predicted when its "
                                    "probability is above this")
    regression: bool = setting(False, absent=False,
                               help="predict a number per row: one output and the mean "
                                    "squared error (the target standardised by the training "
                                    "split's mean and std)")
    arch: str = pretrained.arch_setting()


@dataclass
class ClassifyDerived:
    """What a classify run derives from its training split (``runtime._prepare``): the labels
    (sorted), and the tokeniser's vocabulary size (texts) or the features' names, mean and std
    (sets); the targets' mean and std (--regression). ``validate`` resolves --class-weights
    into ``class_weight_values`` ({class: weight}), so that --resume trains with the weights
    the run started with even if the file changed."""

    resolves: ClassVar[tuple[str, ...]] = ("model_vocab_size",)  # the model's vocab_size

    labels: list[str] | None = None
    # --class-weights, resolved; --regression: the training targets' mean and std (a run
    # without them had neither: None)
    class_weight_values: dict[str, float] | None = field(default=None, metadata={"absent": None})
    target_mean: float | None = field(default=None, metadata={"absent": None})
    target_std: float | None = field(default=None, metadata={"absent": None})
    feature_names: list[str] | None = None
    feature_mean: list[float] | None = None
    feature_std: list[float] | None = None
    # a JSON Lines decimal is read as written (1e2, 2.50); a run from before read it as Python
    # spells the float (100.0, 2.5), its labels so named: it keeps reading so (evaluate, resume)
    json_decimals_as_written: bool = field(default=True, metadata={"absent": False})


class ClassifyRunConfig(RunSettings[ClassifySettings, SequenceClassifierConfig,
                                    ClassifyDerived]):
    """The settings of a classify run: ``cfg.model`` is attnlab's own encoder's config (a run
    from a pretrained encoder builds its ``BertClassifierConfig`` from the same settings).
    --vocab-size caps the tokeniser; the model's vocabulary is the one it fitted."""

    model_keys = {"vocab_size": "model_vocab_size"}


class ClassifyTask(Task):
    """``attnlab train classify``: texts (or, with ``--set-column``, sets of feature rows) of
    the user's file, one label each."""

    name = "classify"
    help = "text (or, with --set-column, feature-set) classification on your own file"
    run_config = ClassifyRunConfig
    # val_f1: macro F1 over the split; which of these a run computes: ``val_metrics_off``
    val_metrics = ("val_loss", "val_acc", "val_f1", "val_micro_f1", "val_mse", "val_r2",
                   "val_spearman")
    model_flags = _MODEL_FLAGS
    overrides = dict(pretrained.ENCODER_OVERRIDES)  # a copy: a task may change its own
    default_notes = {"max_len": f"{pretrained.OWN_MAX_LEN}; with --init, what the model holds"}
    init_model_types = INIT_MODEL_TYPES["classify"]
    # holds out --val-fraction and --test-fraction of --data; `export --hf` writes a run from
    # --init of a BERT-family checkpoint (runtime.export_hf)
    capabilities = Capabilities(holds_out_fractions=True,
                                hf_auto_class="AutoModelForSequenceClassification")

    def val_metrics_off(self, cfg: dict[str, Any]) -> dict[str, str]:
        """What each objective's validation leaves out: one class per row has no micro F1 (it
        equals the accuracy) and no regression scores; --multi-label no accuracy of one class;
        --regression none of the class scores."""
        if cfg.get("regression"):
            return dict.fromkeys(("val_acc", "val_f1", "val_micro_f1"),
                                 "a score of classes, not of --regression's numbers")
        numbers = dict.fromkeys(("val_mse", "val_r2", "val_spearman"), "computed with "
                                                                        "--regression only")
        if cfg.get("multi_label"):
            return {"val_acc": "a score of one class per row, not of --multi-label's label "
                               "sets", **numbers}
        return {"val_micro_f1": "computed with --multi-label only", **numbers}

    def runtime(self) -> Runtime:
        """``runtime.py`` of this package (torch, the model, training), imported on first use."""
        from . import runtime

        return runtime

    def init_settings(self, source) -> dict[str, Any]:
        """What ``--init DIR`` fixes: a Hugging Face BERT-family encoder's shape and
        architecture (``pretrained.init_settings``); an attnlab classify run's, as for any
        task, and its architecture when it was a pretrained encoder's; and its reading of a
        JSON Lines decimal (a run from before read 2.50 as 2.5), so that the same file gives
        its classes and the head is kept (``start.Start.weights_into``)."""
        own = super().init_settings(source) if source.kind == "run" else {}
        if source.kind == "run":
            own["json_decimals_as_written"] = bool(source.config.get("json_decimals_as_written",
                                                                     False))
        return {**own, **pretrained.init_settings(source)}

    def init_defaults(self, source) -> dict[str, tuple[Any, str]]:
        """The checkpoint's dropout (``Task.init_defaults``) and, for one without a pooler,
        mean pooling unless ``--pooling cls`` asks for a new head (``pretrained``)."""
        return {**super().init_defaults(source), **pretrained.init_defaults(source)}

    def check_settings(self, cfg: dict[str, Any], *, typed_only: bool = False) -> Any:
        """--max-len not given: 256 tokens, or with a pretrained encoder all it holds.
        --multi-label and --regression are two answers to what a label is: not both."""
        if cfg.get("multi_label") and cfg.get("regression"):
            raise UsageError("--multi-label and --regression exclude each other: a row holds "
                             "either class names or a number")
        pretrained.resolve_max_len(cfg)
        return super().check_settings(cfg, typed_only=typed_only)

    def adapt_layout(self, cfg: dict[str, Any]) -> dict[str, Any]:
        """The encoder is everything before the classifier's head."""
        return {"blocks": cfg["num_layers"], "encoder": True, "attention": True}

    def unused_settings(self, cfg: dict[str, Any]) -> list[tuple[list[str], str]]:
        """A set of feature rows has no text, is pooled by its mean and has no positions;
        texts have no feature columns; a model from --init reads text with the checkpoint's
        own tokenizer; attnlab's own encoder has none of a pretrained one's fields."""
        own = ([([f.name for f in fields(PretrainedEncoderFields)],
                 "only with --init of a pretrained encoder (read from its checkpoint)")]
               if cfg.get("arch", "transformer") == "transformer" else [])
        own += self._objective_unused(cfg)
        if cfg.get("init"):
            return [*own, (["tokenizer", "vocab_size"], "not with --init: the checkpoint's own "
                                                        "tokenizer is used"),
                    (["set_column", "feature_columns"], "not with --init: the model from "
                                                        "--init classifies texts")]
        if not cfg.get("set_column"):
            return [*own, (["feature_columns"], "only with --set-column (the numeric columns "
                                                "of a set of feature rows); texts are read "
                                                "from --text-column")]
        forced = (("pooling", "mean"), ("positional", "none"))
        return [*own, ([k for k, kept in forced if cfg.get(k) != kept],
                 "not with --set-column: a set has no order and no [CLS] position, so it is "
                 "pooled by its mean and has no positional encoding"),
                (["max_len"], "not with --set-column: a set is read whole, every element "
                              "(it has no positions to cut it at)"),
                (["text_column", "tokenizer", "vocab_size"],
                 "not with --set-column: a set of feature rows has no text to tokenise (its "
                 "features are --feature-columns)")]

    def unrecorded_settings(self, cfg: dict[str, Any]) -> list[str]:
        """``Task``'s, but what a label is (--multi-label, --regression, --label-sep,
        --threshold) is recorded whatever the objective: every run reads it (a run made
        before them reads their declared values); and --max-len, which a set run has always
        recorded though it reads its sets whole."""
        kept = ("multi_label", "regression", "label_sep", "threshold",
                "max_len")  # a set run's too: the model config reads it (no table is built)
        return [k for k in super().unrecorded_settings(cfg) if k not in kept]

    @staticmethod
    def _objective_unused(cfg: dict[str, Any]) -> list[tuple[list[str], str]]:
        """The flags of one objective (``labels.py``) that another does not use."""
        unused = []
        if not cfg.get("multi_label"):
            unused.append((["label_sep", "threshold"], "only with --multi-label"))
        if cfg.get("multi_label") or cfg.get("regression"):
            unused.append((["class_weights", "label_smoothing"],
                           "only with one class per row (a cross-entropy over the classes), "
                           "not with --multi-label or --regression"))
        if cfg.get("set_column"):
            unused.append((["multi_label", "regression"],
                           "not with --set-column: a set of feature rows has one class"))
        return unused

    def validate(self, cfg: dict[str, Any]) -> dict[str, list]:
        """The checks one setting alone cannot make: the vocabulary the tokeniser needs, the
        fractions held out together (``fractions_leave_training``: a fraction whose own file
        is given is not held out and does not count), the columns' roles; then the files
        themselves, read now so a data error comes before the run directory is written, and
        pinned in ``data_sha256``.
        Returns the splits read (``data.read_and_pin``), which ``run`` trains on, and under
        ``"init"`` the Hugging Face checkpoint ``--init`` names, read now so that a corrupt or
        unsupported one is refused before the run directory exists (None for a run)."""
        if cfg.get("arch", "transformer") != "transformer":
            pretrained.check_pretrained(cfg)
        elif small := vocab_too_small(cfg["tokenizer"], cfg["vocab_size"]):
            raise UsageError(small)
        if cfg.get("set_column"):  # a set has no order and no [CLS] position: a set function
            cfg["pooling"], cfg["positional"] = "mean", "none"
        self.check_columns(cfg)
        said: list[str] = []  # the data's warnings: printed once every check here passed
        splits = read_and_pin(cfg, self.config_class().from_values, said)
        if cfg.get("class_weights") and cfg.get("class_weight_values") is None:
            # not on --resume: the run keeps the weights it started with
            cfg["class_weight_values"] = resolve_class_weights(
                cfg["class_weights"], [lab for _, lab in splits["train"]], classes_of(splits))
        if cfg.get("init") and not cfg.get("resume"):
            splits["init"] = pretrained.read_init(cfg["init"], cfg["init_sha256"],
                                                     cfg["pooling"], max_len=cfg["max_len"])
            said += init_notes(splits["init"], [x for x, _ in splits["train"]],
                               "the training texts")
        print_notes(said)
        return splits

    def check_columns(self, cfg: dict[str, Any]) -> None:
        """Two roles given the same column (``--text-column x --label-column x``) would train
        on the label itself: refused, naming both flags. ``validate`` calls it, and so does
        ``attnlab evaluate --data FILE`` given the same flags."""
        roles = (("set_column", "label_column") if cfg.get("set_column")
                 else ("text_column", "label_column"))
        for key in roles:
            if not isinstance(cfg[key], str) or not cfg[key].strip():
                raise UsageError(f"{flag(key)} must be a column name, got {cfg[key]!r}")
        a, b = roles
        if cfg[a].strip() == cfg[b].strip():
            raise UsageError(f"{flag(a)} and {flag(b)} are both {cfg[a]!r}; they must name two "
                             f"different columns")

    def memory_estimate(self, cfg: dict[str, Any]) -> list[tuple[str, float]]:
        """The base count (encoder layers; a token embedding of at most ``--vocab-size`` rows,
        which sets do not have) and the position table of ``--max-len`` rows (+1 for [CLS])."""
        sets = bool(cfg.get("set_column"))
        estimate = super().memory_estimate({**cfg, "vocab_size": None} if sets else cfg)
        positional = cfg.get("positional")
        if positional in ("sinusoidal", "learned") and activations_in_host_memory(cfg):
            values = (cfg["max_len"] + (cfg.get("pooling") == "cls")) * cfg["model_dim"]
            # a fixed float32 buffer, or a trained table (``memory.weight_bytes``)
            size = 4 * values if positional == "sinusoidal" else weight_bytes(cfg, values)
            estimate.append((f"the position table of --max-len {cfg['max_len']:,}", size))
        return estimate



TASKS = {"classify": ClassifyTask()}
