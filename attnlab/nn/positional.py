"""Positional information: sinusoidal, learned and rotary.

Shapes: B batch, T sequence length, D model width (d_model), H heads, hd head width.

Attention is permutation-equivariant, so order must be injected. Vaswani et al. (2017, §3.5):
    PE(pos, 2i)   = sin(pos / 10000^(2i/d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))
For each pair (2i, 2i+1), PE(pos+k) is PE(pos) rotated by the angle k·ω_i, so a fixed linear map
relates positions k apart. Rotary embeddings (Su et al., 2021) apply that same rotation to
queries and keys, so q·k depends only on their relative distance.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = ["PositionalEncoding", "LearnedPositionalEncoding", "RotaryEmbedding", "sinusoidal_table"]


def _check_length(T: int, max_len: int) -> None:
    if T > max_len:
        raise ValueError(
            f"sequence length ({T}) exceeds the positional encoding's max_len ({max_len})"
        )


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """The (max_len, d_model) table of the formula above (d_model may be odd)."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    div_term = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model)
    )  # (ceil(D/2),) = 1 / 10000^(2i/D)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])
    return pe


class PositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal encoding to its input: ``x + pe[:, :T]``.

    Args:
        d_model: width D of the inputs.
        max_len: longest sequence supported.

    Raises:
        ValueError: in ``forward``, if T > max_len.

    Shape:
        x: (B, T, D) -> (B, T, D). The buffer ``pe`` is (1, max_len, D) and not saved in the
        state dict (it is a function of the arguments).

    Example:
        >>> pe = PositionalEncoding(d_model=8, max_len=16)
        >>> pe(torch.zeros(2, 5, 8)).shape
        torch.Size([2, 5, 8])
    """

    def __init__(self, d_model: int, max_len: int = 5000) -> None:
        super().__init__()
        if d_model < 1 or max_len < 1:
            raise ValueError(f"d_model ({d_model}) and max_len ({max_len}) must be positive")
        self.d_model, self.max_len = d_model, max_len
        self.register_buffer("pe", sinusoidal_table(max_len, d_model)[None], persistent=False)

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        T = x.shape[1]
        _check_length(offset + T, self.max_len)
        return x + self.pe[:, offset : offset + T].to(x.dtype)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"


class LearnedPositionalEncoding(nn.Module):
    """Adds a trained embedding of each position (BERT, GPT-2): ``x + E[pos]``.

    Args:
        max_len: number of positions.
        d_model: width D.

    Shape:
        x: (B, T, D) -> (B, T, D); ``positions`` optional (B, T) or (T,) integer positions.

    Example:
        >>> LearnedPositionalEncoding(16, 8)(torch.zeros(2, 5, 8)).shape
        torch.Size([2, 5, 8])
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, x: Tensor, *, offset: int = 0, positions: Tensor | None = None) -> Tensor:
        if positions is None:
            T = x.shape[1]
            _check_length(offset + T, self.max_len)
            positions = torch.arange(offset, offset + T, device=x.device)
        elif positions.numel() and int(positions.max()) >= self.max_len:
            _check_length(int(positions.max()) + 1, self.max_len)
        return x + self.embedding(positions).to(x.dtype)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (RoPE) applied to queries and keys inside attention.

    Each pair of channels (i, i + hd/2) of a head is rotated by the angle pos·θ_i with
    θ_i = base^(-2i/hd), so that q_m·k_n depends on m - n only.

    Args:
        head_dim: per-head width hd (must be even).
        max_len: longest sequence supported.
        base: the frequency base (10000 in the paper).

    Shape:
        x: (B, H, T, hd), positions: (T,) or (B, T) -> (B, H, T, hd).
    """

    def __init__(self, head_dim: int, max_len: int = 4096, base: float = 10000.0) -> None:
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"rotary embeddings need an even head width, got {head_dim}")
        self.max_len = max_len
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        angles = torch.arange(max_len, dtype=torch.float32)[:, None] * inv_freq  # (max_len, hd/2)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        if positions.numel():
            _check_length(int(positions.max()) + 1, self.max_len)
        cos = self.cos[positions].to(x.dtype)  # (T, hd/2) or (B, T, hd/2)
        sin = self.sin[positions].to(x.dtype)
        if cos.ndim == 3:
            cos, sin = cos[:, None], sin[:, None]  # (B, 1, T, hd/2)
        x1, x2 = x.chunk(2, dim=-1)  # (B, H, T, hd/2) each
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
