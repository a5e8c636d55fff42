"""Where a classify run's first weights and its tokeniser come from (``start_of``).

    a new run, no --init            random weights; a tokeniser fit on the training split
    --init DIR, a Hugging Face       the checkpoint's encoder (``read_checkpoint``) under a new
        BERT-family directory        head; the checkpoint's own tokeniser
    --init RUN, an attnlab           the run's model (a new head where the labels differ);
        classify run                 the run's tokeniser
    --resume of a run from --init    the run's last checkpoint (the training loop restores it);
                                     the tokeniser the run saved in its directory
    --resume before that checkpoint  --init's weights again (checked against init_sha256); the
                                     tokeniser the run saved

A run from --init saves its tokeniser in its directory before training, so that ``--resume``
never reads DIR again. Imports torch (the runtime's half of the task).
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ...settings import later_process

__all__ = ["Start", "start_of", "pretrained", "load_run_tokenizer"]


def pretrained(cfg) -> bool:
    """Whether a run's model is a pretrained encoder's ``BertClassifier`` (``arch`` its
    model_type) rather than attnlab's own ``SequenceClassifier``."""
    return cfg.arch != "transformer"


def load_run_tokenizer(run_dir: str | Path):
    """The tokeniser a classify run saved (attnlab's own kinds, or a checkpoint's)."""
    from ...interop.saved import load_any_tokenizer

    return load_any_tokenizer(Path(run_dir) / "tokenizer.json")


@dataclass(frozen=True)
class Start:
    """A run's start (see the module doc).

    Attributes:
        model: the model whose weights the run starts from (a ``BertEncoder`` of a checkpoint,
            or an attnlab run's classifier); None: random weights.
        labels: the labels of ``model``'s head (an attnlab run's; ``()`` for a --regression
            run's one number); None for an encoder.
        tokenizer: the tokeniser the run must use; None: fit one on the training split.
        vocab_size: the embedding's rows of ``model``; None where the tokeniser fixes it.
    """

    model: nn.Module | None = None
    labels: list[str] | None = None
    tokenizer: Any = None
    vocab_size: int | None = None

    def weights_into(self, model: nn.Module, labels: list[str] | None) -> nn.Module:
        """``model`` (just built from the run config, whose ``labels`` are None under
        --regression) holding the start's weights: an encoder's under its new head; an
        attnlab run's whole model, its head's rows in the new run's order of the same classes
        (a run from before ``class_order`` listed 12, 2, 7); the last layer of the head starts
        anew for other classes, or a number where there were classes."""
        if self.model is None:
            return model
        if self.labels is None:  # a pretrained encoder: the classifier's body
            _encoder_into(model, self.model)
            return model
        old, labels = list(self.labels), list(labels or ())
        state, head = self.model.state_dict(), _head_layer(model) + "."
        same = sorted(old) == sorted(labels)
        if same and old != labels:  # the same classes in another order: the rows follow
            rows = torch.tensor([old.index(c) for c in labels], dtype=torch.long)
            state.update({k: v[rows] for k, v in state.items() if k.startswith(head)})
        elif not same:
            state = {k: v for k, v in state.items() if not k.startswith(head)}
            _say_new_head(old, labels)
        model.load_state_dict(state, strict=same)
        return model


def _say_new_head(old: list[str], labels: list[str]) -> None:
    """One line on stderr when a run from --init RUN has other classes than RUN's: the
    head's last layer then starts anew, which a user who meant the same classes (spelled
    otherwise: '100.0' in RUN, '1e2' now) would not otherwise learn. Said by the first DDP
    process alone: each process builds its model."""
    if old and labels and not later_process():  # (--regression's number has no classes)
        said = [", ".join(map(repr, names[:10])) + (", ..." if len(names) > 10 else "")
                for names in (old, labels)]
        print(f"note: the --init run's classes ({said[0]}) are not this run's ({said[1]}): "
              f"the last layer of the head starts anew, the rest from the --init run",
              file=sys.stderr, flush=True)


def _encoder_into(model: nn.Module, encoder: nn.Module) -> None:
    """``encoder``'s weights into a ``BertClassifier``'s body. An encoder without a pooler
    under ``--pooling cls`` leaves the classifier's new pooler (the first layer of the head of
    the family's ``*ForSequenceClassification``) drawn as Hugging Face draws a new layer:
    weight ~ N(0, 0.02²), bias 0."""
    missing, unexpected = model.bert.load_state_dict(encoder.state_dict(), strict=False)
    assert not unexpected and all(k.startswith("pooler.") for k in missing), (missing,
                                                                               unexpected)
    if missing:
        nn.init.normal_(model.pooler.weight, std=0.02)
        nn.init.zeros_(model.pooler.bias)


def _head_layer(model: nn.Module) -> str:
    """The name of the classifier's last layer (one row per class)."""
    if hasattr(model, "classifier"):  # BertClassifier
        return "classifier"
    return f"output_net.{len(model.output_net) - 1}"  # SequenceClassifier


def start_of(cfg, run_dir: Path, checkpoint=None, *,
             load: Callable[[Path], tuple[nn.Module, Any, list[str]]]) -> Start:
    """The start of the run ``cfg`` describes (see the module doc).

    Args:
        cfg: the run config (``init``, ``init_sha256``, ``resume``).
        run_dir: the run directory (a resumed run's tokeniser is there).
        checkpoint: the Hugging Face checkpoint ``validate`` read already, if it did.
        load: ``run directory -> (model, tokenizer, labels)`` of an attnlab classify run
            (the runtime's).

    Raises:
        UsageError: --init DIR changed since the run was configured, or is no longer what it
            was (``reread_init_source``, ``pretrained.read_init``).
    """
    if not cfg.init or cfg.set_column:
        return Start()
    from ...training.checkpoint import resumes_from_checkpoint, saved_tokenizer_file

    if resumes_from_checkpoint(cfg, run_dir):
        return Start(tokenizer=load_run_tokenizer(run_dir))
    start = _init_start(cfg, checkpoint, load)
    if saved_tokenizer_file(cfg, run_dir):  # resumed before its first checkpoint
        start = replace(start, tokenizer=load_run_tokenizer(run_dir))
    return start


def _init_start(cfg, checkpoint, load) -> Start:
    """``start_of`` of a run that starts: --init DIR's weights, read again and checked."""
    source = Path(cfg.init)
    if not (source / "config.yaml").is_file():  # a Hugging Face directory
        if checkpoint is None:  # resumed: validate read none, before the run was seeded
            from .pretrained import read_init

            with torch.random.fork_rng(devices=[]):  # so it draws what a new run draws
                checkpoint = read_init(cfg.init, cfg.init_sha256, cfg.pooling)
        return Start(model=checkpoint.model, tokenizer=checkpoint.tokenizer,
                     vocab_size=checkpoint.config.vocab_size)
    from ...interop.source import reread_init_source

    reread_init_source(source, cfg.init_sha256, task="classify")  # the weights configured
    model, tokenizer, labels = load(source)
    return Start(model=model, labels=labels, tokenizer=tokenizer,
                 vocab_size=model.config.vocab_size)
