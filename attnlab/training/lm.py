"""Training a decoder-only language model: next-token cross-entropy at every position.

Shapes: B batch, T block length, V vocabulary.

A window of T + 1 tokens gives T predictions at once: the causal mask lets position t see
tokens 0..t only, and it is trained to predict token t + 1 (teacher forcing). The loss is the
mean negative log-likelihood per token in nats; perplexity = exp(loss).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..data.chat_rows import IGNORE
from .module import TaskModule

__all__ = ["LMModule", "lm_loss"]


def lm_loss(model, inputs: Tensor, targets: Tensor) -> Tensor:
    """Mean next-token cross-entropy of ``model`` on inputs/targets (B, T), targets = inputs
    shifted by one; a target of ``IGNORE`` (-100: padding, and in instruction rows every token
    but the assistant's) is not counted, the mean taken over the others."""
    logits = model(inputs)  # (B, T, V)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                           ignore_index=IGNORE)


class LMModule(TaskModule):
    """``TaskModule`` for a ``CausalLM``: batches are (inputs (B, T), targets (B, T)).

    Logs ``train_loss`` and ``val_loss`` (via ``TaskModule``); the run's ``val_perplexity`` is
    exp(val_loss).
    """

    def loss(self, batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Next-token cross-entropy (``lm_loss``); nothing else is logged."""
        inputs, targets = batch
        return lm_loss(self.model, inputs, targets), {}
