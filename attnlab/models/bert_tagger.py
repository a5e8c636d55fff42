"""A pretrained BERT-family encoder with a new per-token head (``BertTagger``): token
classification, Hugging Face's ``BertForTokenClassification``.

Shapes: B batch, T subword tokens, D model width, C classes.

    h = BertEncoder(input_ids, attention_mask, token_type_ids)        (B, T, D)
    logits = W_c Dropout(h) + b_c                                     (B, T, C)

The same three parts as Hugging Face's class (``bert``, ``dropout``, ``classifier``), and no
pooler: a checkpoint's pooler is not read. The head starts as Hugging Face starts one:
weight ~ N(0, 0.02²), bias 0. Which subword of a word carries the word's label is the task's
choice, not the model's (``attnlab.tasks.tag``: the first).
"""
from __future__ import annotations

import dataclasses

import torch
from torch import Tensor, nn

from .bert import BertEncoder
from .configs import BertClassifierConfig

__all__ = ["BertTagger"]


class BertTagger(nn.Module):
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
        super().__init__()
        config.require("BertTagger", "num_classes", "vocab_size")
        self.config = config
        self.bert = BertEncoder(dataclasses.replace(config.encoder_config(), pooler=False))
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.model_dim, config.num_classes)
        nn.init.normal_(self.classifier.weight, std=0.02)  # transformers' initializer_range
        nn.init.zeros_(self.classifier.bias)

    @classmethod
    def from_config(cls, config: BertClassifierConfig) -> "BertTagger":
        """The model ``config`` describes (randomly initialised)."""
        return cls(config)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None) -> Tensor:
        hidden = self.bert(input_ids, attention_mask, token_type_ids)  # (B, T, D)
        return self.classifier(self.dropout(hidden))  # (B, T, C)

    @torch.no_grad()
    def get_attention_maps(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                           token_type_ids: Tensor | None = None) -> list[Tensor]:
        """Every layer's attention weights: L tensors (B, H, T, T)."""
        mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]
        h = self.bert.embed(input_ids, token_type_ids)  # (B, T, D)
        return self.bert.encoder.get_attention_maps(h, mask)
