"""The runtime module of ``attnlab train classify``, the part that imports torch (the spec is
``spec.py``): the tokeniser and the padded batches, the model (a ``SequenceClassifier``, or with
``--init`` a pretrained encoder's ``BertClassifier``), the metrics, and the module-level ``run``,
``load``, ``predict_many``, ``evaluate``, ``attention_maps`` and ``export_hf`` that the commands
call (through ``Task.runtime``).

Batches are grouped by length so that little padding is computed: texts become ids (B, T)
padded with id 0 (the model masks id 0); sets become features (B, T, F) zero-padded with a mask
(B, T), True = a real element. A pretrained encoder reads what its checkpoint's tokeniser gives
(``HFTokenizer.encode_for_model``: its [CLS]/[SEP] or <s></s>, cut to ``--max-len``): ids
padded with that tokeniser's pad id on its padding side, an attention mask (B, T) (1 = real),
and token types (B, T) where the model reads them (``Padding``). Metrics on the test split: ``test_accuracy`` and
``test_macro_f1`` (see ``classification_metrics``), a per-class table, and the classes that have
no test example (``MISSING_KEY``).

Imports torch, the model and the data at the top; Lightning only inside ``run``, so predict,
evaluate and ``plot attention`` never load it.

Shapes: B batch, T tokens (or a set's elements), F features per element, K classes.
"""
from __future__ import annotations

from functools import partial
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.nn.utils.rnn import pad_sequence

from ...data.feature_sets import feature_stats, parse_set, standardise
from ...data.overlap import SharedCount
from ...data.resumable import ShuffledBatches, length_grouped
from ...data.tables import CHUNK_ROWS, places, same_both_readings
from ...errors import UsageError
from ...models import BertClassifier, SequenceClassifier
from ...models.configs import BertClassifierConfig, SequenceClassifierConfig
from ...nn import padding_mask
from ...notes import progress, said_once, say
from ...run_config import RunSettings
from ...runs import check_test_files, load_weights, read_yaml
from ...settings import epoch_steps
from ...tokenizers import TOKENIZER_KINDS, note_cut, note_pieces, note_unknown
from ...explorer.record import fit_weights_text
from ..base import (attends, config_from_run, each_input, input_name, loads, null_scores,
                    predicts, probabilities_of, rng_kept, said_nan)
from .data import (check_labels, checked_sets, classes_of, example_chunks, files_of, load_splits,
                   no_label, unlabelled_rows)
from .labels import objective_of
from .metrics import (MISSING_KEY, Tally, classes_without_examples, classification_metrics,
                      confusion, decide, per_class, validation_scores)
from .pretrained import pooler_activation
from .start import load_run_tokenizer, pretrained, start_of

__all__ = ["build_model", "model_config_of", "fit_tokenizer", "encode", "make_batches", "Padding",
           "collect_predictions", "classification_metrics", "per_class_table", "test_scores",
           "Tally", "classes_without_examples", "objective", "MISSING_KEY",
           "run", "load", "input_reader", "predict_many", "evaluate", "attention_maps",
           "export_hf"]


# Texts per batch when nothing trains (validation, the test split, predict): batches are
# sorted by length, and a batch is padded to its longest text, so fewer texts per batch means
# less padding computed. 256 padded the 250 short validation texts of benchmarks/finetune.py
# --early-stop into one batch of 2.2x their tokens and took twice the CPU time of 64 (1.3x);
# 32 saved no more (benchmarks/RESULTS.md, "finetune --early-stop, training equal").
EVAL_BATCH = 64


def objective(cfg: RunSettings) -> str:
    """What a run's labels are: "single", "multi" (--multi-label) or "regression"."""
    return objective_of(cfg.multi_label, cfg.regression)


def _outputs(cfg: RunSettings) -> int:
    """The head's outputs: one per class, or one number (--regression)."""
    return 1 if cfg.regression else len(cfg.labels)


# ---- model ------------------------------------------------------------------------------------

def model_config_of(cfg: RunSettings) -> SequenceClassifierConfig | BertClassifierConfig:
    """The ``SequenceClassifierConfig`` of a run's configuration (after ``run`` has added the
    labels and the tokeniser's vocabulary, or the feature names of a feature-set run); the
    ``BertClassifierConfig`` of a run of a pretrained encoder (``arch`` its model_type; the
    embedding's rows are ``model_vocab_size``; --dropout on the attention weights too).

    Examples:
        >>> from attnlab.tasks import SHARED_DEFAULTS, get_task
        >>> model_config_of(get_task("classify").config(**SHARED_DEFAULTS, labels=["neg", "pos"],
        ...                 max_len=64, model_vocab_size=300, vocab_size=10000)).vocab_size
        300
    """
    if pretrained(cfg):
        return config_from_run(BertClassifierConfig, cfg, num_classes=_outputs(cfg),
                               vocab_size=cfg.model_vocab_size, attention_dropout=cfg.dropout,
                               pooler_activation=pooler_activation(cfg.arch))
    inputs = ({"input_dim": len(cfg.feature_names), "vocab_size": None}
              if cfg.set_column else {"vocab_size": cfg.model_vocab_size})
    return config_from_run(SequenceClassifierConfig, cfg, num_classes=_outputs(cfg), **inputs)


def build_model(cfg: RunSettings) -> SequenceClassifier | BertClassifier:
    """The model a run's configuration describes (randomly initialised)."""
    config = model_config_of(cfg)
    kind = BertClassifier if isinstance(config, BertClassifierConfig) else SequenceClassifier
    return kind(config)


# ---- tokens and batches -----------------------------------------------------------------------

def fit_tokenizer(cfg: RunSettings, texts: list[str]):
    """The ``--tokenizer`` kind fit on ``texts`` (the training split only), at most
    ``--vocab-size`` ids."""
    return TOKENIZER_KINDS[cfg.tokenizer].fit(texts, vocab_size=cfg.vocab_size,
                                              normalize=cfg.normalize)


def encode(tokenizer, texts: list[str], max_len: int) -> list[list[int]]:
    """Token ids of each text, cut to the first ``max_len``."""
    return [ids[:max_len] for ids in tokenizer.encode_batch(texts)]


def _pad_sets(sets: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(features (B, T, F) zero-padded, mask (B, T) True = a real element)."""
    x = pad_sequence(sets, batch_first=True)  # (B, T, F)
    mask = padding_mask(torch.tensor([len(s) for s in sets]))[:, 0, 0]  # (B, 1, 1, T) -> (B, T)
    return x, mask


def _pad_ids(ids: list[list[int]]) -> torch.Tensor:
    """Token ids (B, T) padded with 0 to the longest of the batch."""
    return padded(ids, max(map(len, ids)), 0)


def padded(rows, width: int, value: int, side: str = "right") -> torch.Tensor:
    """``rows`` (sequences of ints) as one long tensor (B, ``width``), each filled with
    ``value`` on its ``side``: the ids of all rows made one tensor in one call and put in place
    through a mask (a tensor per row, copied in row by row, took most of the time of making an
    epoch's batches).

    Examples:
        >>> padded([[5, 6], [7]], 3, 0, "left").tolist()
        [[0, 5, 6], [0, 0, 7]]
    """
    real = _real(rows, width, side)
    x = torch.full(real.shape, value, dtype=torch.long)
    x[real] = torch.tensor([i for row in rows for i in row], dtype=torch.long)
    return x


def _real(rows, width: int, side: str) -> torch.Tensor:
    """(B, ``width``) bool, True where ``rows``' own ids go when padded on ``side`` (True
    cells in row-major order are the rows' ids in order)."""
    lengths = torch.tensor([len(row) for row in rows])[:, None]  # (B, 1)
    columns = torch.arange(width)  # (width,)
    return columns < lengths if side == "right" else columns >= width - lengths


@dataclass(frozen=True)
class Padding:
    """How a pretrained encoder's batches are padded: its tokeniser's pad id and side
    (``"right"`` or ``"left"``), and whether the model reads token types."""

    pad_id: int
    side: str = "right"
    token_types: bool = False

    @classmethod
    def of(cls, cfg: RunSettings, tokenizer) -> "Padding | None":
        """The padding of a run's batches: None for attnlab's own encoder (pad 0, right)."""
        if not pretrained(cfg):
            return None
        pad = tokenizer.pad_id if tokenizer.pad_id is not None else cfg.pad_id
        return cls(pad, tokenizer.padding_side,
                   bool(tokenizer.token_type_ids and cfg.type_vocab_size))

    def pad(self, encoded: list[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, ...]:
        """``(input_ids, token_type_ids)`` pairs -> input_ids (B, T), attention_mask (B, T)
        (1 = real token) and, with ``token_types``, token_type_ids (B, T) (0 on padding).

        Examples:
            >>> [t.tolist() for t in Padding(9, "left").pad([([5, 6], [0, 0]), ([7], [0])])]
            [[[5, 6], [9, 7]], [[1, 1], [0, 1]]]
        """
        T = max(len(ids) for ids, _ in encoded)
        x = padded([ids for ids, _ in encoded], T, self.pad_id, self.side)  # (B, T)
        mask = _real([ids for ids, _ in encoded], T, self.side).long()  # (B, T)
        if not self.token_types:
            return x, mask
        return x, mask, padded([types for _, types in encoded], T, 0, self.side)  # (B, T)


def make_batches(ids: list, targets: list, batch_size: int, *,
                 shuffle: bool = False, seed: int = 0,
                 padding: Padding | None = None) -> list[tuple[torch.Tensor, ...]]:
    """Padded batches (ids (B, T) with pad 0, targets (B,) — (B, K) of label sets) of sequences
    of similar length —
    or, when ``ids`` are feature sets ((T, F) tensors), (features (B, T, F) zero-padded,
    mask (B, T) True = real element, targets (B,)) — or, with ``padding`` (a pretrained
    encoder's), when ``ids`` are ``(input_ids, token_type_ids)`` pairs, ``padding.pad``'s
    tensors and targets (B,).

    Sorting by length within windows of 50 batches keeps padding small; ``shuffle`` mixes the
    windows and the batch order (seeded) so training batches still vary.

    Examples:
        >>> [x.tolist() for x, _ in make_batches([[5, 6], [7], [8, 9, 4]], [0, 1, 0], 2)]
        [[[7, 0], [5, 6]], [[8, 9, 4]]]
    """
    out = []
    lengths = [len(i[0]) if padding else len(i) for i in ids]
    for batch in length_grouped(lengths, batch_size, shuffle, seed):
        y = torch.tensor([targets[i] for i in batch])  # (B,)
        if padding is not None:
            out.append((*padding.pad([ids[i] for i in batch]), y))
        elif torch.is_tensor(ids[batch[0]]):  # feature sets
            out.append((*_pad_sets([ids[i] for i in batch]), y))
        else:
            out.append((_pad_ids([ids[i] for i in batch]), y))
    return out


def _Batches(ids, targets, batch_size: int, seed: int,
             padding: Padding | None = None) -> ShuffledBatches:
    """The training batches of a run: a new shuffle of the length-grouped batches every epoch,
    resumable mid-epoch, every world-th batch on each DDP rank."""
    return ShuffledBatches(partial(make_batches, ids, targets, batch_size, padding=padding),
                           len(ids), batch_size, seed)


def _targets(cfg, pairs) -> list:
    """What the loss compares the outputs with: each row's class index; its label set as 0/1
    per class (--multi-label); its number standardised by the training targets' mean and std
    (--regression)."""
    if cfg.regression:
        return [(y - cfg.target_mean) / cfg.target_std for _, y in pairs]
    index = {label: i for i, label in enumerate(cfg.labels)}
    if cfg.multi_label:
        rows = [[0.0] * len(index) for _ in pairs]
        for row, (_, names) in zip(rows, pairs):
            for name in names:
                row[index[name]] = 1.0
        return rows
    return [index[lab] for _, lab in pairs]


def _inputs(cfg, tokenizer, xs, what: str | None = None) -> list:
    """Model inputs: token ids of texts, or feature sets standardised as in training; a
    pretrained encoder's (input_ids, token_type_ids) with its special tokens. ``what`` (the
    texts' name: "test texts") asks for a warning when --max-len cut any of them."""
    if cfg.set_column:
        return standardise(xs, cfg.feature_mean, cfg.feature_std)
    if pretrained(cfg):
        inputs = tokenizer.encode_for_model(xs, cfg.max_len)
        whole = (tokenizer.encode_for_model(xs, 1 << 30) if what else inputs)  # uncut
        lengths = [len(ids) for ids, _ in whole]
    else:
        full = tokenizer.encode_batch(xs)
        inputs, lengths = [ids[: cfg.max_len] for ids in full], [len(ids) for ids in full]
    if what:
        _say_cut(sum(n > cfg.max_len for n in lengths), len(xs), what, cfg)
    return inputs


def _say_cut(cut: int, texts: int, what: str, cfg: RunSettings) -> None:
    """One line on stderr when ``cut`` of the ``texts`` (``what``: "training texts") were
    longer than --max-len: the model reads only their first tokens (as tag warns of words past
    it), and nothing else would say so."""
    specials = ", the checkpoint's special tokens included" if pretrained(cfg) else ""
    say("cut", cut, lambda count, total: (  # predict: once, of the whole file
        f"warning: {count} of the {total} {what} {'is' if count == 1 else 'are'} longer than "
        f"--max-len {cfg.max_len} tokens{specials}: the model reads the first "
        f"{cfg.max_len} of each, and the rest plays no part"), texts)


def _test_batches(cfg, tokenizer, pairs, what: str | None = None):
    return make_batches(_inputs(cfg, tokenizer, [x for x, _ in pairs], what),
                        _targets(cfg, pairs), EVAL_BATCH, padding=Padding.of(cfg, tokenizer))


# ---- metrics ----------------------------------------------------------------------------------

@torch.no_grad()
def collect_predictions(model, batches) -> tuple[torch.Tensor, torch.Tensor]:
    """(outputs (N, K), targets) of ``(inputs, [mask,] targets)`` batches, in eval mode."""
    model.eval()
    outputs, targets = zip(*((model(*b[:-1]).float(), b[-1]) for b in batches))
    return torch.cat(outputs), torch.cat(targets)


def _say_missing(missing: list[str], labels: list[str], where: str = "the test split") -> None:
    """One line on stderr naming the classes that the test split (or ``where``: the file
    ``evaluate --data`` scored) does not measure."""
    if missing:
        names = ", ".join(map(repr, missing[:10])) + (", ..." if len(missing) > 10 else "")
        print(f"warning: {where} has no example of {len(missing)} of the {len(labels)} "
              f"classes ({names}): their support is 0 and their recall is not measured; "
              f"test_macro_f1 leaves them out unless the model predicted them (then their F1 is "
              f"0)", file=sys.stderr, flush=True)


def _table(report: dict[str, dict[str, float]]) -> str:
    """A ``test_per_class`` report as aligned text."""
    width = max(5, *(len(label) for label in report))
    lines = [f"{'class':<{width}}  precision  recall      f1  support"]
    for label, r in report.items():
        lines.append(f"{label:<{width}}  {r['precision']:9.4f}  {r['recall']:6.4f}  "
                     f"{r['f1']:6.4f}  {r['support']:7d}")
    return "\n".join(lines)


def per_class_table(preds: torch.Tensor, targets: torch.Tensor, labels: list[str]) -> str:
    """Precision, recall, F1 and support of each class (one class per example), as aligned
    text (``metrics.per_class``)."""
    matrix = confusion(preds, targets, len(labels))
    return _table(per_class(matrix.diag(), matrix.sum(0), matrix.sum(1), labels))


def test_scores(cfg, answers: torch.Tensor, truth: torch.Tensor) -> dict[str, Any]:
    """metrics.json's test scores of a run's answers and the truth (``metrics`` module doc):
    classes (N,), label sets (N, K) or numbers (N,)."""
    return Tally(cfg.labels, objective(cfg)).add(answers, truth).scores()


# named after the test split, not a test: ``pytest --doctest-modules`` would collect it
test_scores.__test__ = False


def _decide(cfg, outputs: torch.Tensor) -> torch.Tensor:
    """The run's answers of its model's outputs (``metrics.decide``)."""
    return decide(outputs, objective(cfg), threshold=cfg.threshold,
                  mean=cfg.target_mean or 0.0, std=cfg.target_std or 1.0)


def _test_metrics(cfg, model, tokenizer, pairs, what: str = "test texts"
                  ) -> tuple[dict, torch.Tensor, torch.Tensor]:
    """(the metrics of ``pairs`` (``test_scores``); the answers; the truth: classes, label
    sets as 0/1, or the numbers as read), in the same order; a warning names the texts
    (``what``) that --max-len cut."""
    answers, truth, _ = _answers(cfg, model, tokenizer, pairs, what)
    return test_scores(cfg, answers, truth), answers, truth


def _answers(cfg, model, tokenizer, pairs, what: str | None = None
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(the model's answers to ``pairs``; the truth), in the same order, as ``predict``
    batches the same inputs (``make_batches``); and for each of ``pairs``, in their order,
    whether the model's outputs for it are all finite (N,). A warning names the texts
    (``what``) that --max-len cut."""
    inputs = _inputs(cfg, tokenizer, [x for x, _ in pairs], what)
    # make_batches reorders by length: each batch's "targets" are its rows' positions
    outputs, where = collect_predictions(model, make_batches(
        inputs, list(range(len(pairs))), EVAL_BATCH, padding=Padding.of(cfg, tokenizer)))
    rows = [pairs[i] for i in where.tolist()]
    truth = (torch.tensor([y for _, y in rows], dtype=torch.float64) if cfg.regression
             else torch.tensor(_targets(cfg, rows)))
    finite = torch.ones(len(pairs), dtype=torch.bool)
    finite[where] = outputs.reshape(len(outputs), -1).isfinite().all(-1)  # (N, K) -> (N,)
    return _decide(cfg, outputs), truth, finite


def _report(cfg, metrics: dict[str, Any], count: str, stream,
            where: str = "the test split") -> None:
    """The per-class table (classes) and the classes without an example in ``where``, for
    people."""
    if cfg.regression:
        return
    print(f"{count}{_table(metrics['test_per_class'])}", file=stream, flush=True)
    _say_missing(metrics[MISSING_KEY], cfg.labels, where)


# ---- the task's functions (the commands call these through Task.runtime) --------------------

def _prepare(cfg, splits: dict[str, Any], start) -> tuple[Any, Any, list]:
    """Fit what training sets up from the training split, derived into the run config (so that
    config.yaml rebuilds the model): the labels, and the tokeniser (texts; its vocabulary size)
    or the features' names, mean and std (sets); with --regression the targets' mean and std
    (the model learns the standardised number, whose scale does not depend on the data's
    units). The tokeniser of a run started from --init (``start``) is its source's, and so is
    the vocabulary. A resumed run keeps its labels' order (its head's rows: a run from before
    ``class_order`` listed classes 12, 2, 7); one killed before it recorded them derives them.
    Returns (the run config, tokenizer or None, model inputs)."""
    if not (cfg.resume and cfg.recorded("labels")):
        cfg = cfg.derive(labels=None if cfg.regression else classes_of(splits))
    if cfg.regression:
        ys = torch.tensor([y for _, y in splits["train"]], dtype=torch.float64)
        std = float(ys.std(unbiased=False))
        cfg = cfg.derive(target_mean=float(ys.mean()), target_std=std if std > 0 else 1.0)
    tokenizer, xs = None, [x for x, _ in splits["train"]]
    if cfg.set_column:
        mean, std = feature_stats(xs)
        cfg = cfg.derive(feature_names=splits["features"], feature_mean=mean, feature_std=std)
    elif start.tokenizer is not None:
        tokenizer = start.tokenizer
        cfg = cfg.derive(model_vocab_size=start.vocab_size or cfg.model_vocab_size)
    else:
        tokenizer = fit_tokenizer(cfg, xs)
        cfg = cfg.derive(model_vocab_size=tokenizer.vocab_size)
        # (a Chinese review is one unknown "word" to the word tokeniser: chance, silently)
        note_pieces(tokenizer, [x for x, _ in splits["val"]], "the validation texts")
    return cfg, tokenizer, _inputs(cfg, tokenizer, xs, "training texts")



def run(task, cfg: RunSettings, run_dir: Path,
        checked: Any = None) -> dict[str, float]:
    """Train on the splits ``task.validate`` read (``checked``; read again when None), test
    on the test split, write the run."""
    from ...training import finish, fit  # Lightning: only when training
    from ...training.classifier import ClassifierModule

    splits = checked if checked is not None else load_splits(cfg)
    start = start_of(cfg, run_dir, splits.get("init"), load=lambda d: _load_run(task, d))
    cfg, tokenizer, inputs = _prepare(cfg, splits, start)
    train = _Batches(inputs, _targets(cfg, splits["train"]), cfg.batch_size, cfg.seed,
                     Padding.of(cfg, tokenizer))
    # config.yaml keeps --epochs alone as the budget: the steps are not written back
    steps = (epoch_steps(cfg, train.num_batches, cfg.epochs) if cfg.epochs
             else cfg.max_steps)
    val_loader = torch.utils.data.DataLoader(_test_batches(cfg, tokenizer, splits["val"],
                                                           "validation texts"),
                                             batch_size=None)
    model = start.weights_into(build_model(cfg), cfg.labels)
    module = _module(ClassifierModule, model, cfg, steps)
    result = fit(module, train, val_loader, cfg, run_dir, max_steps=steps,
                 val_check_interval=cfg.val_every or None,
                 tokenizer=tokenizer)
    if not result.is_global_zero:  # other DDP ranks write nothing: no need to test there
        return finish(cfg, run_dir, model, {}, result, tokenizer=tokenizer)
    scores, answers, truth = _test_metrics(cfg, model, tokenizer, splits["test"])
    # (finish adds the saved weights' validation: val_acc, val_f1, ...)
    metrics = finish(cfg, run_dir, model, scores, result, tokenizer=tokenizer)
    if objective(cfg) == "single":
        _write_confusion(Path(run_dir), confusion(answers, truth, len(cfg.labels)), cfg.labels,
                         fit_weights_text(result.steps, result.best))
    what = "sets" if tokenizer is None else "texts"
    _report(cfg, scores, f"\ntest split, per class ({len(truth)} {what}):\n", sys.stdout)
    return metrics


def _module(kind, model, cfg, steps: int):
    """The ``ClassifierModule`` of a run: its objective, --class-weights in the labels'
    order, and its validation scores (``metrics.validation_scores``)."""
    weights = cfg.class_weight_values
    weight = (None if not weights
              else torch.tensor([float(weights[c]) for c in cfg.labels], dtype=torch.float32))
    scores = validation_scores(objective(cfg), _outputs(cfg), threshold=cfg.threshold,
                               mean=cfg.target_mean or 0.0, std=cfg.target_std or 1.0)
    return kind(model, cfg, steps, objective=objective(cfg), class_weight=weight, scores=scores)


def _write_confusion(run_dir: Path, matrix: torch.Tensor, labels: list[str],
                     weights: str) -> None:
    """``confusion.csv`` (a row per true class, a column per predicted one, headed by the
    class names) and ``confusion.png`` of the test split, its title naming ``weights``
    (``explorer.record.fit_weights_text``)."""
    import csv
    import io

    from ...runs import atomic_write
    from ...viz import plot_confusion

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["true \\ predicted", *labels])
    for label, row in zip(labels, matrix.tolist()):
        writer.writerow([label, *row])
    atomic_write(run_dir / "confusion.csv", buffer.getvalue().encode())
    plot_confusion(matrix, labels, run_dir / "confusion.png",
                   title=f"confusion matrix, test split\n{weights}")


@loads
def _load(run_dir: Path, cfg: RunSettings):
    """(model in eval mode, tokenizer); the tokenizer is None for feature sets."""
    tokenizer = None if cfg.set_column else load_run_tokenizer(run_dir)
    model = build_model(cfg)
    load_weights(model, Path(run_dir) / "model.safetensors")
    return model.eval(), tokenizer


def _load_run(task, run_dir: Path):
    """(model, tokenizer, labels) of the classify run in ``run_dir`` (a run --init names); a
    --regression run has no labels: ``[]``."""
    where = Path(run_dir) / "config.yaml"
    cfg = task.read_config(read_yaml(where), where)
    return (*_load(run_dir, cfg), list(cfg.labels or ()))


def load(task, run_dir: Path, cfg: RunSettings):
    """The trained model, with its tokenizer for texts: ``(model, tokenizer)``; a set run
    has none, so the model alone."""
    model, tokenizer = _load(run_dir, cfg)
    return model if tokenizer is None else (model, tokenizer)


def export_hf(task, run_dir: Path, cfg: RunSettings) -> tuple[Any, dict[str, Any], None]:
    """``attnlab export --hf``: a run from ``--init`` of a BERT-family checkpoint as its
    family's ``*ForSequenceClassification`` (``id2label`` the run's labels;
    ``attnlab.interop.bert_classify``) with the checkpoint's tokenizer, and no note. A run of
    attnlab's own encoder is a UsageError: Hugging Face has no class for it."""
    if cfg.arch == "transformer":
        raise UsageError(f"export: {run_dir} is a classify run of attnlab's own encoder; "
                         f"Hugging Face has a classification class only for a run from "
                         f"--init of a BERT-family checkpoint")
    from ...interop.bert_classify import classifier_to_hf
    from ...interop.tokenizer import to_hf_tokenizer

    model, tok = _load(run_dir, cfg)
    if cfg.regression:  # the number in the data's units: the standardisation into the head
        with torch.no_grad():
            model.classifier.weight.mul_(cfg.target_std)
            model.classifier.bias.mul_(cfg.target_std).add_(cfg.target_mean)
    labels = [cfg.label_column] if cfg.regression else list(cfg.labels)
    hf = classifier_to_hf(model, model_type=cfg.arch, labels=labels, specials=tok.specials)
    hf.config.problem_type = {"single": "single_label_classification", "regression": "regression",
                              "multi": "multi_label_classification"}[objective(cfg)]
    # truncation=True cuts where the run cut its inputs (--max-len)
    return hf, {"": to_hf_tokenizer(tok, model_max_length=cfg.max_len)}, None


def input_reader(task, run_dir: Path, cfg: RunSettings):
    """One input's features, as ``predict_many`` reads a feature-set run's (``parse_set``);
    None for a text run, whose every text is read."""
    return (lambda text: parse_set(text, cfg.feature_names)) if cfg.set_column else None


@predicts
@torch.no_grad()
def predict_many(task, run_dir: Path, cfg: RunSettings, texts: list[str],
                 labels: list[str]) -> list[dict[str, Any]]:
    """Each text's (or set's) label and class probabilities, in padded batches of similar
    length (``make_batches``; padding is masked, so a batch gives what each input alone gives).
    --multi-label: the labels whose probability is above the run's threshold (the line joins
    them with --label-sep; none: an empty line); --regression: the number."""
    model, tokenizer = _load(run_dir, cfg)
    if tokenizer is None:
        xs = each_input(texts, labels, input_reader(task, run_dir, cfg))
    else:
        xs = texts
        note_unknown(tokenizer, texts, labels)
    inputs = _inputs(cfg, tokenizer, xs, "inputs")
    outputs = torch.empty(len(inputs), _outputs(cfg))
    # make_batches reorders by length: each batch's "targets" are its inputs' positions
    for *batch, where in make_batches(inputs, list(range(len(inputs))), EVAL_BATCH,
                                      padding=Padding.of(cfg, tokenizer)):
        outputs[where] = model(*batch).float()
    answers = _decide(cfg, outputs)
    if cfg.regression:
        lines = [f"{y:.{_digits(y, cfg.target_std or 1.0)}g}" for y in answers.tolist()]
        return [{"prediction": float(line), "line": line} for line in lines]
    if cfg.multi_label:
        found = [[c for c, on in zip(cfg.labels, row) if on] for row in answers.tolist()]
        return [{"prediction": names, "line": cfg.label_sep.join(names),
                 "probabilities": probabilities_of(cfg.labels, row)}
                for names, row in zip(found, outputs.sigmoid())]
    return [{"prediction": cfg.labels[int(i)],
             "probabilities": probabilities_of(cfg.labels, row)}
            for i, row in zip(answers.tolist(), outputs.softmax(-1))]


def _digits(y: float, std: float) -> int:
    """The significant digits that show a predicted number ``y`` to a millionth of the
    training targets' ``std`` (6 at least, 17 at most): where the targets are 2024.5 give or
    take 0.003, 6 digits would print 2024.5 for each of them.

    Examples:
        >>> [f"{y:.{_digits(y, s)}g}" for y, s in ((2024.5012345, 0.003), (1234567.0, 5e5))]
        ['2024.5012345', '1234567']
        >>> [f"{y:.{_digits(y, 0.003)}g}" for y in (float("nan"), float("inf"))]
        ['nan', 'inf']
    """
    if not (y and math.isfinite(y)):
        return 6  # nan, inf and 0 print as they are
    return min(17, 6 + max(0, math.ceil(math.log10(abs(y) / std))))  # 17: a double's


class _TrainedOn:
    """The warning that train classify gives a --test file, for ``evaluate --data``, counted a
    chunk at a time (``see``): some of its texts are training texts of the run, so its scores
    are partly of what the model learned (the training split is re-drawn from the run's files;
    nothing is said where they changed or moved since, as there is then nothing to compare
    with). Sets are tensors; train classify compares texts only too."""

    def __init__(self, cfg: RunSettings) -> None:
        train: list[str] = []
        if not cfg.set_column:
            try:
                train = [x for x, _ in load_splits(cfg, val_file=False)["train"]]
            except UsageError:
                pass
        self.count = SharedCount(train)

    def see(self, pairs: list, where) -> None:
        """Count the rows of ``pairs`` (at the places ``where()`` gives) that training has."""
        self.count.see([x for x, _ in pairs], where)

    @property
    def rows(self) -> int:
        return self.count.rows

    def note(self, what: str) -> None:
        """The warning on stderr, of the rows seen in the file ``what``, where any is shared."""
        note = self.count.note(what)
        if note:
            print(note, file=sys.stderr, flush=True)


def _data_chunks(cfg: RunSettings, data: str):
    """(a function that gives the chunks of ``evaluate --data``'s examples, each ``(pairs,
    lines, file, digest so far)``; how many rows there are; the file's digest): a first pass
    reads and checks every row (``example_chunks``, and the labels as training knows them)
    keeping none, so that a bad row anywhere is refused before any is scored, and the rows it
    shares with training, and its rows of no label (``unlabelled_rows``, as training says
    them), are said. A file of sets is checked by a reading that builds no set
    (``checked_sets``), which the scoring reading takes instead of making its own: two in all."""
    labels = None if cfg.regression else set(cfg.labels)
    features = cfg.feature_names if cfg.set_column else None
    if cfg.set_column:  # checked without building a set, then read once more to score
        checked = checked_sets(cfg, "data", data, features, labels)
        return ((lambda: example_chunks(cfg, "data", data, features, rows=CHUNK_ROWS,
                                        checked=checked)), len(checked.last), checked.sha256)
    trained = _TrainedOn(cfg)
    empty, first = 0, None  # the rows of no label (--multi-label), as training's note says
    for pairs, lines, path, digest in example_chunks(cfg, "data", data, features,
                                                     rows=CHUNK_ROWS):
        check_labels(pairs, lines, path, labels, "data")
        trained.see(pairs, lambda: places(path, lines))
        more, at = no_label(pairs, lines, path)
        empty, first = empty + more, first or at
    trained.note(f"--data {path}")
    note = unlabelled_rows("data", path, trained.rows, empty, first)
    if note:
        print(note, file=sys.stderr, flush=True)
    return ((lambda: example_chunks(cfg, "data", data, features, rows=CHUNK_ROWS)),
            trained.rows, digest)


@attends
def attention_maps(task, run_dir: Path, cfg: RunSettings, text: str):
    """``attnlab plot attention DIR --input TEXT``: one row and column per token ([CLS] first
    with cls pooling; a pretrained encoder's special tokens as its tokenizer adds them), every
    layer's (H, T, T) map. A feature set's elements are labelled by
    their position and values, ``"0:(1.5,2)"``."""
    model, tokenizer = _load(run_dir, cfg)
    if tokenizer is not None:  # a label of a piece the model read as unk would pass for it
        note_unknown(tokenizer, [text], [input_name()])
    if tokenizer is None:
        features = parse_set(text, cfg.feature_names)  # (T, F), as the user wrote them
        x = _inputs(cfg, None, [features])[0][None]  # (1, T, F) standardised
        labels = [f"{i}:(" + ",".join(f"{v:g}" for v in row) + ")"
                  for i, row in enumerate(features.tolist())]
    elif pretrained(cfg):  # one text: no padding, every token real
        (ids, types), = tokenizer.encode_for_model([text], cfg.max_len)
        (whole, _), = tokenizer.encode_for_model([text], 1 << 30)  # uncut, for the note
        note_cut(len(whole), len(ids), cfg.max_len, what=input_name())  # both with [CLS], [SEP]
        batch = Padding.of(cfg, tokenizer).pad([(ids, types)])
        labels = [tokenizer.tokenizer.id_to_token(i) for i in ids]  # [CLS] ... [SEP] included
        return [m[0] for m in model.get_attention_maps(*batch)], labels, labels
    else:
        ids = encode(tokenizer, [text], cfg.max_len)[0]
        note_cut(len(tokenizer.encode(text)), len(ids), cfg.max_len, what=input_name())
        x, labels = torch.tensor([ids]), tokenizer.tokenize(text)[: len(ids)]
    labels = (["[CLS]"] if model.use_cls else []) + labels
    maps = model.get_attention_maps(x)  # L x (1, H, T, T)
    return [m[0] for m in maps], labels, labels


@rng_kept()  # a notebook's seeded draws after it are as before it
def evaluate(task, run_dir: Path, cfg: RunSettings, data: str | None) -> dict[str, float]:
    """The test metrics on ``data`` (same columns), or on the run's test split (re-drawn with
    its seed from the training files, refused if they changed since); the per-class table on
    stderr. ``data`` is read and scored ``CHUNK_ROWS`` rows at a time (``Tally``: the metrics
    of all its rows, exact), after a first pass that checks every row (``_data_chunks``): what
    is held grows with the chunk, not the file, and a long file says on stderr how far it is."""
    model, tokenizer = _load(run_dir, cfg)
    if data is not None:
        chunks, total, digest = _data_chunks(cfg, data)
        what = f"texts of --data {data}"
    else:
        check_test_files(files_of(cfg), cfg.data_sha256)
        # and its bytes are the recorded ones (load_splits)
        pairs = load_splits(cfg, val_file=False)["test"]
        chunks, total, digest, what = (lambda: [(pairs, None, None, None)]), len(pairs), None, \
            "test texts"
    tally, nan, started = Tally(cfg.labels, objective(cfg)), False, time.perf_counter()
    with said_once(total):  # the warnings of cut texts and NaN outputs: once, of them all
        for pairs, lines, path, read in chunks():
            answers, truth, finite = _answers(cfg, model, tokenizer, pairs, what)
            tally.add(answers, truth)
            before = tally.rows - len(pairs)
            nan |= said_nan(finite.tolist(), [f"--data {path} {p}" for p in places(path, lines)]
                            if data is not None else [f"row {before + i} of the test split"
                                                      for i in range(1, len(pairs) + 1)], run_dir)
            # the test split is one chunk, however long: no progress to say
            progress("evaluate", before, tally.rows, total, started,
                     CHUNK_ROWS if data is not None else total,
                     "sets" if cfg.set_column else "rows")
    if data is not None:
        same_both_readings(path, digest, read)
    metrics = null_scores(tally.scores()) if nan else tally.scores()
    _report(cfg, metrics, "", sys.stderr, "the test split" if data is None else f"--data {data}")
    return metrics
