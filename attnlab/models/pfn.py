"""The Particle Flow Network: a Deep Sets classifier of particle jets (the jets task's baseline).

Shapes: B jets, N constituents (zero-padded), F features per constituent, L latent width,
C classes.

    PFN(x) = F( Σ_{i real} Φ(x_i) )        (Komiske, Metodiev, Thaler, JHEP 01 (2019) 121;
                                             Zaheer et al., 2017, "Deep Sets")

    x (B, N, F) → Φ: per-constituent MLP F→…→L, ReLU after every layer → (B, N, L)
      → zero at padding, sum over constituents → (B, L)
      → F: MLP L→…, ReLU → Linear → logits (B, C)

A sum is invariant to the order of its terms and ignores zero terms, so the logits do not
depend on the constituents' order or on how much padding follows them (up to float rounding of
the sum). The published PFN uses Φ = (100, 100, 256) and F = (100, 100, 100); the defaults here
are a smaller Φ latent (128) for a CPU. Its reference result: AUC 0.9819, 1/ε_B = 888 at
ε_S = 0.3 on the Top Quark Tagging Reference test set (with particle identification inputs
absent there, as here).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["ParticleFlowNetwork"]


def _mlp(sizes: tuple[int, ...], *, last_activation: bool) -> nn.Sequential:
    """Linear layers between consecutive ``sizes`` with ReLU between (and after the last)."""
    layers: list[nn.Module] = []
    for k, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if last_activation or k < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class ParticleFlowNetwork(nn.Module):
    """Deep Sets over the constituents: Φ per particle, a masked sum, then F to the logits.

    Args:
        num_features: features F per constituent (7: ``attnlab.models.jet_physics``'s
            ``constituent_features``).
        phi_sizes: widths of Φ's layers; the last is the latent width L.
        f_sizes: widths of F's hidden layers.
        num_classes: C (2: QCD, top).

    Raises:
        ValueError: a width or count that is not a positive integer, or empty ``phi_sizes``.

    Shape:
        x: (B, N, F); mask: (B, N) bool, True for a real constituent; output (B, C).

    Examples:
        >>> pfn = ParticleFlowNetwork(num_features=7, phi_sizes=(16, 8), f_sizes=(16,))
        >>> x, mask = torch.randn(3, 5, 7), torch.tensor([[1, 1, 1, 0, 0]] * 3).bool()
        >>> pfn(x, mask).shape
        torch.Size([3, 2])
    """

    def __init__(self, num_features: int = 7, phi_sizes: tuple[int, ...] = (100, 100, 128),
                 f_sizes: tuple[int, ...] = (100, 100), num_classes: int = 2) -> None:
        super().__init__()
        sizes = {"num_features": [num_features], "phi_sizes": list(phi_sizes),
                 "f_sizes": list(f_sizes), "num_classes": [num_classes]}
        for name, values in sizes.items():
            if not all(isinstance(v, int) and v >= 1 for v in values):
                raise ValueError(f"{name} must hold positive integers, got {values!r}")
        if not phi_sizes:
            raise ValueError("phi_sizes must name at least one layer (the latent width)")
        self.num_features, self.num_classes = num_features, num_classes
        self.phi = _mlp((num_features, *phi_sizes), last_activation=True)
        self.f = _mlp((phi_sizes[-1], *f_sizes, num_classes), last_activation=False)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """Logits (B, C) of jets x (B, N, F) whose real constituents are ``mask`` (B, N)."""
        if x.ndim != 3 or x.shape[-1] != self.num_features or mask.shape != x.shape[:2]:
            raise ValueError(f"x must be (B, N, {self.num_features}) and mask (B, N), got "
                             f"{tuple(x.shape)} and {tuple(mask.shape)}")
        latent = self.phi(x)  # (B, N, L)
        # where, not multiply: padding rows may hold anything (inf · 0 would be NaN)
        latent = torch.where(mask[..., None].bool(), latent, torch.zeros((), dtype=latent.dtype))
        return self.f(latent.sum(1))  # (B, L) -> (B, C)
