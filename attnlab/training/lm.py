"""Training a decoder-only language model: next-token cross-entropy at every position.

Shapes: B batch, T block length, V vocabulary.

A window of T + 1 tokens gives T predictions at once: the causal mask lets position t see
tokens 0..t only, and it is trained to predict token t + 1 (teacher forcing). The loss is the
mean negative log-likelihood per token in nats; perplexity = exp(loss).
"""
from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor

from ..data.chat_rows import IGNORE
from .module import TaskModule
from .totals import ratio

__all__ = ["LMModule", "lm_loss"]


def lm_loss(model, inputs: Tensor, targets: Tensor, *, label_smoothing: float = 0.0,
            reduction: str = "mean") -> Tensor:
    """Mean next-token cross-entropy of ``model`` on inputs/targets (B, T), targets = inputs
    shifted by one; a target of ``IGNORE`` (-100: padding, and in instruction rows every token
    but the assistant's) is not counted, the mean taken over the others (``reduction="sum"``:
    their sum). With ``label_smoothing`` ε, each counted target is 1 - ε on the next token and
    ε spread over the whole vocabulary (``--label-smoothing``)."""
    logits = model(inputs)  # (B, T, V)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                           ignore_index=IGNORE, label_smoothing=label_smoothing,
                           reduction=reduction)


class LMModule(TaskModule):
    """``TaskModule`` for a ``CausalLM``: batches are (inputs (B, T), targets (B, T)).

    Logs ``train_loss`` and ``val_loss`` (via ``TaskModule``); the run's ``val_perplexity`` is
    exp(val_loss).
    """

    def __init__(self, model, cfg, max_steps: int) -> None:
        super().__init__(model, cfg, max_steps)
        # a mapping (the library's form of cfg) may leave it out; an older run's reads 0.0
        smoothing = cfg.get("label_smoothing") if isinstance(cfg, Mapping) else cfg.label_smoothing
        self.label_smoothing = float(smoothing or 0.0)

    def loss(self, batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Next-token cross-entropy (``lm_loss``); nothing else is logged. Training's is
        label-smoothed by ``--label-smoothing``; validation's is not, so that ``val_loss`` and
        ``val_perplexity`` = exp(val_loss) measure the model, whatever it was trained with.
        Validation's is per counted target of the whole split (``totals.ratio``): instruction
        rows count as many targets as their replies have tokens."""
        inputs, targets = batch
        if self.training:
            return lm_loss(self.model, inputs, targets, label_smoothing=self.label_smoothing), {}
        summed = lm_loss(self.model, inputs, targets, reduction="sum")
        counted = (targets != IGNORE).sum()  # instruction rows: the replies' tokens only
        return summed / counted.clamp(min=1), ratio("loss", summed, counted)

    def targets(self, batch) -> torch.Tensor:
        """The counted targets (an instruction row's reply tokens only): the training loss is
        their mean."""
        return (batch[1] != IGNORE).sum()

    def tokens(self, batch) -> int:
        """Every position of every window (padding of instruction rows included), as nanoGPT
        counts tokens per step."""
        return batch[0].numel()
