"""Position-wise feed-forward network.

Shapes: B batch, T length, D model width, F = dim_feedforward.

    FFN(x) = Linear_2(act(Linear_1(x)))            (Vaswani et al., 2017, eq. 2)

Laid out as the course's ``linear_net``: Linear → Dropout → activation → Linear, an
``nn.Sequential`` so its state-dict keys (``0.weight``, ``3.weight``) match the course's
checkpoints. With ReLU, dropout before or after the activation is the same function.
It has 2·D·F weights and F + D biases.

The gated variant (Shazeer, 2020), Llama's and Qwen's feed-forward network:

    GatedFFN(x) = W_down (act(W_gate x) ⊙ W_up x)     (SwiGLU: act = SiLU; GeGLU: act = GELU)

It has 3·D·F weights: the gate decides, per hidden unit, how much of the up-projection passes.
"""
from __future__ import annotations

from torch import Tensor, nn

from ..activation_names import ACTIVATIONS, GATED  # torch-free: configs offer them as choices
from .arguments import checked
from .quantize import linear

__all__ = ["FeedForward", "GatedFeedForward", "make_activation", "ACTIVATIONS", "GATED"]


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


class GatedFeedForward(nn.Module):
    """The gated feed-forward network: ``down(act(gate(x)) * up(x))``, D → F → D.

    The parameter names are Llama's (``gate_proj``, ``up_proj``, ``down_proj``), so its weights
    copy one to one. ``GatedFeedForward(D, F, activation="silu")`` is SwiGLU,
    ``activation="gelu"`` GeGLU.

    Args:
        input_dim: model width D.
        dim_feedforward: hidden width F.
        dropout: dropout on the gated hidden units, before ``down_proj``.
        activation: the gate's activation, one of ACTIVATIONS (default "silu": SwiGLU).
        bias: whether the three linear layers have biases (Llama's have none).

    Shape:
        (B, T, D) -> (B, T, D).

    Examples:
        >>> ffn = GatedFeedForward(16, 48)
        >>> ffn(torch.randn(2, 5, 16)).shape
        torch.Size([2, 5, 16])
    """

    def __init__(self, input_dim: int, dim_feedforward: int, dropout: float = 0.0, *,
                 activation: str = "silu", bias: bool = False) -> None:
        super().__init__()
        checked("input_dim", input_dim)
        checked("dim_feedforward", dim_feedforward)
        checked("dropout", dropout)
        self.gate_proj = nn.Linear(input_dim, dim_feedforward, bias=bias)
        self.up_proj = nn.Linear(input_dim, dim_feedforward, bias=bias)
        self.down_proj = nn.Linear(dim_feedforward, input_dim, bias=bias)
        self.act = make_activation(activation)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        hidden = self.act(self.gate_proj(x)) * self.up_proj(x)  # (B, T, F)
        return self.down_proj(self.dropout(hidden))

    def step(self, x: Tensor) -> Tensor:
        """``forward`` on generation's per-token fast path (functional calls, no dropout)."""
        if self.training:
            return self(x)
        m = self._modules
        hidden = m["act"].forward(linear(m["gate_proj"], x)) * linear(m["up_proj"], x)
        return linear(m["down_proj"], hidden)
