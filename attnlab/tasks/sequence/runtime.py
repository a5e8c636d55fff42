"""The runtime module of ``attnlab train reverse|copy|sort``, the part that imports torch (the
spec: ``attnlab.tasks.sequence``): data, model, training, test metrics, figures and the use of a
trained run.

Training and everything else — ``load``, ``predict``, ``evaluate``, the attention maps — use
the pure-torch ``attnlab.models.predictor.ElementPredictor``, the model of the course's
``TransformerPredictor`` (same state dict); only ``run`` imports the training loop (Lightning
Fabric). Test metrics are computed by ``sequence_metrics``, shared by ``run`` and
``evaluate``. Each function takes the ``SequenceTask`` first: its ``name`` says which labels
(reverse, copy or sort) the data carry.

Shapes: N sequences, T = seq_len, C = num_categories, L layers, H heads.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from ...data import SequenceDataset, batch_loader, make_labels, pad_to_length
from ...data.tables import CHUNK_ROWS
from ...errors import UsageError
from ...models.configs import ElementPredictorConfig
from ...models.predictor import ElementPredictor
from ...notes import progress, said_once
from ...paths import not_found
from ...run_config import RunSettings
from ...runs import load_weights
from ...viz import lr_curve, plot_attention, plot_lr_schedule
from ...explorer.record import fit_weights_text
from ..base import (FINITE, Task, attends, config_from_run, decimal, each_input, loads,
                    null_scores, predicts, ratio, rng_kept, said_nan, without_nan_metrics)
from ..input_lines import InputLines, open_inputs
from ..spaced_input import spaced_tokens

__all__ = ["model_config_of", "build_model", "parse_tokens", "sequence_metrics", "dataset", "run",
           "figures", "load", "input_reader", "predict_many", "evaluate", "attention_maps"]


def model_config_of(cfg: RunSettings) -> ElementPredictorConfig:
    """The ``ElementPredictorConfig`` of a run's configuration: one-hot symbols in, a class per
    position out (both ``--num-categories``).

    Examples:
        >>> from attnlab.tasks import SHARED_DEFAULTS, get_task
        >>> model_config_of(get_task("reverse").config(**SHARED_DEFAULTS,
        ...                                            num_categories=12)).num_classes
        12
    """
    C = cfg.num_categories
    return config_from_run(ElementPredictorConfig, cfg, input_dim=C, num_classes=C)


def build_model(cfg: RunSettings) -> ElementPredictor:
    """The pure-torch ``ElementPredictor`` a run's configuration describes (randomly
    initialised); training builds ``TransformerPredictor`` from the same config."""
    return ElementPredictor(model_config_of(cfg))


def parse_tokens(text: str, num_categories: int, seq_len: int, *,
                 what: str = "--input") -> list[int]:
    """Tokens separated by spaces -> symbols; ``UsageError`` naming a bad token or length, or
    lines (``spaced_tokens``).

    Examples:
        >>> parse_tokens(" 3 1  4 ", 10, 16)
        [3, 1, 4]
    """
    tokens = spaced_tokens(text, what, "sequence")
    if not tokens:
        raise UsageError(f"{what} is empty; give up to {seq_len} symbols separated by spaces")
    symbols = []
    for token in tokens:
        if (symbol := decimal(token)) is None or symbol >= num_categories:
            raise UsageError(f"{what}: token {token!r} is not a symbol of this model "
                             f"(integers 0..{num_categories - 1})")
        symbols.append(symbol)
    if len(symbols) > seq_len:
        raise UsageError(f"{what} has {len(symbols)} tokens; this model takes at most "
                         f"--seq-len {seq_len} (the token past the end is {tokens[seq_len]!r})")
    return symbols


@torch.no_grad()
def sequence_metrics(model, inputs: torch.Tensor, labels: torch.Tensor,
                     lengths: torch.Tensor | None = None, *,
                     prefix: str = "test_") -> dict[str, float]:
    """Token and whole-sequence accuracy of ``model`` on inputs/labels (N, T).

    With ``lengths`` (N,), only the first lengths[i] output positions of row i count (inputs of
    a shorter sequence padded by ``pad_to_length``).
    """
    counted = _counted(inputs, lengths)
    return _accuracies(_hits(model.predict(inputs), labels, counted), prefix)


def _counted(inputs: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
    """(N, T) bools: the output positions within each row's length (all, without lengths)."""
    if lengths is None:
        lengths = torch.full((len(inputs),), inputs.shape[1])
    return torch.arange(inputs.shape[1])[None, :] < lengths[:, None]  # (N, T)


def _hits(predictions: torch.Tensor, labels: torch.Tensor, counted: torch.Tensor
          ) -> tuple[int, int, int, int]:
    """(right tokens, tokens, right sequences, sequences) of ``predictions`` (N, T) at the
    ``counted`` positions: counts, which the chunks of a file add up to those of all its rows."""
    correct = predictions == labels  # (N, T)
    return (int((correct & counted).sum()), int(counted.sum()),
            int((correct | ~counted).all(-1).sum()), len(correct))


def _accuracies(hits: tuple[int, ...], prefix: str) -> dict[str, float]:
    """Token and whole-sequence accuracy of ``_hits``' counts, each their exact ratio."""
    return {f"{prefix}token_accuracy": ratio(hits[0], hits[1]),
            f"{prefix}sequence_accuracy": ratio(hits[2], hits[3])}


def _scored(model, inputs: torch.Tensor, labels: torch.Tensor, lengths: torch.Tensor | None
            ) -> tuple[tuple[int, int, int, int], list[bool]]:
    """(``_hits``' counts, for each row whether its counted outputs are all finite)."""
    predictions, finite = model.predict(inputs, finite=True)  # (N, T) each
    counted = _counted(inputs, lengths)
    return _hits(predictions, labels, counted), (finite | ~counted).all(-1).tolist()


def dataset(task: Task, cfg: RunSettings, split: str) -> SequenceDataset:
    """The ``split`` ("train", "val" or "test") of ``--SPLIT-size`` sequences, fixed by
    ``--seed``."""
    # only the split's own size: a run evaluated needs no --train-size
    size = (cfg.train_size if split == "train" else cfg.val_size if split == "val"
            else cfg.test_size)
    return SequenceDataset(task.name, cfg.num_categories, cfg.seq_len, size, seed=cfg.seed,
                           split=split)


# ---- training ------------------------------------------------------------------------------
def run(task: Task, cfg: RunSettings, run_dir: Path,
        checked: Any = None) -> dict[str, float]:
    """Train the course's model (the ``ElementPredictor`` of ``TransformerPredictor``) for
    ``task.budget(cfg)`` steps (or until validation is perfect three times, with --early-stop),
    then test and draw the figures."""
    from ...training import StopAt, finish, fit  # Lightning: here only
    from ...training.element import ElementModule

    train, val = dataset(task, cfg, "train"), dataset(task, cfg, "val")
    max_steps = task.budget(cfg)
    model = build_model(cfg)
    result = fit(ElementModule(model, cfg, max_steps),
                 batch_loader(train, cfg.batch_size, shuffle=True, seed=cfg.seed),
                 batch_loader(val, len(val), shuffle=False), cfg, run_dir,
                 max_steps=max_steps, val_check_interval=cfg.val_every,
                 stop_at=StopAt("val_seq_acc", 1.0, times=3) if cfg.early_stop else None)
    metrics = {}
    if result.is_global_zero:
        test = dataset(task, cfg, "test")
        metrics = sequence_metrics(model, test.inputs, test.labels)
        figures(task, model, cfg, run_dir, test.inputs[0].tolist(), result.steps, max_steps,
                weights=fit_weights_text(result.steps, result.best))
    return finish(cfg, run_dir, model, metrics, result)


def figures(task: Task, model, cfg: RunSettings, run_dir: Path, sequence: list[int],
            steps: int, max_steps: int, *, weights: str | None = None) -> None:
    """attention.png (the maps of one test sequence; its title names ``weights``, the step
    ``explorer.record.fit_weights_text`` says) and lr_schedule.png."""
    model.eval()
    maps, x_labels, y_labels = _maps(task, model, cfg, sequence, len(sequence))
    plot_attention(maps, x_labels, y_labels, Path(run_dir) / "attention.png",
                   title=f"{task.name}: attention of a test sequence"
                   + (f"\n{weights}" if weights else ""))
    curve = lr_curve(cfg.schedule, warmup=cfg.warmup, max_iters=max_steps,
                     d_model=cfg.model_dim, lr=cfg.lr, min_lr=cfg.min_lr, cooldown=cfg.cooldown)
    label = (f"{cfg.schedule} (--lr {cfg.lr:g}, warm-up {cfg.warmup}, "
             f"budget {max_steps} steps)")
    plot_lr_schedule({label: curve}, Path(run_dir) / "lr_schedule.png",
                     title=f"{task.name}: learning-rate schedule",
                     mark_step=steps if steps < max_steps else None)


# ---- using a trained run (no Lightning) ----------------------------------------------------
@loads
def load(task: Task, run_dir: Path, cfg: RunSettings) -> ElementPredictor:
    """The trained ``ElementPredictor`` of ``run_dir`` (eval mode), which knows the length it
    was trained on: its ``predict`` and ``get_attention_maps`` refuse another."""
    model = build_model(cfg)
    load_weights(model, Path(run_dir) / "model.safetensors")
    model.trained_seq_len, model.trained_task = cfg.seq_len, task.name
    return model.eval()


def _padded(task: Task, cfg: RunSettings,
            rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Rows of up to T symbols, each padded to T so that its answer fills the first positions:
    inputs (N, T), lengths (N,), and where each row starts in its padded input."""
    padded = [pad_to_length(task.name, r, cfg.seq_len, cfg.num_categories) for r in rows]
    return (torch.tensor([p for p, _ in padded]), torch.tensor([len(r) for r in rows]),
            [start for _, start in padded])



def input_reader(task: Task, run_dir: Path, cfg: RunSettings):
    """One input's symbols, as ``predict_many`` reads it (``parse_tokens``)."""
    return lambda text: parse_tokens(text, cfg.num_categories, cfg.seq_len)


@predicts
def predict_many(task: Task, run_dir: Path, cfg: RunSettings, texts: list[str],
                 labels: list[str]) -> list[dict[str, Any]]:
    """Every input's predicted symbols, all inputs in batches of one forward pass."""
    rows = each_input(texts, labels, input_reader(task, run_dir, cfg))
    inputs, _, _ = _padded(task, cfg, rows)
    # (N, T) each; an answer fills its row's start
    predicted, finite = load(task, run_dir, cfg).predict(inputs, finite=True)
    return [{"prediction": " ".join(str(int(t)) for t in p[:len(row)]),
             FINITE: bool(ok[:len(row)].all())} for p, ok, row in zip(predicted, finite, rows)]


@rng_kept()  # a notebook's seeded draws after it are as before it
def evaluate(task: Task, run_dir: Path, cfg: RunSettings, data: str | None) -> dict[str, float]:
    """The test metrics on the run's test split, or on ``data`` (one sequence a line, symbols
    separated by spaces, each up to --seq-len long)."""
    model = load(task, run_dir, cfg)
    if data is None:
        test = dataset(task, cfg, "test")
        hits, finite = _scored(model, test.inputs, test.labels, None)
        labels = [f"test sequence {i}" for i in range(1, len(finite) + 1)]
        return without_nan_metrics(_accuracies(hits, "test_"), finite, labels, run_dir)
    path = Path(data)
    if path.is_dir():
        raise UsageError(f"--data {path}: is a directory, not a file of sequences")
    if not path.is_file():
        raise not_found("--data", path)
    return _file_metrics(task, model, cfg, path, run_dir)


def _file_metrics(task: Task, model, cfg: RunSettings, path: Path, run_dir: Path
                  ) -> dict[str, float]:
    """``evaluate --data FILE``: its sequences read, checked and scored ``CHUNK_ROWS`` lines
    at a time (``InputLines``, the reader of ``predict --input-file``), after a first pass
    that checks every line: what is held grows with the chunk, not the file (10^5 lines held
    them all, their tensors too), a bad line anywhere is named before any is scored, the
    scores are those of all the lines at once (``_hits``' counts, summed), a long file says
    on stderr how far it is, and a file changed or appended to while it is read is refused."""
    where = f"--data {path}"
    with open_inputs(str(path), where) as source:
        # "\n" ends a line, as in --input-file (a "\r" is white space); a byte-order mark
        # (Notepad's) is no part of the first token; blank lines are passed over
        lines = InputLines(source, where, str(path), command="evaluate", chunk=CHUNK_ROWS,
                           what="--data", blanks=True)
        total = sum(len(rows) for _, rows in _chunks(cfg, lines, where))  # every line checked
        if not total:
            raise UsageError(f"{where} holds no sequences (one per line, tokens separated by "
                             f"spaces)")
        counts: tuple[int, ...] = (0, 0, 0, 0)
        nan, started = False, time.perf_counter()
        with said_once(total):  # the NaN outputs: said once, of them all
            for numbers, rows in _chunks(cfg, lines, where):
                inputs, lengths, _ = _padded(task, cfg, rows)
                labels = torch.zeros_like(inputs)  # (N, T); past each row's length, not counted
                for i, r in enumerate(rows):
                    labels[i, : len(r)] = make_labels(task.name, torch.tensor([r]))[0]
                hits, finite = _scored(model, inputs, labels, lengths)
                nan |= said_nan(finite, [f"{where} line {n}" for n in numbers], run_dir)
                before, counts = counts[3], tuple(a + b for a, b in zip(counts, hits))
                progress("evaluate", before, counts[3], total, started, CHUNK_ROWS, "sequences")
        lines.same_end()
    metrics = _accuracies(counts, "test_")
    return null_scores(metrics) if nan else metrics


def _chunks(cfg: RunSettings, lines: InputLines, where: str):
    """(line numbers, symbols) of the sequences of each chunk of ``lines`` that holds one,
    each line checked (``parse_tokens``: the line named)."""
    for start in range(0, len(lines), lines.chunk):
        numbered = [(start + j + 1, line)
                    for j, line in enumerate(lines[start:start + lines.chunk]) if line.strip()]
        if numbered:
            yield ([n for n, _ in numbered],
                   [parse_tokens(line, cfg.num_categories, cfg.seq_len, what=f"{where} line {n}")
                    for n, line in numbered])


def _maps(task: Task, model, cfg: RunSettings, tokens: list[int], n: int):
    """(maps, key labels, query labels). Keys are the input's symbols where they sit in the
    padded row; query row i is where output i is predicted (the answer fills the row's
    start), so it is labelled with the model's output there (not with the input symbol at i,
    which for a reversal is not what that row produces). Padding, and
    outputs past the answer, in parentheses."""
    inputs, _, starts = _padded(task, cfg, [tokens])
    maps = [m[0] for m in model.get_attention_maps(inputs)]  # L × (H, T, T)
    keys = [str(t) if starts[0] <= i < starts[0] + n else f"({t})"
            for i, t in enumerate(inputs[0].tolist())]
    outputs = model.predict(inputs)[0].tolist()  # (T,)
    queries = [str(t) if i < n else f"({t})" for i, t in enumerate(outputs)]
    return maps, keys, queries


@attends
def attention_maps(task: Task, run_dir: Path, cfg: RunSettings, text: str):
    """``attnlab plot attention``: (L × (H, T, T) maps, key labels, query labels)."""
    tokens = parse_tokens(text, cfg.num_categories, cfg.seq_len)
    return _maps(task, load(task, run_dir, cfg), cfg, tokens, len(tokens))
