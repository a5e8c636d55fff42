"""A pretrained BERT-family encoder with a new per-token head (``BertTagger``): token
classification, Hugging Face's ``BertForTokenClassification``.

Shapes: B batch, T subword tokens, D model width, C classes.

    h = BertEncoder(input_ids, attention_mask, token_type_ids)        (B, T, D)
    logits = W_c Dropout(h) + b_c                                     (B, T, C)

The same three parts as Hugging Face's class (``bert``, ``dropout``, ``classifier``), and no
pooler: a checkpoint's pooler is not read. Those parts are ``BertClassifier``'s
(``BertWithHead``); only what the head reads differs. The head starts as Hugging Face starts one:
weight ~ N(0, 0.02²), bias 0. Which subword of a word carries the word's label is the task's
choice, not the model's (``attnlab.tasks.tag``: the first).
"""
from __future__ import annotations

import torch  # noqa: F401  (the example)
from torch import Tensor

from .bert_classifier import BertWithHead
from .configs import BertClassifierConfig

__all__ = ["BertTagger"]


class BertTagger(BertWithHead):
    """``BertEncoder`` (``self.bert``) + dropout + a linear layer per token (``self.classifier``).

    Args:
        config: a ``BertClassifierConfig``: the encoder's fields, ``num_classes`` (C) and
            ``dropout`` (embeddings, sub-layers, and before the head); its pooling fields are
            not read (a tagger pools nothing).

    Shape:
        input_ids (B, T); attention_mask (B, T), 1 = real token (default: all real);
        token_type_ids (B, T) or None -> logits (B, T, C).

    Examples:
        >>> cfg = BertClassifierConfig(num_classes=3, vocab_size=100, model_dim=32, num_heads=4,
        ...                            num_layers=2, dim_feedforward=64)
        >>> BertTagger(cfg)(torch.tensor([[1, 7, 9, 2]])).shape
        torch.Size([1, 4, 3])
    """

    def __init__(self, config: BertClassifierConfig) -> None:
        config.require("BertTagger", "num_classes", "vocab_size")
        super().__init__(config, pooler=False)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None) -> Tensor:
        hidden = self.bert(input_ids, attention_mask, token_type_ids)  # (B, T, D)
        return self.classifier(self.dropout(hidden))  # (B, T, C)
