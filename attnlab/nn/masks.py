"""Attention masks: one convention everywhere.

A mask is boolean (or 0/1 integer) and broadcastable to (B, H, T_q, T_k); **True means "may
attend"**, as in ``torch.nn.functional.scaled_dot_product_attention`` and the course code
(``mask == 0`` is blocked). ``torch.nn``'s ``key_padding_mask``/``attn_mask`` mean the opposite;
convert only at that boundary.

Shapes: B batch, H heads, T_q query length, T_k key length, T sequence length.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence

import torch
from torch import Tensor

from .tensor_inputs import check_tensor

__all__ = [
    "expand_mask",
    "causal_mask",
    "padding_mask",
    "window_mask",
    "as_bool_mask",
    "attention_mask_as_bool",
    "check_mask",
]


def expand_mask(mask: Tensor) -> Tensor:
    """Bring a mask to 4 dimensions (B, H, T_q, T_k), as the course's helper does.

    2-D (T, T) -> (1, 1, T, T); 3-D (B, T, T) -> (B, 1, T, T); 4-D is returned unchanged.

    Raises:
        ValueError: if the mask has fewer than 2 dimensions.

    Examples:
        >>> expand_mask(causal_mask(3)).shape
        torch.Size([1, 1, 3, 3])
    """
    check_tensor(mask, _MASK, name="mask")
    if mask.ndim < 2:
        raise ValueError(
            f"mask must have at least 2 dimensions (T_q, T_k), got shape {tuple(mask.shape)}"
        )
    if mask.ndim == 3:
        mask = mask.unsqueeze(1)  # (B, 1, T_q, T_k)
    while mask.ndim < 4:
        mask = mask.unsqueeze(0)
    return mask


def _length(T: int) -> int:
    """A mask's length T as a Python int (a 0-d integer tensor too): ``causal_mask(3.0)``
    failed inside ``torch.ones`` ("takes 1 positional argument but 2 were given")."""
    try:
        length = None if isinstance(T, bool) else operator.index(T)
    except TypeError:
        length = None
    if length is None or length < 1:
        raise ValueError(f"T must be a positive length, got {T!r}")
    return length


def causal_mask(T: int, *, device: torch.device | str | None = None) -> Tensor:
    """Lower-triangular (T, T) bool mask: query i may attend to keys j <= i.

    Examples:
        >>> causal_mask(3).int().tolist()
        [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    """
    T = _length(T)
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def window_mask(T: int, radius: int, *, device: torch.device | str | None = None) -> Tensor:
    """Restricted self-attention: (T, T) bool mask with query i seeing keys |i - j| <= radius.

    The course's complexity table lists it: O(r·n·d) work instead of O(n²·d).

    Examples:
        >>> window_mask(4, 1).int().tolist()[0]
        [1, 1, 0, 0]
    """
    T = _length(T)
    if radius < 0:
        raise ValueError(f"radius must be >= 0, got {radius}")
    idx = torch.arange(T, device=device)
    return (idx[:, None] - idx[None, :]).abs() <= radius


def padding_mask(
    lengths_or_ids: Tensor | Sequence[int],
    max_len: int | None = None,
    *,
    pad_id: int | None = None,
) -> Tensor:
    """Key-padding mask (B, 1, 1, T): True at real tokens, False at padding.

    Args:
        lengths_or_ids: either the lengths (B,) of each sequence (a tensor or a list of whole
            numbers), or token ids (B, T) when ``pad_id`` is given.
        max_len: padded length T when lengths are given (default: the longest length).
        pad_id: the padding token id; when given, ``lengths_or_ids`` holds token ids.

    Returns:
        A bool tensor (B, 1, 1, T) that broadcasts over heads and queries.

    Raises:
        ValueError: for lengths that are not (B,), negative, fractional or over ``max_len``,
            or ids that are not (B, T).

    Examples:
        >>> padding_mask(torch.tensor([2, 3])).int()[:, 0, 0].tolist()
        [[1, 1, 0], [1, 1, 1]]
        >>> padding_mask([2, 3], 4).int()[:, 0, 0].tolist()
        [[1, 1, 0, 0], [1, 1, 1, 0]]
    """
    lengths_or_ids = torch.as_tensor(lengths_or_ids)  # a list of lengths, as one writes them
    if pad_id is not None:
        if lengths_or_ids.ndim != 2:
            raise ValueError(
                f"token ids must be (B, T), got shape {tuple(lengths_or_ids.shape)}"
            )
        return (lengths_or_ids != pad_id)[:, None, None, :]  # (B, 1, 1, T)
    lengths = lengths_or_ids
    if lengths.ndim != 1:
        raise ValueError(f"lengths must be (B,), got shape {tuple(lengths.shape)}")
    if (lengths < 0).any():
        raise ValueError(f"lengths must be >= 0, got {lengths.tolist()}")
    if lengths.is_floating_point() and not torch.equal(lengths, lengths.trunc()):
        # 2.5 would keep 3 positions (pos < 2.5), a length nobody gave
        raise ValueError(f"lengths must be whole numbers, got {lengths.tolist()}")
    T = int(lengths.max()) if max_len is None else max_len
    if lengths.numel() and int(lengths.max()) > T:
        raise ValueError(f"a length ({int(lengths.max())}) exceeds max_len ({T})")
    pos = torch.arange(T, device=lengths.device)
    return (pos[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T)


def as_bool_mask(mask: Tensor, *, attention: bool = False) -> Tensor:
    """Bool view of a bool or 0/1 mask (nonzero means "may attend").

    Raises:
        ValueError: for a floating-point mask holding anything but 0 and 1, such as the
            additive masks of ``F.scaled_dot_product_attention`` (0 = attend, -inf = blocked),
            which would otherwise be read backwards; with ``attention``, for a float mask of
            only 0s too (``_ALL_BLOCKED``; a graph's adjacency with no edge is a graph).

    Examples:
        >>> as_bool_mask(torch.tensor([1.0, 0.0]))
        tensor([ True, False])
        >>> as_bool_mask(torch.tensor([0.0, float("-inf")]))
        Traceback (most recent call last):
        ...
        ValueError: a float mask must hold only 0 and 1 (1 = may attend), got -inf; an additive mask (0 = attend, -inf = blocked, as torch's attn_mask) is `mask == 0` in attnlab's convention
    """
    check_tensor(mask, _MASK, name="mask")  # a list or a NumPy array: AttributeError below
    if mask.dtype == torch.bool:
        return mask
    if mask.is_floating_point():
        _check_float_mask(mask, attention=attention)
    return mask != 0


# what every mask is, in check_tensor's message
_MASK = "(bool or 0/1, True = may attend)"

_FLOAT_MASK = ("a float mask must hold only 0 and 1 (1 = may attend), got {}; an additive mask "
               "(0 = attend, -inf = blocked, as torch's attn_mask) is `mask == 0` in attnlab's "
               "convention")

# torch's additive attn_mask of zeros means "attend everywhere"; read in attnlab's convention it
# blocked every key and made every output 0 without a word
_ALL_BLOCKED = ("a float mask of only 0s blocks every key (1 = may attend), so every output "
                "would be 0; torch's additive mask of zeros, which blocks nothing, is mask=None "
                "in attnlab")


def _check_float_mask(mask: Tensor, *, attention: bool) -> None:
    """Refuse a float mask holding anything but 0 and 1, and with ``attention`` one of only 0s,
    in ONE read of its values when it is good (a host synchronisation on a GPU; a bad mask's
    message reads it again). Eager: a ``ValueError`` showing a bad value. Compiled: the same
    checks inside the graph (``torch._assert_async``: a ``RuntimeError`` on the CPU, a
    device-side assert on a GPU), since reading the values there split the graph six ways per
    block and synchronised with the host."""
    only_01 = ((mask == 0) | (mask == 1)).all()
    some = mask.any() if attention and mask.numel() else None  # an empty mask blocks nothing
    if torch.compiler.is_compiling():
        torch._assert_async(only_01, _FLOAT_MASK.format("another value"))
        if some is not None:
            torch._assert_async(some, _ALL_BLOCKED)
        return
    if bool(only_01 if some is None else only_01 & some):  # the one read
        return
    if not bool(only_01):
        odd = mask[(mask != 0) & (mask != 1)]
        raise ValueError(_FLOAT_MASK.format(f"{float(odd.flatten()[0]):g}"))
    raise ValueError(_ALL_BLOCKED)


def attention_mask_as_bool(mask: Tensor) -> Tensor:
    """``as_bool_mask`` for attention: a float mask of only 0s is refused too; a graph's
    adjacency, where it is a graph with no edge, is read by ``as_bool_mask`` alone."""
    return as_bool_mask(mask, attention=True)


def broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether a tensor of ``shape`` broadcasts to ``target`` without growing it (a mask that
    would broadcast the scores to more dimensions or a larger size does not).

    Examples:
        >>> broadcasts_to((2, 1, 1, 3), (2, 4, 5, 3)), broadcasts_to((2, 1, 1, 3), (2, 3, 3))
        (True, False)
    """
    try:
        return tuple(torch.broadcast_shapes(shape, target)) == tuple(target)
    except RuntimeError:
        return False


def broadcasts_together(*shapes: tuple[int, ...]) -> bool:
    """Whether tensors of these shapes broadcast against one another.

    Examples:
        >>> broadcasts_together((2, 3), (1, 3), (3,)), broadcasts_together((2,), (3,))
        (True, False)
    """
    try:
        torch.broadcast_shapes(*shapes)
    except RuntimeError:
        return False
    return True


def check_mask(mask: Tensor, B: int, H: int, T_q: int, T_k: int) -> Tensor:
    """Validate a mask against (B, H, T_q, T_k) and return it as a 4-D bool tensor.

    Raises:
        ValueError: if the mask does not broadcast to (B, H, T_q, T_k), showing the shape given;
            for a float mask holding other values than 0 and 1 (``as_bool_mask``) or only 0s.
    """
    check_tensor(mask, _MASK, name="mask")
    if mask.ndim < 2 or mask.ndim > 4:
        raise ValueError(
            f"mask must have 2 to 4 dimensions broadcastable to (B, H, T_q, T_k) = "
            f"{(B, H, T_q, T_k)}, got shape {tuple(mask.shape)}"
        )
    given = tuple(mask.shape)
    mask = expand_mask(attention_mask_as_bool(mask))
    if not broadcasts_to(mask.shape, (B, H, T_q, T_k)):
        # the shape the caller made, and how it was read: a (B, T_k) key-padding mask (torch's
        # key_padding_mask) is read as (T_q, T_k)
        raise ValueError(
            f"mask of shape {given} does not broadcast to (B, H, T_q, T_k) = "
            f"{(B, H, T_q, T_k)}: a 2-D mask is (T_q, T_k) and a 3-D one (B, T_q, T_k); a "
            f"key-padding mask (B, T_k) goes in as mask[:, None, :]"
        )
    return mask
