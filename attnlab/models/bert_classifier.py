"""A pretrained BERT-family encoder with a new classification head (``BertClassifier``).

Shapes: B batch, T tokens, D model width, C classes.

    h = BertEncoder(input_ids, attention_mask, token_type_ids)         (B, T, D)
    pooled = tanh(W_p h[first real token] + b_p)      pooling="cls"  (BERT's pooler)
           = relu(W_p h[first real token] + b_p)      pooling="cls", pooler_activation="relu"
                                                                     (DistilBERT's head)
           = Σ_t m_t h_t / Σ_t m_t                    pooling="mean" (m the attention mask)
    logits = W_c Dropout(pooled) + b_c                                 (B, C)

With ``pooling="cls"`` this is Hugging Face's ``BertForSequenceClassification`` (pooler, dropout,
classifier) and, with the pooler as the head's dense layer, ``RobertaForSequenceClassification``
(dropout, dense, tanh, dropout, out_proj: the same in eval mode); with ``pooler_activation="relu"``
it is ``DistilBertForSequenceClassification`` (pre_classifier, ReLU, dropout, classifier). Each
reads position 0, which is
the first real token ([CLS], ``<s>``) of a batch padded on the right, as BERT-family tokenisers
pad it; this model reads the first real token, so a batch padded on the left pools the [CLS]
state too (where Hugging Face would pool a pad's). Padded on the right, a batch gives what each
text alone gives. The head starts as Hugging Face starts one: weight ~ N(0, 0.02²), bias 0.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor, nn

from .bert import BertEncoder
from .configs import BertClassifierConfig

__all__ = ["BertClassifier", "BertWithHead", "BertClassifierConfig"]


class BertWithHead(nn.Module):
    """What ``BertClassifier`` and ``BertTagger`` share: a ``BertEncoder`` (``self.bert``),
    dropout, and a linear layer of ``num_classes`` outputs (``self.classifier``) drawn as Hugging
    Face draws a new head (weight ~ N(0, 0.02²), bias 0). They differ only in what that layer
    reads, a pooled vector or every token: their ``forward``.

    Args:
        config: the ``BertClassifierConfig`` (``model.config``).
        pooler: whether the encoder has BERT's pooler (a D x D layer on the first token).
    """

    def __init__(self, config: BertClassifierConfig, *, pooler: bool) -> None:
        super().__init__()
        self.config = config
        self.bert = BertEncoder(dataclasses.replace(config.encoder_config(), pooler=pooler))
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.model_dim, config.num_classes)
        nn.init.normal_(self.classifier.weight, std=0.02)  # transformers' initializer_range
        nn.init.zeros_(self.classifier.bias)

    @classmethod
    def from_config(cls, config: BertClassifierConfig) -> "BertWithHead":
        """The model a ``BertClassifierConfig`` describes (randomly initialised)."""
        return cls(config)

    @torch.no_grad()
    def get_attention_maps(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                           token_type_ids: Tensor | None = None) -> list[Tensor]:
        """Every layer's attention weights: L tensors (B, H, T, T)."""
        mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]
        h = self.bert.embed(input_ids, token_type_ids)  # (B, T, D)
        return self.bert.encoder.get_attention_maps(h, mask)


class BertClassifier(BertWithHead):
    """``BertEncoder`` (``self.bert``) + pooling + dropout + a linear head (``self.classifier``).

    ``BertClassifier(config)`` builds the model a ``BertClassifierConfig`` describes
    (``model.config`` is that object); the keyword form ``BertClassifier(num_classes,
    **fields)`` builds the config once from its arguments (a name that is no field is a
    ``TypeError``) and then the same model.

    Args:
        num_classes: classes C.
        vocab_size, model_dim, num_heads, num_layers, dim_feedforward, type_vocab_size,
            activation, layer_norm_eps, attention_dropout, position_style: the encoder's
            (``BertEncoder``); ``max_positions`` is its ``max_len``, ``pad_id`` its
            ``pad_token_id``.
        dropout: on the embeddings, the sub-layers and the pooled vector.
        pooling: ``"cls"`` (the encoder gets BERT's pooler, a D x D layer and tanh on the first
            real token) or ``"mean"`` (the mean of the real tokens' states; no pooler).
        pooler_activation: ``"tanh"`` (BERT's pooler) or ``"relu"`` (DistilBERT's head).

    Raises:
        ValueError: for an unknown pooling (and what ``BertEncoder`` refuses).

    Shape:
        input_ids (B, T); attention_mask (B, T), 1 = real token (default: all real);
        token_type_ids (B, T) or None -> logits (B, C).

    Examples:
        >>> model = BertClassifier(3, vocab_size=100, model_dim=32, num_heads=4, num_layers=2,
        ...                        dim_feedforward=64)
        >>> model(torch.tensor([[1, 7, 9, 2], [1, 5, 2, 0]]),
        ...       torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])).shape
        torch.Size([2, 3])
    """

    def __init__(self, config: BertClassifierConfig | int | None = None, /,
                 **fields: Any) -> None:
        args = () if config is None else (config,)
        config = BertClassifierConfig.of_arguments("BertClassifier", args, fields,
                                                   ("num_classes",))
        config.require("BertClassifier", "num_classes", "vocab_size")
        super().__init__(config, pooler=config.pooling == "cls")
        self.pooler_activation = torch.tanh if config.pooler_activation == "tanh" else torch.relu

    @classmethod
    def from_encoder(cls, encoder: BertEncoder, num_classes: int, *,
                     dropout: float | None = None) -> "BertClassifier":
        """A classifier on a copy of ``encoder``'s weights (pooled by its pooler where it has
        one, else by the mean) with a new head; ``dropout`` as in
        ``BertClassifierConfig.of_encoder``.

        Examples:
            >>> enc = BertEncoder(50, model_dim=16, num_heads=2, num_layers=1,
            ...                   dim_feedforward=32, pooler=True)
            >>> BertClassifier.from_encoder(enc, 2).config.pooling
            'cls'
        """
        model = cls(BertClassifierConfig.of_encoder(
            encoder.config, num_classes=num_classes, dropout=dropout))
        model.bert.load_state_dict(encoder.state_dict())
        return model

    @property
    def pooler(self) -> nn.Linear | None:
        """BERT's pooler (``pooling="cls"``), part of the head."""
        return self.bert.pooler

    def pool(self, hidden: Tensor, attention_mask: Tensor | None) -> Tensor:
        """(B, T, D) final states -> (B, D), as ``pooling`` says (see the module doc)."""
        if attention_mask is None:
            attention_mask = hidden.new_ones(hidden.shape[:2])
        if self.bert.pooler is not None:
            first = attention_mask.long().argmax(1)  # (B,) the first real token's position
            cls_state = hidden[torch.arange(hidden.shape[0], device=hidden.device), first]
            return self.pooler_activation(self.bert.pooler(cls_state))  # (B, D)
        m = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1)  # (B, D)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None) -> Tensor:
        hidden = self.bert(input_ids, attention_mask, token_type_ids)  # (B, T, D)
        return self.classifier(self.dropout(self.pool(hidden, attention_mask)))  # (B, C)

    @torch.no_grad()
    def predict(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None) -> Tensor:
        """The predicted class of each sequence (B,), in eval mode."""
        was_training = self.training
        self.eval()
        try:
            return self(input_ids, attention_mask, token_type_ids).argmax(-1)
        finally:
            self.train(was_training)
