"""Positional information: sinusoidal, learned, rotary and ALiBi, and the registry of kinds.

Shapes: B batch, T sequence length, D model width (d_model), H heads, hd head width,
T_q query length, T_k key length.

Three places a position can enter, one interface each:
- added to the inputs: ``forward(x, *, positions=None)``, positions (T,) or (B, T), default
  0..T-1 (``PositionalEncoding``, ``LearnedPositionalEncoding``);
- applied to queries and keys inside attention, passed to it as ``pos_embeddings=``:
  ``forward(x, positions)`` (``RotaryEmbedding``);
- a bias added to the attention scores, passed to attention as ``attn_bias=``:
  ``forward(T_q, T_k)`` -> (H, T_q, T_k), the queries being the last T_q of the T_k positions
  (``ALiBi``).
``POSITIONAL_KINDS`` maps each name ("learned", "rope", ...) to how it is built; models read it.
It is built from the torch-free table ``attnlab.positional_names.POSITIONAL_NAMES``, so a new kind
is a module here plus one line there.

Only lengths are checked here (T against ``max_len``: a shape). The values of given positions are
never read in a forward pass: on an accelerator a read is a host synchronisation, and under
torch.compile it splits the graph. Positions that continue a cache come from
``position_range``, checked as Python integers; ``CausalLM.generate`` checks its prompt plus new
tokens against ``max_len`` before it starts. An explicit position outside the table is an
``IndexError`` on the CPU and a device-side assert on a GPU.

Attention is permutation-equivariant, so order must be injected. Vaswani et al. (2017, §3.5):
    PE(pos, 2i)   = sin(pos / 10000^(2i/d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))
For each pair (2i, 2i+1), PE(pos+k) is PE(pos) rotated by the angle k·ω_i, so a fixed linear map
relates positions k apart. Rotary embeddings (Su et al., 2021) apply that same rotation to
queries and keys, so q·k depends only on their relative distance.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor, nn

from ..positional_names import POSITIONAL_NAMES, ROPE_SCALINGS, positional_names
from .arguments import checked
from .weight_init import init_with, normal_002

__all__ = ["PositionalEncoding", "LearnedPositionalEncoding", "RotaryEmbedding", "ALiBi",
           "PositionalKind", "POSITIONAL_KINDS", "positional_kind", "input_kinds",
           "sinusoidal_table", "check_table", "position_range", "rope_frequencies",
           "ROPE_SCALINGS"]


def _check_length(T: int, max_len: int) -> None:
    if T > max_len:
        raise ValueError(
            f"sequence length ({T}) exceeds the positional encoding's max_len ({max_len})"
        )


def check_table(width_name: str, width: int, max_len: int) -> None:
    """A position table's width (named ``width_name``) and length, checked when it is built:
    a learned or rotary table of width or length 0 was built without a word (and a float
    width failed inside ``torch.zeros``).

    Examples:
        >>> check_table("d_model", 16, 0)
        Traceback (most recent call last):
        ...
        ValueError: max_len must be a positive integer, got 0
    """
    checked(width_name, width)
    checked("max_len", max_len)


def _check_input(x: Tensor, d_model: int) -> None:
    """x is (B, T, d_model): a table of width d_model added to an input of width 1 would
    broadcast to (B, T, d_model) without a word."""
    if x.ndim != 3 or x.shape[-1] != d_model:
        raise ValueError(f"x must be (B, T, d_model={d_model}), got shape {tuple(x.shape)}")


def _positions(T: int, positions: Tensor | None, max_len: int, device: torch.device) -> Tensor:
    """Positions to look up for T inputs: the given (T,) or (B, T) ones, or 0..T-1.

    Only the length is checked (a shape: free). The values of given positions are not read: a
    read is a host synchronisation on an accelerator and splits a compiled graph, so the
    code that makes positions checks them where they enter (``position_range`` for positions
    that follow a cached length; ``CausalLM.generate`` bounds its prompt plus new tokens)."""
    _check_length(T, max_len)
    return torch.arange(T, device=device) if positions is None else positions


def position_range(start: int, T: int, *, max_len: int | None = None,
                   device: torch.device | str | None = None) -> Tensor:
    """Positions start..start+T-1 (T,), e.g. after a cache of ``start`` tokens; checked against
    ``max_len`` (when given) as Python integers, so no tensor is read.

    Raises:
        ValueError: if start + T > max_len, naming both.

    Examples:
        >>> position_range(3, 2, max_len=8)
        tensor([3, 4])
    """
    if max_len is not None:
        _check_length(start + T, max_len)
    return torch.arange(start, start + T, device=device)


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
        ValueError: when built, if d_model or max_len is not a positive integer; in
            ``forward``, if x is not (B, T, d_model) or T > max_len.

    Shape:
        x: (B, T, D), positions (T,) or (B, T) (default 0..T-1) -> (B, T, D). The buffer ``pe``
        is (1, max_len, D) and not saved in the state dict (it is a function of the arguments).

    Examples:
        >>> pe = PositionalEncoding(d_model=8, max_len=16)
        >>> pe(torch.zeros(2, 5, 8)).shape
        torch.Size([2, 5, 8])
    """

    def __init__(self, d_model: int, max_len: int = 5000) -> None:
        super().__init__()
        check_table("d_model", d_model, max_len)
        self.d_model, self.max_len = d_model, max_len
        self.register_buffer("pe", sinusoidal_table(max_len, d_model)[None], persistent=False)

    def reset_parameters(self) -> None:
        """Recompute the table in place (after ``to_empty``, a meta-device build's memory)."""
        with torch.no_grad():
            self.pe.copy_(sinusoidal_table(self.max_len, self.d_model)[None])

    def forward(self, x: Tensor, *, positions: Tensor | None = None) -> Tensor:
        _check_input(x, self.d_model)
        if positions is None:  # the course's x + pe[:, :T], a slice (no gather)
            _check_length(x.shape[1], self.max_len)
            return x + self.pe[:, : x.shape[1]].to(x.dtype)
        positions = _positions(x.shape[1], positions, self.max_len, x.device)
        return x + self.pe[0, positions].to(x.dtype)  # rows (T, D) or (B, T, D)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"


class LearnedPositionalEncoding(nn.Module):
    """Adds a trained embedding of each position (BERT, GPT-2): ``x + E[pos]``.

    Args:
        d_model: width D.
        max_len: number of positions.

    The arguments are in ``PositionalEncoding``'s order, (d_model, max_len)
    (docs/positional_encoding.md).

    Raises:
        ValueError: when built, if d_model or max_len is not a positive integer; in
            ``forward``, if x is not (B, T, d_model) or T > max_len.

    Shape:
        x: (B, T, D) -> (B, T, D); ``positions`` optional (B, T) or (T,) integer positions.

    Examples:
        >>> LearnedPositionalEncoding(d_model=8, max_len=16)(torch.zeros(2, 5, 8)).shape
        torch.Size([2, 5, 8])
    """

    def __init__(self, d_model: int, max_len: int = 5000) -> None:
        super().__init__()
        check_table("d_model", d_model, max_len)
        self.d_model, self.max_len = d_model, max_len  # as in PositionalEncoding
        self.embedding = init_with(nn.Embedding(max_len, d_model), normal_002)

    def forward(self, x: Tensor, *, positions: Tensor | None = None) -> Tensor:
        _check_input(x, self.d_model)
        positions = _positions(x.shape[1], positions, self.max_len, x.device)
        return x + self.embedding(positions).to(x.dtype)  # rows (T, D) or (B, T, D)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"


def rope_frequencies(head_dim: int, base: float = 10000.0, *, scaling: str = "none",
                     factor: float = 1.0, low_freq_factor: float = 1.0,
                     high_freq_factor: float = 4.0, original_max_len: int = 8192) -> Tensor:
    """The rotary angular frequencies ω_i (hd/2,) float32, for scaling kind ``scaling``.

        none:    ω_i = θ^(−2i/hd)                               (θ = ``base``; Su et al., 2021)
        linear:  ω_i / factor  (positions slowed by ``factor``: position interpolation)
        llama3:  with wavelength λ_i = 2π/ω_i, L = ``original_max_len``:
                 λ_i < L / high_freq_factor: ω_i (high frequencies untouched);
                 λ_i > L / low_freq_factor:  ω_i / factor;
                 between: (1 − s)·ω_i/factor + s·ω_i, s = (L/λ_i − low) / (high − low)

    Raises:
        ValueError: for a scaling kind not in ROPE_SCALINGS.

    Examples:
        >>> rope_frequencies(4, 100.0)
        tensor([1.0000, 0.1000])
        >>> rope_frequencies(4, 100.0, scaling="linear", factor=2.0)
        tensor([0.5000, 0.0500])
    """
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim)
    if scaling == "none":
        return inv_freq
    if scaling == "linear":
        return inv_freq / factor
    if scaling != "llama3":
        raise ValueError(f"rope scaling must be one of {', '.join(ROPE_SCALINGS)}, "
                         f"got {scaling!r}")
    wavelength = 2 * math.pi / inv_freq
    ratio = original_max_len / wavelength  # L / λ_i
    smooth = ((ratio - low_freq_factor) / (high_freq_factor - low_freq_factor)).clamp(0, 1)
    # smooth = 0 for λ_i > L/low (all scaled), 1 for λ_i < L/high (untouched)
    return (1 - smooth) * inv_freq / factor + smooth * inv_freq


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (RoPE) applied to queries and keys inside attention.

    Each pair of channels (i, i + hd/2) of a head is rotated by the angle pos·ω_i with
    ω_i = θ^(-2i/hd) (θ = ``base``), so that q_m·k_n depends on m - n only; the pairing is
    Llama's (its ``rotate_half``), so weights from such checkpoints rotate the same channels.

    Args:
        head_dim: per-head width hd (must be even).
        max_len: longest sequence supported.
        base: the frequency base θ (10000 in the paper; Llama 3 uses 500000).
        scaling: how the frequencies are stretched: "none", "linear" or "llama3"
            (``rope_frequencies``, with the factors below).
        factor: how much longer a context the scaling stretches to (Hugging Face's
            ``rope_scaling["factor"]``).
        low_freq_factor: llama3's: wavelengths longer than ``original_max_len /
            low_freq_factor`` are divided by ``factor``.
        high_freq_factor: llama3's: wavelengths shorter than ``original_max_len /
            high_freq_factor`` are kept; those between are blended.
        original_max_len: the context the checkpoint was trained on
            (``original_max_position_embeddings``).

    Raises:
        ValueError: for a head_dim or max_len that is not a positive integer, an odd
            head_dim; in ``forward``, for heads of another width or a sequence longer than
            max_len.

    Shape:
        x: (B, H, T, hd), positions: (T,) or (B, T) -> (B, H, T, hd).

    Examples:
        >>> rope = RotaryEmbedding(head_dim=8, max_len=32)
        >>> rope(torch.randn(1, 2, 5, 8), torch.arange(5)).shape
        torch.Size([1, 2, 5, 8])
    """

    def __init__(self, head_dim: int, max_len: int = 4096, base: float = 10000.0, *,
                 scaling: str = "none", factor: float = 1.0, low_freq_factor: float = 1.0,
                 high_freq_factor: float = 4.0, original_max_len: int = 8192) -> None:
        super().__init__()
        check_table("head_dim", head_dim, max_len)
        if head_dim % 2:
            raise ValueError(f"rotary embeddings need an even head width, got {head_dim}")
        self.head_dim, self.max_len, self.base, self.scaling = head_dim, max_len, base, scaling
        self._scaling_factors = dict(factor=factor, low_freq_factor=low_freq_factor,
                                     high_freq_factor=high_freq_factor,
                                     original_max_len=original_max_len)
        cos, sin = self._tables()
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def _tables(self) -> tuple[Tensor, Tensor]:
        """cos and sin of pos·ω_i, (max_len, hd/2) each, float32."""
        inv_freq = rope_frequencies(self.head_dim, self.base, scaling=self.scaling,
                                    **self._scaling_factors)
        angles = torch.arange(self.max_len, dtype=torch.float32)[:, None] * inv_freq
        return angles.cos(), angles.sin()  # (max_len, hd/2)

    def reset_parameters(self) -> None:
        """Recompute the tables in place (after ``to_empty``, a meta-device build's memory)."""
        if not hasattr(self, "_scaling_factors"):  # pickled whole by a version that did not
            if self.scaling != "none":             # keep them: its tables, pickled with it,
                return                             # are the only record of its factors
            self._scaling_factors = {}
        with torch.no_grad():
            for buffer, table in zip((self.cos, self.sin), self._tables()):
                buffer.copy_(table)

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        if x.shape[-1] != self.head_dim:  # heads 2 wide would broadcast against the table
            raise ValueError(f"a rotary embedding of head_dim {self.head_dim} was given heads "
                             f"of width {x.shape[-1]} (shape {tuple(x.shape)})")
        positions = _positions(x.shape[-2], positions, self.max_len, x.device)
        cos = self.cos[positions].to(x.dtype)  # (T, hd/2)
        sin = self.sin[positions].to(x.dtype)  # or (B, T, hd/2)
        if cos.ndim == 3:
            cos, sin = cos[:, None], sin[:, None]  # (B, 1, T, hd/2)
        x1, x2 = x.chunk(2, dim=-1)  # (B, H, T, hd/2) each
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, base={self.base:g}, scaling={self.scaling}"


class ALiBi(nn.Module):
    """Attention with Linear Biases (Press et al., 2022): head h adds −m_h·|i − j| to the score
    of query position i and key position j, with slopes m_h = 2^(−8h/H), h = 1..H.

    There is no positional term on the inputs; the bias penalises distance, so scores depend on
    i − j only and the model reads sequences longer than it was trained on. The paper's causal
    form −m_h·(i − j) equals −m_h·|i − j| wherever a causal mask lets i see j (j <= i).
    Deviation: for H not a power of two the paper interleaves two geometric sequences; here the
    formula above is used for every H (it equals the paper's for H = 2^k).

    Args:
        num_heads: heads H, one slope each.

    Shape:
        forward(T_q, T_k) -> (H, T_q, T_k) float32 bias; the queries are the last T_q of the T_k
        positions (query i sits at position T_k − T_q + i, as in incremental decoding).

    Examples:
        >>> ALiBi(2)(3, 3)[0]
        tensor([[-0.0000, -0.0625, -0.1250],
                [-0.0625, -0.0000, -0.0625],
                [-0.1250, -0.0625, -0.0000]])
    """

    def __init__(self, num_heads: int) -> None:
        super().__init__()
        if not isinstance(num_heads, int) or num_heads < 1:
            raise ValueError(f"num_heads must be a positive integer, got {num_heads!r}")
        self.register_buffer("slopes", self._slopes(num_heads), persistent=False)  # (H,)

    @staticmethod
    def _slopes(num_heads: int) -> Tensor:
        return 2.0 ** (-8.0 * torch.arange(1, num_heads + 1, dtype=torch.float32) / num_heads)

    def reset_parameters(self) -> None:
        """Recompute the slopes in place (after ``to_empty``, a meta-device build's memory)."""
        with torch.no_grad():
            self.slopes.copy_(self._slopes(self.slopes.numel()))

    def forward(self, T_q: int, T_k: int) -> Tensor:
        i = torch.arange(T_k - T_q, T_k, device=self.slopes.device)[:, None]  # (T_q, 1)
        j = torch.arange(T_k, device=self.slopes.device)[None, :]  # (1, T_k)
        distance = (i - j).abs()  # (T_q, T_k)
        return -self.slopes[:, None, None] * distance  # (H, T_q, T_k)

    def extra_repr(self) -> str:
        return f"num_heads={self.slopes.numel()}"


@dataclass(frozen=True)
class PositionalKind:
    """How one kind of positional information is built, and where it enters.

    Attributes:
        name: the name models, config.yaml and the CLI use.
        help: one line for documentation and ``--help``.
        inputs: ``(d_model, max_len) -> module`` added to the inputs, or None.
        qk: ``(head_dim, max_len) -> module`` applied to queries and keys, or None.
        scores: ``(num_heads, max_len) -> module`` giving an attention-score bias, or None.
    """

    name: str
    help: str
    inputs: Callable[[int, int], nn.Module] | None = None
    qk: Callable[[int, int], nn.Module] | None = None
    scores: Callable[[int, int], nn.Module] | None = None

    def input_module(self, d_model: int, max_len: int) -> nn.Module | None:
        """The module added to the inputs (None when this kind adds nothing there)."""
        return None if self.inputs is None else self.inputs(d_model, max_len)

    def attention_parts(self, num_heads: int, head_dim: int, max_len: int,
                        **qk_options: Any) -> dict:
        """Attention/block arguments: ``pos_embeddings`` and ``attn_bias`` where this kind has
        them (one module, shared by every layer: they hold no parameters). ``qk_options`` are
        keyword options of the query/key module (rotary's ``base``, ``scaling``...)."""
        parts = {}
        if self.qk is not None:
            parts["pos_embeddings"] = self.qk(head_dim, max_len, **qk_options)
        if self.scores is not None:
            parts["attn_bias"] = self.scores(num_heads, max_len)
        return parts


# How each place a kind acts builds its module from the class ``POSITIONAL_NAMES`` names.
_BUILDERS: dict[str, Callable[[type], Callable[[int, int], nn.Module]]] = {
    "inputs": lambda cls: lambda d_model, max_len: cls(d_model, max_len),
    "qk": lambda cls: lambda head_dim, max_len, **options: cls(head_dim, max_len, **options),
    "scores": lambda cls: lambda num_heads, max_len: cls(num_heads),
}


def _kind(name: str, where: str | None, module: str | None, help: str) -> PositionalKind:
    parts = {} if where is None else {where: _BUILDERS[where](globals()[module])}
    return PositionalKind(name, help, **parts)


# The registry: name -> how to build it, from the one table of names (``POSITIONAL_NAMES``,
# torch-free so that configs and the CLI read the choices without torch). A new kind is a module
# above plus one line in that table.
POSITIONAL_KINDS: dict[str, PositionalKind] = {
    name: _kind(name, *entry) for name, entry in POSITIONAL_NAMES.items()}


def positional_kind(name: str, allowed: tuple[str, ...] | None = None) -> PositionalKind:
    """The registered kind ``name``; ``allowed`` narrows the choice for one model.

    Raises:
        ValueError: naming the bad value and the choices.

    Examples:
        >>> positional_kind("rope").qk is not None
        True
    """
    choices = tuple(POSITIONAL_KINDS) if allowed is None else allowed
    if name not in choices or name not in POSITIONAL_KINDS:
        names = list(map(repr, choices))
        expected = (" or ".join(names) if len(names) == 2
                    else f"one of {', '.join(names)}")
        raise ValueError(f"positional must be {expected}, got {name!r}")
    return POSITIONAL_KINDS[name]


def input_kinds(*, with_none: bool = True) -> tuple[str, ...]:
    """The registered kinds that act on the inputs alone (no attention part): what a model
    whose attention takes no positional part can use. Read from the registry.

    Examples:
        >>> input_kinds(with_none=False)
        ('sinusoidal', 'learned')
    """
    return positional_names(inputs_only=True, with_none=with_none)
