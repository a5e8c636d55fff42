"""Training an encoder–decoder model with teacher forcing and label smoothing.

Shapes: B batch, S source length, T target length (SOS and EOS included), V target vocabulary.

Teacher forcing (the paper's training): the decoder reads the whole target shifted right —
SOS, y_1 .. y_{n} — and is trained to predict y_1 .. y_n, EOS at every position at once; the
causal mask keeps position t from seeing y_t. Label smoothing (Szegedy et al., 2016; §5.4 of
the paper, ε = 0.1) trains towards (1 - ε)·one-hot + ε/V, which hurts perplexity but helps
accuracy and BLEU; so training's loss is smoothed, and validation's (``val_loss``) is the
plain cross-entropy per target token of the whole split. The learning-rate schedule (cosine
or Noam warm-up) is the shared ``--schedule`` flag, handled by ``TaskModule``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

from .module import TaskModule
from .totals import ratio

if TYPE_CHECKING:
    from ..run_config import RunSettings

__all__ = ["Seq2SeqModule", "seq2seq_loss", "seq2seq_totals"]


def seq2seq_loss(model, src: Tensor, tgt: Tensor, *, label_smoothing: float = 0.0,
                 pad_id: int = 0) -> tuple[Tensor, dict[str, Tensor]]:
    """Teacher-forced cross-entropy of a target (B, T) = [SOS, y..., EOS, pad...].

    Returns:
        (mean loss over real target tokens, {"token_accuracy": fraction predicted right}).
    """
    logits, tgt_out = _teacher_forced(model, src, tgt)
    loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=pad_id,
                           label_smoothing=label_smoothing)
    real = tgt_out != pad_id
    correct = (logits.argmax(-1) == tgt_out) & real
    return loss, {"token_accuracy": correct.sum() / real.sum().clamp(min=1)}


def seq2seq_totals(model, src: Tensor, tgt: Tensor, *,
                   pad_id: int = 0) -> tuple[Tensor, dict[str, Tensor]]:
    """Validation's numbers of a batch: the plain cross-entropy (no smoothing) summed over its
    real target tokens and the tokens predicted right, each with the count of those tokens
    (``totals.ratio``), so that ``val_loss`` and ``val_token_accuracy`` are per target token
    of the whole split, whatever the lengths of its sentences and batches.

    Returns:
        (mean loss over the batch's real target tokens, the sums and their counts).
    """
    logits, tgt_out = _teacher_forced(model, src, tgt)
    summed = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=pad_id,
                             reduction="sum")
    real = tgt_out != pad_id  # (B, T-1)
    tokens = real.sum()
    right = ((logits.argmax(-1) == tgt_out) & real).sum()
    return summed / tokens.clamp(min=1), {**ratio("loss", summed, tokens),
                                          **ratio("token_accuracy", right, tokens)}


def _teacher_forced(model, src: Tensor, tgt: Tensor) -> tuple[Tensor, Tensor]:
    """(logits (B, T-1, V), the targets they predict (B, T-1)) of the whole target at once."""
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]  # (B, T-1) each: predict token t+1 from <= t
    return model(src, tgt_in), tgt_out


class Seq2SeqModule(TaskModule):
    """``TaskModule`` for a ``Seq2SeqTransformer``: batches are (src (B, S), tgt (B, T)).

    Args:
        model: the ``Seq2SeqTransformer``.
        cfg: the typed run config (``attnlab.run_config``); its ``label_smoothing`` is read.
        max_steps: the step budget, for the schedule.
        decoded_metrics: a function of the model that decodes validation pairs and scores
            them (translate's ``--val-bleu N``: ``val_bleu``, ``val_chrf``), called at the end of
            each validation; None: no decoding.
    """

    def __init__(self, model, cfg: RunSettings, max_steps: int, *,
                 decoded_metrics: Callable[[torch.nn.Module], dict[str, float]] | None = None
                 ) -> None:
        super().__init__(model, cfg, max_steps)
        self.label_smoothing = float(cfg.label_smoothing)
        self.decoded_metrics = decoded_metrics

    def loss(self, batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Teacher-forced, label-smoothed cross-entropy (``seq2seq_loss``) in training; in
        validation the plain cross-entropy per target token of the split (``seq2seq_totals``),
        as lm's ``val_loss`` is, so that it measures the model, whatever ε trained it."""
        src, tgt = batch
        if not self.training:
            return seq2seq_totals(self.model, src, tgt, pad_id=self.model.pad_id)
        return seq2seq_loss(self.model, src, tgt, label_smoothing=self.label_smoothing,
                            pad_id=self.model.pad_id)

    def targets(self, batch) -> Tensor:
        """The real (not padding) target tokens the decoder predicts: the loss is their mean."""
        return (batch[1][:, 1:] != self.model.pad_id).sum()

    def validation_end(self) -> dict[str, float]:
        """``decoded_metrics`` of the model (none without)."""
        return {} if self.decoded_metrics is None else self.decoded_metrics(self.model)
