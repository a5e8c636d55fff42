"""Training a token tagger (``attnlab train tag``): a class for every labelled token.

Shapes: B batch, T tokens (words, or a pretrained encoder's subwords), C tags.

The loss is the cross-entropy over the labelled tokens: labels (B, T) hold -100 where a token
carries no label (padding; a word's later subwords), which the loss skips, as Hugging Face's
token classification does. In training the loop logs the accuracy over labelled tokens. In
validation it also counts entities with the ``score`` it is given (the task's
``attnlab.tasks.tag.scoring.entity_scores``, which this layer may not import), on the host:
validation reads its numbers anyway; and ``summarise`` turns the split's counts into ``val_f1``,
``val_precision``, ``val_recall``: entity F1 is a ratio of counts over the whole split, not a
mean of per-batch scores. ``val_loss`` and the token accuracy ``val_acc`` are such ratios too
(``totals.ratio``), the summed cross-entropy of the split over its labelled tokens,

    val_loss = Σ_split CE / (labelled tokens of the split),

each labelled token weighted equally, as lm's ``val_loss`` weighs every token. The loop's mean
of per-batch losses would weigh a batch by its sentences, so that a batch of short sentences
(few labelled tokens) would count as much as one of long sentences. A validation word past
--max-len has no logits: it counts as predicted ``O`` in ``val_acc`` and the entity scores, as
the test split's scores count it (labels past the logits' T, see ``TaggerModule``).
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from .module import TaskModule
from .totals import ratio, total

__all__ = ["TaggerModule", "IGNORE"]

IGNORE = -100  # a label the loss skips (torch's and Hugging Face's ignore_index)
_ENTITIES = ("right", "predicted", "true")  # the entity counts of ``score``


class TaggerModule(TaskModule):
    """``TaskModule`` for batches ``(*inputs, labels)``: inputs as the model takes them
    (token ids (B, T); or ids, attention mask and token types), labels (B, T). In validation
    the labels may be (B, T + K): the K columns past the logits' T hold the tags of a
    sentence's words past --max-len (-100 after them), which the model does not read: they
    count as predicted ``O`` in ``acc`` and the entity counts, as the test split counts them,
    and ``loss`` leaves them out (they have no logits).

    Args:
        model, cfg, max_steps: as ``TaskModule``.
        tags: the tag of each class index, to count entities in validation.
        score: ``(true tags, predicted tags) -> {"right", "predicted", "true", ...}``, each
            a list of sentences of tags: the entity counts.
    """

    def __init__(self, model, cfg, max_steps: int, tags: list[str],
                 score: Callable[[list[list[str]], list[list[str]]], dict]) -> None:
        super().__init__(model, cfg, max_steps)
        self.tags, self.score = list(tags), score

    def loss(self, batch) -> tuple[Tensor, dict[str, Tensor]]:
        *inputs, labels = batch
        logits = self.model(*inputs)  # (B, T, C)
        labels, cut = labels[:, :logits.shape[1]], labels[:, logits.shape[1]:]  # (B, T), (B, K)
        preds, kept = logits.argmax(-1), labels != IGNORE  # (B, T)
        correct, labelled = ((preds == labels) & kept).sum(), kept.sum()  # tokens
        if self.training:
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE)
            return loss, {"acc": correct / labelled.clamp(min=1)}
        summed = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE,
                                 reduction="sum")
        # the words past --max-len have no logits: read as O, as the test split reads them
        outside = cut == self.tags.index("O")  # (B, K)
        words = labelled + (cut != IGNORE).sum()
        return summed / labelled.clamp(min=1), {
            **ratio("loss", summed, labelled), **ratio("acc", correct + outside.sum(), words),
            **self._entities(preds, labels, kept, cut)}

    def targets(self, batch) -> Tensor:
        """The labelled tokens: the training loss is their mean."""
        return (batch[-1] != IGNORE).sum()

    def _entities(self, preds: Tensor, labels: Tensor, kept: Tensor,
                  cut: Tensor) -> dict[str, Tensor]:
        """The entity counts of a validation batch (``score``'s), as totals of the split; the
        words past --max-len (``cut``, (B, K)) follow each sentence's read words, tagged O."""
        true, guessed = [], []
        for p, y, k, c in zip(preds.tolist(), labels.tolist(), kept.tolist(), cut.tolist()):
            past = [self.tags[t] for t in c if t != IGNORE]
            true.append([self.tags[t] for t, keep in zip(y, k) if keep] + past)
            guessed.append([self.tags[t] for t, keep in zip(p, k) if keep] + ["O"] * len(past))
        s = self.score(true, guessed)
        return total(**{k: torch.as_tensor(s[k], device=preds.device) for k in _ENTITIES})

    def summarise(self, numbers: dict[str, float]) -> dict[str, float]:
        """``loss`` (per labelled token of the split) and ``acc`` (token accuracy), the
        split's ratios (NaN when it has no labelled token, as the mean of nothing is); entity
        ``precision``, ``recall``, ``f1`` from the split's entity counts."""
        out = super().summarise(numbers)
        if not set(_ENTITIES) <= out.keys():
            return out
        right, predicted, true = (out.pop(k) for k in _ENTITIES)
        p = right / predicted if predicted else 0.0
        r = right / true if true else 0.0
        return {**out, "precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}
