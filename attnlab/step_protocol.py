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

__all__ = ["StepFunction", "FiniteWatch", "check_positive_int", "check_prompt", "check_token_ids",
           "suppress"]


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


class FiniteWatch:
    """A step function that returns another's logits unchanged and records, for each row of the
    batch it started with, whether every step that row took gave finite logits (weights trained
    to NaN, or a token whose embedding overflows, make a later step NaN though the first is
    finite, and a search then writes the argmax of NaN rows as surely as a translation). It reads
    only the logits the search computes, follows ``reorder`` (the rows greedy decoding drops and
    the beams beam search keeps) and reads no value until ``finite``: no extra pass, no host
    synchronisation per step. Under beam search a row counts as not finite when any of its
    beams was not.

    Examples:
        >>> watch = FiniteWatch(lambda t: torch.tensor([[0.0, 1.0], [float("nan"), 0.0]]), 2)
        >>> _ = watch(torch.zeros(2, 1, dtype=torch.long)); watch.finite()
        [True, False]
    """

    def __init__(self, step: StepFunction, batch_size: int, device=None) -> None:
        self.step = step
        # (B',) the row of the first batch that each row the step holds is
        self.rows = torch.arange(batch_size, device=device)
        self.bad = torch.zeros(batch_size, dtype=torch.long, device=device)  # (B,) bad steps
        if callable(getattr(step, "reorder", None)):  # the loops look for it: only if step has it
            self.reorder = self._reorder

    def __call__(self, tokens: Tensor) -> Tensor:  # (B', T) -> (B', V)
        logits = self.step(tokens)
        self.bad.index_add_(0, self.rows, (~logits.isfinite().all(-1)).long())
        return logits

    def _reorder(self, index: Tensor) -> None:
        self.step.reorder(index)
        self.rows = self.rows[index]

    def finite(self) -> list[bool]:
        """Per row of the first batch: whether all its steps' logits were finite."""
        return (self.bad == 0).tolist()
