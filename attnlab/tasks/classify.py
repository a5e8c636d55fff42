"""``attnlab train classify``: a text classifier trained on the user's own file.

    attnlab train classify --data reviews.csv [--test test.csv] [--text-column text]
        [--label-column label] [--tokenizer char|word|bpe] [--vocab-size N]

The file is CSV, TSV or JSONL (``attnlab.data.tables``). Without ``--test`` (or ``--val``) the
rows are split per class, with ``--seed``, into train / validation / test. The tokeniser is fit
on the training texts only; batches are padded with id 0 and masked, and grouped by length so
that little padding is computed. The model is a ``SequenceClassifier`` (per-sequence head;
``--pooling cls|mean``). Metrics on the test split: ``test_accuracy`` and ``test_macro_f1``
(torchmetrics; the macro average is over the classes that occur in the test labels or in the
predictions, see ``classification_metrics``), then a per-class table. A class seen in training
but with no test example is named on stderr and listed in metrics.json under
``test_classes_without_examples``, since its row of the table (support 0) measures nothing. The
labels (strings, sorted) are stored in config.yaml,
so ``attnlab predict DIR --input TEXT`` prints a label.

With ``--set-column NAME`` it classifies sets of feature vectors instead (one row per element,
``attnlab.data.feature_sets``): no tokeniser; features standardised with the training split's
mean/std (kept in config.yaml); no positional encoding and mean pooling over the real elements,
so the prediction does not depend on the order of a set's rows. ``--feature-columns a,b`` picks
the features (default: every other column); ``predict --input "x1,y1;x2,y2"`` takes one set.

Data problems stop the command before a run directory is written (exit 2, one line): missing
file, missing or repeated column (also --text-column equal to --label-column), empty file,
undecodable bytes or an unclosed quote (file and line), a single class, labels in the test or
validation file never seen in training (file and line), and a file whose bytes changed between
being read and being recorded in config.yaml's ``data_sha256``.

This file holds the task (flags, checks, training, loading) and the model and metrics; reading
the files, the splits, the tokeniser and the batches are in ``classify_data.py``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch

from ..errors import UsageError
from ..models.configs import SequenceClassifierConfig
from ..tokenizers import TOKENIZER_KINDS
from .base import Task, config_from_run, model_defaults
from .classify_data import (_Batches, _check_labels, _inputs, _read, _targets, _test_batches,
                            encode, fit_tokenizer, load_splits, make_batches)

# Re-exported: ``load_splits`` and ``make_batches`` have always been importable from here.
__all__ = ["ClassifyTask", "TASKS", "TASK", "build_model", "model_config_of", "make_batches",
           "load_splits",
           "collect_predictions", "classification_metrics", "per_class_table",
           "classes_without_examples", "MISSING_KEY"]

_MIN_VOCAB = {"char": 5, "word": 5, "bpe": 260}
_DATA_FILES = ("data", "test", "val")  # the options that name data files
MISSING_KEY = "test_classes_without_examples"  # metrics.json: labels with no test example


# ---- model and metrics (plain torch: predict and evaluate never import Lightning) ---------------

_MODEL_FLAGS = ("pooling", "positional", "max_len")  # the classifier's fields with a flag here


def model_config_of(cfg: dict[str, Any]) -> SequenceClassifierConfig:
    """The ``SequenceClassifierConfig`` of a run's configuration (after ``run`` has added the
    labels and the tokeniser's vocabulary, or the feature names of a feature-set run).

    Example:
        >>> from attnlab.tasks import SHARED_DEFAULTS
        >>> model_config_of({**SHARED_DEFAULTS, "labels": ["neg", "pos"], "max_len": 64,
        ...                  "model_vocab_size": 300, "vocab_size": 10000}).vocab_size
        300
    """
    inputs = ({"input_dim": len(cfg["feature_names"]), "vocab_size": None}
              if cfg.get("set_column") else {"vocab_size": cfg["model_vocab_size"]})
    return config_from_run(SequenceClassifierConfig, cfg, num_classes=len(cfg["labels"]), **inputs)


def build_model(cfg: dict[str, Any]):
    """The ``SequenceClassifier`` a run's configuration describes (randomly initialised)."""
    from ..models import SequenceClassifier

    return SequenceClassifier.from_config(model_config_of(cfg))


@torch.no_grad()
def collect_predictions(model, batches) -> tuple[torch.Tensor, torch.Tensor]:
    """(predictions (N,), targets (N,)) of ``(inputs, [mask,] targets)`` batches, in eval mode."""
    model.eval()
    preds, targets = zip(*((model.predict(*b[:-1]), b[-1]) for b in batches))
    return torch.cat(preds), torch.cat(targets)


def classification_metrics(preds: torch.Tensor, targets: torch.Tensor, num_classes: int) -> dict:
    """``test_accuracy`` and ``test_macro_f1`` (torchmetrics' multiclass F1, macro average).

    The macro average is the mean F1 over the classes that occur in ``targets`` or in
    ``preds``: a class in neither has F1 = 0/0 and is left out (scikit-learn's ``f1_score``
    does the same); a class with no test example that the model predicted anyway counts with
    F1 0. So a class missing from the test split does not lower the score unless it is
    predicted: ``classes_without_examples`` names such classes, which callers report.
    """
    from torchmetrics.functional.classification import multiclass_f1_score

    return {"test_accuracy": float((preds == targets).float().mean()),
            "test_macro_f1": float(multiclass_f1_score(preds, targets, num_classes, average="macro"))}


def classes_without_examples(targets: torch.Tensor, labels: list[str]) -> list[str]:
    """The labels (of training) that no test example has, in ``labels`` order."""
    support = torch.bincount(targets, minlength=len(labels))  # (K,)
    return [label for label, n in zip(labels, support.tolist()) if n == 0]


def _say_missing(missing: list[str], labels: list[str]) -> None:
    """One line on stderr naming the classes that the test split does not measure."""
    if missing:
        names = ", ".join(map(repr, missing[:10])) + (", ..." if len(missing) > 10 else "")
        print(f"warning: the test split has no example of {len(missing)} of the {len(labels)} "
              f"classes ({names}): their support is 0 and their recall is not measured; "
              f"test_macro_f1 leaves them out unless the model predicted them (then their F1 is "
              f"0)", file=sys.stderr, flush=True)


def per_class_table(preds: torch.Tensor, targets: torch.Tensor, labels: list[str]) -> str:
    """Precision, recall, F1 and support of each class, as aligned text."""
    k = len(labels)
    confusion = torch.bincount(targets * k + preds, minlength=k * k).reshape(k, k)  # (true, pred)
    tp = confusion.diag().float()
    precision = tp / confusion.sum(0).clamp(min=1)
    recall = tp / confusion.sum(1).clamp(min=1)
    f1 = 2 * precision * recall / (precision + recall).clamp(min=1e-12)
    width = max(5, *(len(label) for label in labels))
    lines = [f"{'class':<{width}}  precision  recall      f1  support"]
    for i, label in enumerate(labels):
        lines.append(f"{label:<{width}}  {precision[i]:9.4f}  {recall[i]:6.4f}  {f1[i]:6.4f}  "
                     f"{int(confusion[i].sum()):7d}")
    return "\n".join(lines)


# ---- the task -----------------------------------------------------------------------------------

class ClassifyTask(Task):
    name = "classify"
    help = "text (or, with --set-column, feature-set) classification on your own file"
    has_tokenizer = True
    model_config = SequenceClassifierConfig
    model_flags = _MODEL_FLAGS
    defaults = {
        **model_defaults(SequenceClassifierConfig, _MODEL_FLAGS),
        "data": None, "test": None, "val": None, "text_column": "text", "label_column": "label",
        "tokenizer": "word", "vocab_size": 10000, "max_len": 256, "val_fraction": 0.1, "test_fraction": 0.1,
        "max_steps": 1000, "batch_size": 32, "lr": 1e-3, "warmup": 100, "dropout": 0.1,
        "threads": 1, "set_column": None, "feature_columns": None,
    }

    def __init__(self) -> None:
        self._cache: tuple | None = None  # splits read by validate, reused by run

    def add_arguments(self, parser) -> None:
        g = parser.add_argument_group("classify")
        g.add_argument("--data", metavar="FILE", help="training data: .csv, .tsv or .jsonl")
        g.add_argument("--test", metavar="FILE", help="test data (default: 10%% of --data)")
        g.add_argument("--val", metavar="FILE", help="validation data (default: 10%% of --data)")
        g.add_argument("--text-column", metavar="NAME", help="column of the texts (default text)")
        g.add_argument("--label-column", metavar="NAME", help="column of the labels (default label)")
        g.add_argument("--tokenizer", choices=tuple(TOKENIZER_KINDS), help="default word")
        g.add_argument("--vocab-size", type=int, metavar="N", help="largest vocabulary (default 10000)")
        g.add_argument("--val-fraction", type=float, metavar="F", help="default 0.1")
        g.add_argument("--test-fraction", type=float, metavar="F", help="default 0.1")
        g.add_argument("--set-column", metavar="NAME",
                       help="classify sets of feature rows: rows with the same value here form a set")
        g.add_argument("--feature-columns", metavar="A,B,...",
                       help="with --set-column: the numeric features (default: every other column)")

    def _key(self, cfg):
        # abspath, not resolve(): resolving a symbolic-link loop raises before the reader can
        # name the file
        files = tuple(cfg.get(k) and os.path.abspath(cfg[k]) for k in _DATA_FILES)
        return files + tuple(str(cfg.get(k)) for k in (
            "text_column", "label_column", "seed", "val_fraction", "test_fraction", "set_column",
            "feature_columns"))

    def splits(self, cfg: dict[str, Any]):
        return self._splits(cfg)[0]

    def _splits(self, cfg: dict[str, Any]):
        """(splits, {option: SHA-256 of the bytes read}), read once per set of settings."""
        if self._cache is None or self._cache[0] != self._key(cfg):
            digests: dict[str, str] = {}
            self._cache = (self._key(cfg), load_splits(cfg, digests=digests), digests)
        return self._cache[1:]

    def validate(self, cfg: dict[str, Any]) -> None:
        if cfg["tokenizer"] not in TOKENIZER_KINDS:
            raise UsageError(f"--tokenizer must be one of {', '.join(TOKENIZER_KINDS)}, "
                             f"got {cfg['tokenizer']!r}")
        least = _MIN_VOCAB[cfg["tokenizer"]]
        if not isinstance(cfg["vocab_size"], int) or cfg["vocab_size"] < least:
            raise UsageError(f"--vocab-size must be an integer >= {least} for --tokenizer "
                             f"{cfg['tokenizer']}, got {cfg['vocab_size']!r}")
        for key in ("val_fraction", "test_fraction"):
            if not isinstance(cfg[key], (int, float)) or not 0 < cfg[key] < 1:
                raise UsageError(f"--{key.replace('_', '-')} must be in (0, 1), got {cfg[key]!r}")
        if cfg["val_fraction"] + cfg["test_fraction"] >= 1:
            raise UsageError(f"--val-fraction ({cfg['val_fraction']}) + --test-fraction "
                             f"({cfg['test_fraction']}) must be < 1: nothing would be left to train on")
        if cfg.get("set_column"):  # a set has no order and no [CLS] position: a set function
            cfg["pooling"], cfg["positional"] = "mean", "none"
        self._check_column_flags(cfg)
        from ..data.tables import check_digest
        from ..runs import pin_data_files

        resumed = bool(cfg.get("resume") and cfg.get("data_sha256"))
        if resumed:  # first: its message says which file changed since the run started
            pin_data_files(cfg, _DATA_FILES)
        _, digests = self._splits(cfg)  # data errors now, before the run directory is written
        if not resumed:
            pin_data_files(cfg, _DATA_FILES)  # saved with config.yaml: evaluate and --resume check it
        for key, digest in digests.items():  # the bytes trained on are the ones pinned
            check_digest(cfg[key], digest, cfg["data_sha256"].get(key), what=f"--{key}")

    @staticmethod
    def _check_column_flags(cfg: dict[str, Any]) -> None:
        """Two roles given the same column (``--text-column x --label-column x``) would train
        on the label itself: refused, naming both flags."""
        roles = (("set_column", "label_column") if cfg.get("set_column")
                 else ("text_column", "label_column"))
        for key in roles:
            if not isinstance(cfg[key], str) or not cfg[key].strip():
                raise UsageError(f"--{key.replace('_', '-')} must be a column name, got {cfg[key]!r}")
        a, b = roles
        if cfg[a].strip() == cfg[b].strip():
            raise UsageError(f"--{a.replace('_', '-')} and --{b.replace('_', '-')} are both "
                             f"{cfg[a]!r}; they must name two different columns")

    def run(self, cfg: dict[str, Any], run_dir: Path) -> dict[str, float]:
        from ..training import finish, fit
        from ..training.classifier import ClassifierModule

        splits = self.splits(cfg)
        cfg["labels"] = sorted({lab for _, lab in splits["train"]})
        tokenizer, xs = None, [x for x, _ in splits["train"]]
        if cfg.get("set_column"):
            from ..data.feature_sets import feature_stats

            cfg["feature_names"] = splits["features"]
            cfg["feature_mean"], cfg["feature_std"] = feature_stats(xs)
        else:
            tokenizer = fit_tokenizer(cfg, xs)
            cfg["model_vocab_size"] = tokenizer.vocab_size
        train = _Batches(_inputs(cfg, tokenizer, xs), _targets(splits["train"], cfg["labels"]),
                         cfg["batch_size"], cfg["seed"])
        if cfg.get("epochs"):
            cfg["max_steps"] = cfg["epochs"] * train.num_batches
        val_loader = torch.utils.data.DataLoader(_test_batches(cfg, tokenizer, splits["val"]),
                                                 batch_size=None)
        model = build_model(cfg)
        module = ClassifierModule(model, cfg, cfg["max_steps"])
        result = fit(module, train, val_loader, cfg, run_dir, max_steps=cfg["max_steps"],
                     val_check_interval=cfg.get("val_every") or min(train.num_batches, cfg["max_steps"]))
        if not result.is_global_zero:  # other DDP ranks write nothing: no need to test there
            return finish(cfg, run_dir, model, {}, result, tokenizer=tokenizer)
        preds, targets = collect_predictions(model, _test_batches(cfg, tokenizer, splits["test"]))
        missing = classes_without_examples(targets, cfg["labels"])
        metrics = finish(cfg, run_dir, model,
                         {**classification_metrics(preds, targets, len(cfg["labels"])),
                          MISSING_KEY: missing}, result, tokenizer=tokenizer)
        print(f"\ntest split, per class ({len(targets)} {'sets' if tokenizer is None else 'texts'}):\n"
              f"{per_class_table(preds, targets, cfg['labels'])}")
        sys.stdout.flush()
        _say_missing(missing, cfg["labels"])
        return metrics

    def _load(self, run_dir: Path, cfg: dict[str, Any]):
        """(model, tokenizer); the tokenizer is None for feature sets."""
        from ..runs import load_weights
        from ..tokenizers import load_tokenizer

        tokenizer = None if cfg.get("set_column") else load_tokenizer(Path(run_dir) / "tokenizer.json")
        model = build_model(cfg)
        load_weights(model, Path(run_dir) / "model.safetensors")
        return model.eval(), tokenizer

    def load(self, run_dir: Path, cfg: dict[str, Any]):
        model, tokenizer = self._load(run_dir, cfg)
        return model if tokenizer is None else (model, tokenizer)

    def predict(self, run_dir: Path, cfg: dict[str, Any], text: str) -> str:
        model, tokenizer = self._load(run_dir, cfg)
        if tokenizer is None:  # one set: "x1,y1;x2,y2;..."
            from ..data.feature_sets import parse_set

            x = _inputs(cfg, None, [parse_set(text, cfg["feature_names"])])[0][None]  # (1, T, F)
        else:
            x = torch.tensor([encode(tokenizer, [text], cfg["max_len"])[0]])  # (1, T)
        return cfg["labels"][int(model.predict(x)[0])]

    def attention_maps(self, run_dir: Path, cfg: dict[str, Any], text: str):
        """``attnlab plot attention DIR --input TEXT``: one row and column per token ([CLS] first
        with cls pooling), every layer's (H, T, T) map."""
        if cfg.get("set_column"):
            raise UsageError("plot attention: a feature-set classify run has no tokens to label")
        model, tokenizer = self.load(run_dir, cfg)
        ids = encode(tokenizer, [text], cfg["max_len"])[0]
        labels = (["[CLS]"] if model.use_cls else []) + tokenizer.tokenize(text)[: len(ids)]
        maps = model.get_attention_maps(torch.tensor([ids]))
        return [m[0] for m in maps], labels, labels

    def evaluate(self, run_dir: Path, cfg: dict[str, Any], data: str | None) -> dict[str, float]:
        """On ``data`` (same columns), or on the run's test split (re-drawn with its seed from
        the training files, refused if they changed since)."""
        from ..runs import check_data_files

        model, tokenizer = self._load(run_dir, cfg)
        if data is not None:
            pairs, lines, path, _ = _read({**cfg, "data": data}, "data", cfg.get("feature_names"))
            _check_labels(pairs, lines, path, set(cfg["labels"]), "data")
        else:
            check_data_files(cfg)
            pairs = self.splits(cfg)["test"]  # and its bytes are the recorded ones (load_splits)
        preds, targets = collect_predictions(model, _test_batches(cfg, tokenizer, pairs))
        print(per_class_table(preds, targets, cfg["labels"]), file=sys.stderr)
        missing = classes_without_examples(targets, cfg["labels"])
        _say_missing(missing, cfg["labels"])
        return {**classification_metrics(preds, targets, len(cfg["labels"])), MISSING_KEY: missing}


TASKS = {"classify": ClassifyTask()}
TASK = TASKS["classify"]  # the one task of this module, as it has always been importable
