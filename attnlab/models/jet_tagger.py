"""Jet tagging: a set Transformer over a jet's constituents (top quark against QCD).

Shapes: B jets, N constituents (zero-padded), F = 7 features per constituent, P = 4 pair
features, D model width, H heads, L encoder blocks, C classes (2: QCD = 0, top = 1).

    p4 (B, N, 4) [E, px, py, pz] ─ mask = E > 0 (B, N)
      → constituent_features (B, N, 7): Δη, Δφ, log pT, log E, log pT/pT_jet, log E/E_jet, ΔR
      → fixed shift and scale (ParT's) → embedding MLP 7 → D → D
      → L encoder blocks, padding masked, no positional encoding       [+ pair bias (B, H, N, N)]
      → mean over the real constituents (B, D)   [or a class token through class-attention blocks]
      → MLP → logits (B, C)

The body is the course's set classifier, "embed → MHA → FFN → MHA → FFN → mean pool" (2
post-LN blocks); ``pair_bias=False`` gives exactly that model. A jet has no order: without a positional encoding attention is permutation
equivariant and the pooled output invariant (Zaheer et al., 2017; Lee et al., 2019), and padded
constituents are never attended to or pooled, so neither the order nor the padding of the
constituents changes the logits.

Two parts of the Particle Transformer (Qu, Li & Qian, 2022, "Particle Transformer for jet
tagging", arXiv:2202.03772), the pairwise bias on by default (on generated jets the course's plain
model does not beat the (mass, τ3/τ2) likelihood by the exercise's margin; with it, it does:
docs/jets.md "Numbers"), the class token an option:
- ``class_token``: a learned token that attends to the constituents in ``class_layers`` extra
  blocks (``attnlab.nn.DecoderBlock``: its cross-attention reads the constituents) and is pooled
  instead of the mean. ParT's class-attention blocks also let the token attend to itself among
  the keys; here that is the decoder block's self-attention over the one token.
- ``pair_bias``: ParT's interaction features of every pair (ln kT, ln z, ln ΔR, ln m²),
  through a small per-pair MLP (a 1×1 convolution) to one number per head, added to the
  attention logits of every block: ``softmax(QKᵀ/√d + U)`` (``score_bias`` of
  ``attnlab.nn.TransformerEncoder``). Padded pairs get zero bias and are masked anyway.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ..nn import DecoderBlock, TransformerEncoder
from .classifier import _output_net
from .configs import JetTaggerConfig
from .jet_physics import (NUM_FEATURES, NUM_PAIR_FEATURES, constituent_features,
                          constituent_mask, pair_features)

__all__ = ["JetTagger", "JetTaggerConfig", "PairBias", "scaled_features", "FEATURE_SHIFT",
           "FEATURE_SCALE", "PAIR_SHIFT", "PAIR_SCALE", "PAIR_CLIP"]

# (feature - shift) * scale brings each feature to about unit range for jets of pT ~ 600 GeV in
# GeV units: ParT's preprocessing of the top-tagging features (its data/TopLandscape/top_kin.yaml).
# Order: Δη, Δφ, log pT, log E, log(pT/pT_jet), log(E/E_jet), ΔR.
FEATURE_SHIFT = (0.0, 0.0, 1.7, 2.0, -4.7, -4.7, 0.2)
FEATURE_SCALE = (1.0, 1.0, 0.7, 0.7, 0.7, 0.7, 4.0)
# The same for the pair features ln kT, ln z, ln ΔR, ln m² (about mean 0, spread 1 over the
# pairs of particle-level top and QCD jets, measured on generated jets), then clipped to ±5:
# a particle with itself, or an exactly collinear pair, gives ln ε = -18.4 (``jet_physics``),
# an outlier that would otherwise dominate the first layer (ParT normalises with BatchNorm).
PAIR_SHIFT = (-1.0, -2.0, -1.0, 0.0)
PAIR_SCALE = (0.7, 0.8, 1.0, 0.45)
PAIR_CLIP = 5.0


def _float32_bits(values: tuple[float, ...]) -> Tensor:
    """``values`` in float32, held as their int32 bit patterns (``.view(torch.float32)`` reads
    them back): a buffer that moves with the model to its device, because a tensor made from
    Python numbers in a forward pass is a host-to-device copy, which synchronises, and
    that ``.to(dtype)`` leaves exact (it converts floating-point buffers only)."""
    return torch.tensor(values, dtype=torch.float32).view(torch.int32)


def scaled_features(p4: Tensor, *, shift: Tensor | None = None,
                    scale: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The constituents' 7 features, shifted and scaled (``FEATURE_SHIFT``, ``FEATURE_SCALE``,
    or the same constants as float32 tensors on p4's device: ``shift``, ``scale`` (7,)), zero
    at padding, and the mask: ((B, N, 7) float32, (B, N) bool, True = real constituent).

    Examples:
        >>> x, mask = scaled_features(torch.tensor([[[50.0, 30, 40, 0], [0, 0, 0, 0]]]))
        >>> x.shape, mask.tolist()
        (torch.Size([1, 2, 7]), [[True, False]])
    """
    if p4.ndim != 3 or p4.shape[-1] != 4:
        raise ValueError(f"p4 must be (B, N, 4) [E, px, py, pz], got {tuple(p4.shape)}")
    p4 = p4.float()  # the kinematics in float32 whatever the weights' dtype
    mask = constituent_mask(p4)  # (B, N)
    shift = p4.new_tensor(FEATURE_SHIFT) if shift is None else shift
    scale = p4.new_tensor(FEATURE_SCALE) if scale is None else scale
    x = (constituent_features(p4, mask) - shift) * scale  # (B, N, 7)
    return x * mask.unsqueeze(-1), mask  # padding stays exactly zero


class PairBias(nn.Module):
    """Pair features (B, N, N, P) → a score bias per head (B, H, N, N), zero at padded pairs.

    A per-pair MLP (P → pair_dim → H, ReLU): a 1×1 convolution over the N×N pairs, as ParT's
    "pair embedding" (three layers of 64 there; one hidden layer here, as it runs B·N² times
    per batch on a CPU), after a fixed shift, scale and clip (``PAIR_SHIFT``, ...).

    Examples:
        >>> PairBias(4, 8, 2)(torch.zeros(1, 3, 3, 4), torch.ones(1, 3, dtype=torch.bool)).shape
        torch.Size([1, 2, 3, 3])
    """

    def __init__(self, num_pair_features: int, hidden: int, num_heads: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(num_pair_features, hidden), nn.ReLU(),
                                 nn.Linear(hidden, num_heads))
        self.register_buffer("shift", _float32_bits(PAIR_SHIFT), persistent=False)
        self.register_buffer("scale", _float32_bits(PAIR_SCALE), persistent=False)

    def forward(self, pairs: Tensor, mask: Tensor) -> Tensor:
        shift = self.shift.view(torch.float32).to(pairs.dtype)  # (P,)
        scale = self.scale.view(torch.float32).to(pairs.dtype)
        pairs = ((pairs - shift) * scale).clamp(-PAIR_CLIP, PAIR_CLIP)  # (B, N, N, P)
        both = (mask[:, :, None] & mask[:, None, :]).unsqueeze(1)  # (B, 1, N, N)
        bias = self.net(pairs).permute(0, 3, 1, 2)  # (B, N, N, H) -> (B, H, N, N)
        return bias.masked_fill(~both, 0.0)


class JetTagger(nn.Module):
    """Classify jets from their constituents' four-momenta (top = class 1).

    ``JetTagger(config)`` builds the model a ``JetTaggerConfig`` describes (``model.config`` is
    that object); the keyword form ``JetTagger(num_classes, **fields)`` builds the config once
    from its arguments (a name that is no field is a ``TypeError``) and then the same model.

    Args:
        num_classes: classes C (2: QCD, top).
        model_dim, num_heads, num_layers, dim_feedforward, dropout, norm_first, activation:
            the encoder over the constituents (``attnlab.nn.TransformerEncoder``);
            dim_feedforward defaults to 2·D.
        class_token: pool a learned class token (ParT) instead of the mean of the constituents.
        class_layers: class-attention blocks with ``class_token``.
        pair_bias: add the per-head bias of the pair features to every block's attention
            (default); False: the course's plain set classifier.
        pair_dim: hidden width of the per-pair net.

    Raises:
        ValueError: if model_dim is not divisible by num_heads, or a size is not positive.

    Shape:
        p4: (B, N, 4) float, [E, px, py, pz] per constituent, zero rows for padding (E = 0)
        -> logits (B, C).

    Examples:
        >>> tagger = JetTagger(model_dim=16, num_heads=2)
        >>> tagger(torch.rand(3, 10, 4) + torch.tensor([2.0, 0, 0, 0])).shape
        torch.Size([3, 2])
    """

    def __init__(self, config: JetTaggerConfig | int | None = None, /, **fields: Any) -> None:
        super().__init__()
        args = () if config is None else (config,)
        config = JetTaggerConfig.of_arguments("JetTagger", args, fields, ("num_classes",))
        self.config = config
        D, H, ff, dropout = (config.model_dim, config.num_heads, config.dim_feedforward,
                             config.dropout)
        norm_first, class_token = config.norm_first, config.class_token
        self.embedding = nn.Sequential(nn.Linear(NUM_FEATURES, D), nn.ReLU(), nn.Linear(D, D))
        self.encoder = TransformerEncoder(config.num_layers, input_dim=D, num_heads=H,
                                          dim_feedforward=ff, dropout=dropout,
                                          norm_first=norm_first, activation=config.activation)
        self.pair_net = (PairBias(NUM_PAIR_FEATURES, config.pair_dim, H) if config.pair_bias
                         else None)
        self.class_token = nn.Parameter(torch.randn(1, 1, D) * 0.02) if class_token else None
        self.class_blocks = nn.ModuleList(
            [DecoderBlock(D, H, ff, dropout, norm_first=norm_first, activation=config.activation)
             for _ in range(config.class_layers)] if class_token else [])
        self.class_norm = nn.LayerNorm(D) if class_token and norm_first else nn.Identity()
        self.output_net = _output_net(D, config.num_classes, dropout)
        self.register_buffer("feature_shift", _float32_bits(FEATURE_SHIFT), persistent=False)
        self.register_buffer("feature_scale", _float32_bits(FEATURE_SCALE), persistent=False)

    @classmethod
    def from_config(cls, config: JetTaggerConfig) -> "JetTagger":
        """The tagger ``config`` describes (randomly initialised).

        Examples:
            >>> JetTagger.from_config(JetTaggerConfig(pair_bias=True)).config.dim_feedforward
            128
        """
        return cls(config)

    def _dtype(self) -> torch.dtype:
        return self.embedding[0].weight.dtype

    def _embed(self, p4: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """(constituent states (B, N, D), mask (B, N), pair bias (B, H, N, N) or None)."""
        x, mask = scaled_features(p4, shift=self.feature_shift.view(torch.float32),
                                  scale=self.feature_scale.view(torch.float32))  # (B, N, 7), (B, N)
        bias = None
        if self.pair_net is not None:
            bias = self.pair_net(pair_features(p4.float(), mask).to(self._dtype()), mask)
        return self.embedding(x.to(self._dtype())), mask, bias

    def encode(self, p4: Tensor) -> tuple[Tensor, Tensor]:
        """The pooled jet representation (B, D) and the mask (B, N)."""
        h, mask, bias = self._embed(p4)
        key_mask = mask[:, None, None, :]  # (B, 1, 1, N): padding is never attended to
        h = self.encoder(h, key_mask, score_bias=bias)  # (B, N, D)
        if self.class_token is None:
            m = mask.unsqueeze(-1).to(h.dtype)  # (B, N, 1)
            return (h * m).sum(1) / m.sum(1).clamp(min=1), mask  # (B, D); no constituent -> 0
        c = self.class_token.expand(h.shape[0], -1, -1).to(h.dtype)  # (B, 1, D)
        for block in self.class_blocks:
            c = block(c, h, None, key_mask, is_causal=False)
        return self.class_norm(c[:, 0]), mask  # (B, D)

    def forward(self, p4: Tensor) -> Tensor:
        return self.output_net(self.encode(p4)[0])  # (B, C)

    @torch.no_grad()
    def probabilities(self, p4: Tensor) -> Tensor:
        """P(class) (B, C) in eval mode; column 1 is the top-quark score."""
        was_training = self.training
        self.eval()
        try:
            return self(p4).float().softmax(-1)
        finally:
            self.train(was_training)

    @torch.no_grad()
    def get_attention_maps(self, p4: Tensor) -> list[Tensor]:
        """The constituents' attention in every encoder block: L tensors (B, H, N, N), rows
        of padded queries included (their keys are the real constituents)."""
        h, mask, bias = self._embed(p4)
        return self.encoder.get_attention_maps(h, mask[:, None, None, :], score_bias=bias)

    @torch.no_grad()
    def class_attention_maps(self, p4: Tensor) -> list[Tensor]:
        """With ``class_token``: the class token's attention over the constituents in every
        class-attention block, a list of (B, H, 1, N); else an empty list."""
        from ..nn import capture

        if self.class_token is None:
            return []
        names = [f"class_blocks.{i}.cross_attn" for i in range(len(self.class_blocks))]
        with capture(self, names) as cache:
            self(p4)
        return [cache[name] for name in names]
