"""The step protocol every generating model speaks, and the argument checks every decoding
loop shares (``attnlab.generation``'s greedy/sampled loops and ``attnlab.beam``).

Shapes: B batch, T tokens so far, V vocabulary.

Kept apart from both loops so that ``generation`` can re-export ``beam_search`` without the two
modules importing each other (``tests/test_imports.py`` refuses import cycles).
"""
from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

from .settings import GenerationSettings, check_argument

__all__ = ["StepFunction", "check_positive_int", "check_prompt", "check_token_ids", "suppress"]


class StepFunction(Protocol):
    """``step(tokens (B, T)) -> logits (B, V)`` of the next token; optional ``reorder(index)``."""

    def __call__(self, tokens: Tensor) -> Tensor: ...


def check_positive_int(name: str, value) -> None:
    """ValueError naming ``name`` unless ``value`` is an int >= 1 (a bool is not)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def check_prompt(input_ids: Tensor, max_new_tokens: int) -> None:
    """ValueError unless ``input_ids`` is (B, T) with T >= 1 and ``max_new_tokens`` >= 1."""
    if input_ids.ndim != 2 or input_ids.shape[1] < 1:
        raise ValueError(f"input_ids must be (B, T) with T >= 1, got shape "
                         f"{tuple(input_ids.shape)}")
    check_argument(GenerationSettings, "max_new_tokens", max_new_tokens)


def check_token_ids(ids: Tensor, vocab_size: int, name: str = "input_ids") -> None:
    """ValueError unless every id of ``ids`` is in 0..vocab_size-1.

    Where ids enter generation (``generate``'s arguments), once per call: one host read. The
    models' forward passes read no values (no host synchronisation), and there an id outside
    the embedding is an ``IndexError`` on the CPU and a device-side assert on a GPU.
    """
    if not ids.numel() or ids.is_floating_point():
        return
    low, high = torch.stack(torch.aminmax(ids)).tolist()  # one read for both
    if low < 0 or high >= vocab_size:
        raise ValueError(f"{name} must be token ids in 0..{vocab_size - 1}, got values "
                         f"{low}..{high}")


def suppress(scores: Tensor, token_ids: tuple[int, ...]) -> Tensor:
    """``scores`` (B, V) with the tokens ``token_ids`` set to -inf, so that no loop picks them
    (Hugging Face's ``suppress_tokens`` and one-token ``bad_words_ids``: it masks the scores
    after the log-softmax, without normalising them again, and so does beam search here).

    Examples:
        >>> suppress(torch.tensor([[0.0, 2.0, 1.0]]), (1,))
        tensor([[0., -inf, 1.]])
    """
    if not token_ids:
        return scores
    return scores.index_fill(-1, torch.tensor(token_ids, device=scores.device), float("-inf"))
