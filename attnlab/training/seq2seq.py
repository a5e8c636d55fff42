"""Training an encoder–decoder model with teacher forcing and label smoothing.

Shapes: B batch, S source length, T target length (SOS and EOS included), V target vocabulary.

Teacher forcing (the paper's training): the decoder reads the whole target shifted right —
SOS, y_1 .. y_{n} — and is trained to predict y_1 .. y_n, EOS at every position at once; the
causal mask keeps position t from seeing y_t. Label smoothing (Szegedy et al., 2016; §5.4 of
the paper, ε = 0.1) trains towards (1 - ε)·one-hot + ε/V, which hurts perplexity but helps
accuracy and BLEU. The learning-rate schedule (cosine or Noam warm-up) is the shared
``--schedule`` flag, handled by ``TaskModule``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

from .module import TaskModule

if TYPE_CHECKING:
    from ..run_config import RunSettings

__all__ = ["Seq2SeqModule", "seq2seq_loss"]


def seq2seq_loss(model, src: Tensor, tgt: Tensor, *, label_smoothing: float = 0.0,
                 pad_id: int = 0) -> tuple[Tensor, dict[str, Tensor]]:
    """Teacher-forced cross-entropy of a target (B, T) = [SOS, y..., EOS, pad...].

    Returns:
        (mean loss over real target tokens, {"token_accuracy": fraction predicted right}).
    """
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]  # (B, T-1) each: predict token t+1 from <= t
    logits = model(src, tgt_in)  # (B, T-1, V)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                           ignore_index=pad_id, label_smoothing=label_smoothing)
    real = tgt_out != pad_id
    correct = (logits.argmax(-1) == tgt_out) & real
    return loss, {"token_accuracy": correct.sum() / real.sum().clamp(min=1)}


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
        """Teacher-forced, label-smoothed cross-entropy (``seq2seq_loss``)."""
        src, tgt = batch
        return seq2seq_loss(self.model, src, tgt, label_smoothing=self.label_smoothing,
                            pad_id=self.model.pad_id)

    def validation_end(self) -> dict[str, float]:
        """``decoded_metrics`` of the model (none without)."""
        return {} if self.decoded_metrics is None else self.decoded_metrics(self.model)
