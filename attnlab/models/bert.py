"""A BERT-family encoder (BERT, RoBERTa, DistilBERT) built from ``attnlab.nn``.

Shapes: B batch, T sequence length, D model width, V vocabulary.

    h_0 = LayerNorm(E_tok[x] + E_pos[pos] + E_type[t]);  h_l = PostLN-Block_l(h_{l-1})
                                                          (Devlin et al., 2019, §3)

    pooled = tanh(W h_L[0] + b)          (the first ([CLS]) position; ``pool``, optional)

It exists so that pretrained encoders converted by ``attnlab.interop.from_hf`` run on attnlab's
own attention and blocks: the blocks are the paper's post-LN ``EncoderBlock`` with GELU and
BERT's LayerNorm epsilon (1e-12), and, as BERT's, no dropout inside the feed-forward network
(``ff_dropout=0``; the course's block drops its hidden layer too). RoBERTa counts positions from ``pad_token_id + 1`` and gives
padding the position ``pad_token_id`` (``position_style="roberta"``).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ..nn import TransformerEncoder
from .configs import POSITION_STYLES, BertEncoderConfig

__all__ = ["BertEncoder", "BertEncoderConfig", "POSITION_STYLES"]


class BertEncoder(nn.Module):
    """Embeddings (token + position + token type, then LayerNorm) and a post-LN encoder stack.

    ``BertEncoder(config)`` builds the model a ``BertEncoderConfig`` describes (``model.config``
    is that object); the keyword form ``BertEncoder(vocab_size, **fields)`` builds the config
    once from its arguments (a name that is no field is a ``TypeError``) and then the same
    model.

    Args:
        vocab_size: number of token ids V.
        model_dim: width D (BERT's hidden_size).
        num_heads: attention heads.
        num_layers: encoder blocks.
        dim_feedforward: feed-forward width (BERT's intermediate_size).
        max_len: number of position embeddings.
        type_vocab_size: number of token types (segments); 0 for none (DistilBERT).
        activation: feed-forward activation ("gelu" is BERT's exact erf GELU).
        layer_norm_eps: LayerNorm epsilon (1e-12 in BERT).
        dropout: dropout on embeddings and sub-layer outputs.
        attention_dropout: dropout on attention weights.
        pad_token_id: the padding id (used by ``position_style="roberta"``).
        position_style: "absolute" (0..T-1) or "roberta" (real tokens count from pad_token_id+1).
        pooler: add BERT's pooler (a D x D linear layer and tanh on the first position), used
            by ``pool``; Hugging Face's ``pooler_output``.

    Raises:
        ValueError: for an unknown position_style.

    Shape:
        input_ids (B, T); attention_mask (B, T) with 1 = real token; token_type_ids (B, T)
        -> last hidden states (B, T, D).

    Examples:
        >>> bert = BertEncoder(100, model_dim=32, num_heads=4, num_layers=2, dim_feedforward=64)
        >>> bert(torch.tensor([[1, 7, 9, 2]])).shape
        torch.Size([1, 4, 32])
    """

    def __init__(self, config: BertEncoderConfig | int | None = None, /, **fields: Any) -> None:
        super().__init__()
        args = () if config is None else (config,)
        config = BertEncoderConfig.of_arguments("BertEncoder", args, fields, ("vocab_size",))
        config.require("BertEncoder", "vocab_size")
        self.config = config
        D, eps = config.model_dim, config.layer_norm_eps
        self.max_len, self.pad_token_id, self.position_style = (config.max_len,
                                                                config.pad_token_id,
                                                                config.position_style)
        self.word_embeddings = nn.Embedding(config.vocab_size, D)
        self.position_embeddings = nn.Embedding(config.max_len, D)
        self.token_type_embeddings = (nn.Embedding(config.type_vocab_size, D)
                                      if config.type_vocab_size else None)
        self.embed_norm = nn.LayerNorm(D, eps=eps)
        self.embed_dropout = nn.Dropout(config.dropout)
        self.encoder = TransformerEncoder(
            config.num_layers, input_dim=D, num_heads=config.num_heads,
            dim_feedforward=config.dim_feedforward, dropout=config.dropout, norm_first=False,
            activation=config.activation, layer_norm_eps=eps,
            attention_dropout=config.attention_dropout, final_norm=False,
            ff_dropout=0.0)  # BERT drops the feed-forward's output only, not inside it
        self.pooler = nn.Linear(D, D) if config.pooler else None

    @classmethod
    def from_config(cls, config: BertEncoderConfig) -> "BertEncoder":
        """The model a ``BertEncoderConfig`` describes (randomly initialised).

        Examples:
            >>> BertEncoder.from_config(BertEncoderConfig(vocab_size=50, model_dim=16, num_heads=2, num_layers=1, dim_feedforward=32)).config.pooler
            False
        """
        return cls(config)

    def positions(self, input_ids: Tensor) -> Tensor:
        """Position ids (B, T) or (T,) for this model's ``position_style``.

        Raises:
            ValueError: if T tokens can need a position past the table. Checked on the shape
                (RoBERTa's positions reach pad_token_id + T for a row without padding), not by
                reading the ids: no host synchronisation in the forward pass.
        """
        T = input_ids.shape[1]
        roberta = self.position_style == "roberta"
        limit = self.max_len - self.pad_token_id - 1 if roberta else self.max_len
        if T > limit:
            raise ValueError(f"sequence length ({T}) exceeds the {limit} tokens this model's "
                             f"{self.max_len} positions hold")
        if roberta:
            real = (input_ids != self.pad_token_id).long()
            return real.cumsum(1) * real + self.pad_token_id  # (B, T): pads stay at pad_token_id
        return torch.arange(T, device=input_ids.device)

    def embed(self, input_ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """LayerNorm(token + position + type embeddings): (B, T) -> (B, T, D)."""
        x = self.word_embeddings(input_ids) + self.position_embeddings(self.positions(input_ids))
        if self.token_type_embeddings is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            x = x + self.token_type_embeddings(token_type_ids)
        elif token_type_ids is not None:
            raise ValueError("this model has no token types (type_vocab_size = 0); "
                             "pass token_type_ids=None")
        return self.embed_dropout(self.embed_norm(x))

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None) -> Tensor:
        """The last layer's hidden states.

        Args:
            input_ids: (B, T) token ids.
            attention_mask: (B, T), 1 for real tokens, 0 for padding (never attended to).
            token_type_ids: (B, T) segment ids (default all 0).

        Returns:
            (B, T, D). Padded positions hold values too (they attend to the real tokens) but
            mean nothing.
        """
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be (B, T), got shape {tuple(input_ids.shape)}")
        mask = None
        if attention_mask is not None:
            if attention_mask.shape != input_ids.shape:
                raise ValueError(f"attention_mask must have the shape of input_ids "
                                 f"{tuple(input_ids.shape)}, got {tuple(attention_mask.shape)}")
            mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T) real keys
        return self.encoder(self.embed(input_ids, token_type_ids), mask)

    def pool(self, hidden_states: Tensor) -> Tensor:
        """BERT's pooled summary of each sequence: tanh(W h[:, 0] + b), (B, T, D) -> (B, D).

        The first position is [CLS] (``<s>`` for RoBERTa); Hugging Face's ``pooler_output``.

        Raises:
            ValueError: if the model was built without ``pooler=True`` (DistilBERT has none).
        """
        if self.pooler is None:
            raise ValueError("this encoder has no pooler (built with pooler=False; DistilBERT "
                             "and models converted without one have none)")
        return torch.tanh(self.pooler(hidden_states[:, 0]))
