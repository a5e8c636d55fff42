"""Position-wise feed-forward network.

Shapes: B batch, T length, D model width, F = dim_feedforward.

    FFN(x) = Linear_2(act(Linear_1(x)))            (Vaswani et al., 2017, eq. 2)

Laid out as the course's ``linear_net``: Linear → Dropout → activation → Linear, an
``nn.Sequential`` so its state-dict keys (``0.weight``, ``3.weight``) match the course's
checkpoints. With ReLU, dropout before or after the activation is the same function.
It has 2·D·F weights and F + D biases.
"""
from __future__ import annotations

from torch import Tensor, nn

from ..activation_names import ACTIVATIONS  # torch-free: configs offer them as choices
from .arguments import checked
from .quantize import linear

__all__ = ["FeedForward", "make_activation", "ACTIVATIONS"]


def make_activation(name: str) -> nn.Module:
    """The activation module for ``name`` (one of ACTIVATIONS)."""
    if name == "relu":
        return nn.ReLU()
    if name == "gelu":
        return nn.GELU()
    if name == "gelu_tanh":  # GPT-2's "gelu_new"
        return nn.GELU(approximate="tanh")
    if name == "silu":
        return nn.SiLU()
    raise ValueError(f"activation must be one of {ACTIVATIONS}, got {name!r}")


class FeedForward(nn.Sequential):
    """Two linear layers with an activation between: D → F → D.

    Args:
        input_dim: model width D.
        dim_feedforward: hidden width F.
        dropout: dropout after the first linear layer.
        activation: one of "relu", "gelu", "gelu_tanh", "silu".
        bias: whether the linear layers have biases.

    Shape:
        (B, T, D) -> (B, T, D).

    Examples:
        >>> ffn = FeedForward(16, 64)
        >>> ffn(torch.randn(2, 5, 16)).shape
        torch.Size([2, 5, 16])
    """

    def __init__(self, input_dim: int, dim_feedforward: int, dropout: float = 0.0, *,
                 activation: str = "relu", bias: bool = True) -> None:
        checked("input_dim", input_dim)
        checked("dim_feedforward", dim_feedforward)
        checked("dropout", dropout)
        super().__init__(
            nn.Linear(input_dim, dim_feedforward, bias=bias),
            nn.Dropout(dropout),
            make_activation(activation),
            nn.Linear(dim_feedforward, input_dim, bias=bias),
        )

    def step(self, x: Tensor) -> Tensor:
        """The same function as ``forward`` as two functional calls, for generation's per-token
        step where module calls cost more than the arithmetic (dropout only acts in training)."""
        if self.training:
            return self(x)
        m = self._modules  # dict lookups, not nn.Module.__getattr__ (Python overhead per token)
        h = linear(m["0"], x)  # (B, 1, F)
        return linear(m["3"], m["2"].forward(h))
