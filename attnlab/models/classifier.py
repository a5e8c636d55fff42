"""Whole-sequence and set prediction: one label per sequence, or "which element" of a set.

Shapes: B batch, T sequence (set) length, F input features, V vocabulary, D model width,
C classes, H heads, L layers.

    tokens (B, T) ─ Embedding V→D ┐
    features (B, T, F) ─ Linear F→D ┴→ [prepend CLS] → + positional encoding (or none, for sets)
        → TransformerEncoder (L blocks, padding masked)
        → head="sequence": pool (CLS vector, or mean over real elements) → MLP → logits (B, C)
        → head="element":  MLP per element → one score per element (B, T); a softmax over the
                           positions picks the element (set anomaly detection, UvA Tutorial 6)
        → head="token":    MLP per token → logits (B, T, C): a class for every token (token
                           classification, ``attnlab train tag``; the course's per-element
                           prediction over a padded vocabulary input)

Padding: token ids equal to ``pad_id`` (0) are padding; feature inputs take an explicit mask
(B, T) with True = real element. Padded elements are never attended to, never pooled and get
the lowest score from the element head, so a padded batch predicts what each sequence alone does.

Without positional encoding attention is permutation-equivariant (Lee et al., 2019, "Set
Transformer"): permuting the set permutes the element scores and leaves the pooled (CLS or
mean) prediction unchanged — "embed → MHA → FFN → MHA → FFN → mean pool" is the course's set
classifier, the shape of particle-jet and point-cloud models.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ..nn import TransformerEncoder, positional_kind
from ..nn.positional import input_kinds
from .configs import HEADS, POOLINGS, SequenceClassifierConfig
from .tensor_inputs import check_tensor

__all__ = ["SequenceClassifier", "SequenceClassifierConfig", "POOLINGS", "POSITIONALS", "HEADS"]

POSITIONALS = input_kinds()  # the registry's kinds that act on the inputs, and "none"


def _check_inputs_and_head(config: SequenceClassifierConfig) -> None:
    """The rules between fields (each field's range the config checks itself): one kind of
    input, and classes for the sequence head only."""
    vocab_size, input_dim, num_classes = config.vocab_size, config.input_dim, config.num_classes
    if (vocab_size is None) == (input_dim is None):
        raise ValueError(f"give exactly one of vocab_size (token inputs) and input_dim "
                         f"(feature inputs), got vocab_size={vocab_size}, input_dim={input_dim}")
    if config.head in ("sequence", "token") and num_classes is None:
        raise ValueError(f"num_classes must be a positive integer for head={config.head!r}, "
                         f"got {num_classes!r}")
    if config.head == "element" and num_classes is not None:
        raise ValueError(f"head='element' scores each element (one output each); "
                         f"num_classes must be None, got {num_classes!r}")


def _output_net(model_dim: int, out_dim: int, dropout: float) -> nn.Sequential:
    """The course's output MLP: Linear → LayerNorm → ReLU → Dropout → Linear."""
    return nn.Sequential(nn.Linear(model_dim, model_dim), nn.LayerNorm(model_dim), nn.ReLU(),
                         nn.Dropout(dropout), nn.Linear(model_dim, out_dim))


class SequenceClassifier(nn.Module):
    """Transformer encoder with a per-sequence or per-element classification head.

    ``SequenceClassifier(config)`` builds the model a ``SequenceClassifierConfig`` describes
    (``model.config`` is that object); the keyword form ``SequenceClassifier(num_classes,
    **fields)`` builds the config once from its arguments (a name that is no field is a
    ``TypeError``) and then the same model.

    Args:
        num_classes: classes C of the per-sequence head; must be None for ``head="element"``.
        vocab_size: token inputs: size V of the vocabulary (ids in [0, V), ``pad_id`` = padding).
        input_dim: feature inputs: features F per element. Give exactly one of the two.
        model_dim, num_heads, num_layers, dim_feedforward, dropout, norm_first, activation:
            the encoder (``attnlab.nn.TransformerEncoder``); dim_feedforward defaults to 2·D.
        input_dropout: dropout on the input features (before the input projection).
        pooling: ``"cls"`` (a learned [CLS] vector prepended; its final state is pooled, as in
            BERT) or ``"mean"`` (the mean over real elements). Unused by the element head.
        positional: a kind of ``attnlab.nn.POSITIONAL_KINDS`` acting on the inputs:
            ``"sinusoidal"``, ``"learned"`` or ``"none"`` (sets: order carries nothing).
        head: ``"sequence"`` (logits (B, C)), ``"element"`` (a score per element (B, T)) or
            ``"token"`` (logits per token (B, T, C)).
        max_len: longest sequence (positional encodings), [CLS] not counted.
        pad_id: the padding id of token inputs.

    Raises:
        ValueError: on a bad choice, both/neither of vocab_size and input_dim, or num_classes
            missing for the sequence head / given for the element head.

    Shape:
        x: (B, T) int64 token ids or (B, T, F) features; mask: optional (B, T), True = real
        (default: ``x != pad_id`` for tokens, all real for features)
        -> (B, C) for head="sequence", (B, T) for head="element" (padding at the dtype's min),
        (B, T, C) for head="token".

    Examples:
        >>> model = SequenceClassifier(3, vocab_size=100, model_dim=32, num_heads=4)
        >>> model(torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0]])).shape
        torch.Size([2, 3])
    """

    def __init__(self, config: SequenceClassifierConfig | int | None = None, /,
                 **fields: Any) -> None:
        super().__init__()
        args = () if config is None else (config,)
        config = SequenceClassifierConfig.of_arguments("SequenceClassifier", args, fields,
                                                       ("num_classes",))
        _check_inputs_and_head(config)
        self.config = config
        D, head = config.model_dim, config.head
        self.num_classes, self.vocab_size, self.input_dim = (config.num_classes,
                                                             config.vocab_size, config.input_dim)
        self.pooling, self.positional, self.head, self.pad_id = (config.pooling,
                                                                 config.positional, head,
                                                                 config.pad_id)
        self.use_cls = head == "sequence" and config.pooling == "cls"
        if config.vocab_size is not None:
            # N(0, 1) entries, the scale of the sinusoidal encoding; no √D factor, which the
            # paper needs only because its embedding shares weights with the output layer.
            self.embedding = nn.Embedding(config.vocab_size, D, padding_idx=config.pad_id)
        else:
            self.embedding = nn.Sequential(nn.Dropout(config.input_dropout),
                                           nn.Linear(config.input_dim, D))
        if self.use_cls:
            self.cls = nn.Parameter(torch.randn(1, 1, D) * 0.02)
        positions = config.max_len + int(self.use_cls)
        kind = positional_kind(config.positional, POSITIONALS)
        self.positional_encoding = kind.input_module(D, positions) or nn.Identity()
        self.encoder = TransformerEncoder(
            config.num_layers, input_dim=D, num_heads=config.num_heads,
            dim_feedforward=config.dim_feedforward, dropout=config.dropout,
            norm_first=config.norm_first, activation=config.activation)
        self.output_net = _output_net(D, 1 if head == "element" else config.num_classes,
                                      config.dropout)

    @classmethod
    def from_config(cls, config: SequenceClassifierConfig) -> "SequenceClassifier":
        """The model a ``SequenceClassifierConfig`` describes (randomly initialised).

        Examples:
            >>> SequenceClassifier.from_config(SequenceClassifierConfig(3, vocab_size=100)).config.dim_feedforward
            128
        """
        return cls(config)

    def _embed(self, x: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
        """Inputs -> (encoder inputs (B, T', D), real-element mask (B, T')); T' = T (+1 for CLS).
        Checks the inputs' type, shape and dtype only (no value read: no host sync)."""
        tokens = self.vocab_size is not None
        check_tensor(x, "(B, T) of token ids" if tokens else
                     f"(B, T, {self.input_dim}) of float features")
        if mask is not None:
            check_tensor(mask, "(B, T) of booleans, True = real element", name="mask")
        if tokens:
            if x.ndim != 2 or x.is_floating_point():
                raise ValueError(f"token inputs must be integer ids (B, T), got {x.dtype} "
                                 f"{tuple(x.shape)}")
            if mask is None:
                mask = x != self.pad_id
        elif x.ndim != 3 or x.shape[-1] != self.input_dim:
            raise ValueError(f"feature inputs must be (B, T, {self.input_dim}), got {tuple(x.shape)}")
        elif not x.is_floating_point():  # nn.Linear's "mat1 and mat2 must have the same dtype"
            raise ValueError(f"feature inputs must be floating point (B, T, {self.input_dim}), "
                             f"got {x.dtype}: pass x.float()")
        if mask is None:
            mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
        mask = mask.bool()
        if mask.shape != x.shape[:2]:
            raise ValueError(f"mask must be (B, T) = {tuple(x.shape[:2])}, got {tuple(mask.shape)}")
        if x.is_floating_point():  # features in the weights' dtype (--precision 64, bf16-true)
            x = x.to(self.embedding[-1].weight.dtype)
        h = self.embedding(x)  # (B, T, D)
        if self.use_cls:
            h = torch.cat([self.cls.expand(h.shape[0], -1, -1).to(h.dtype), h], dim=1)  # (B, 1+T, D)
            mask = torch.cat([mask.new_ones(mask.shape[0], 1), mask], dim=1)  # (B, 1+T)
        return self.positional_encoding(h), mask

    def encode(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Final encoder states (B, T', D) and the real-element mask (B, T') (CLS first if used)."""
        h, mask = self._embed(x, mask)
        return self.encoder(h, mask[:, None, None, :]), mask  # key padding mask (B, 1, 1, T')

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        h, mask = self.encode(x, mask)
        if self.head == "element":
            scores = self.output_net(h).squeeze(-1)  # (B, T)
            return scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        if self.head == "token":  # padding's logits are computed and never read (the loss
            return self.output_net(h)  # and the predictions skip them): (B, T, C)
        if self.use_cls:
            pooled = h[:, 0]  # (B, D)
        else:
            m = mask.unsqueeze(-1).to(h.dtype)  # (B, T, 1)
            pooled = (h * m).sum(1) / m.sum(1).clamp(min=1)  # (B, D); an all-padding row -> 0
        return self.output_net(pooled)  # (B, C)

    @torch.no_grad()
    def get_attention_maps(self, x: Tensor, mask: Tensor | None = None) -> list[Tensor]:
        """Every layer's attention weights: L tensors (B, H, T', T') (CLS at position 0 if used)."""
        h, mask = self._embed(x, mask)
        return self.encoder.get_attention_maps(h, mask[:, None, None, :])

    @torch.no_grad()
    def predict(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """The predicted class (B,) — for the element head the chosen element (B,), for the
        token head each token's class (B, T)."""
        was_training = self.training
        self.eval()
        try:
            return self(x, mask).argmax(-1)
        finally:
            self.train(was_training)
