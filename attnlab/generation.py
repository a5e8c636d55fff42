"""Autoregressive generation: next-token selection, greedy/sampled decoding, beam search.

Shapes: B batch, K beams, V vocabulary, T tokens so far, N new tokens.

Everything here is model-agnostic. A model takes part through a *step function*: an object
called with every token so far, ``step(tokens) -> logits``, tokens (B, T) -> next-token logits
(B, V). A step function that keeps a key/value cache feeds the model only the tokens it has not
seen yet (``tokens[:, cached:]``), so one step costs O(T) instead of O(T²). A step function
may also have ``reorder(index)``: keep batch rows ``index`` (row i becomes old row
``index[i]``) of whatever it holds (caches, encoder memory). Beam search needs it to follow the
surviving beams; greedy decoding uses it to drop finished rows from the batch.

Decoding stops for a row when it emits ``eos_token_id``; later positions hold ``pad_token_id``.
Beam search scores a finished hypothesis the Hugging Face way:
    score = sum of token log-probabilities / length ** length_penalty
where length counts the generated tokens (the EOS included, the prompt not).
"""
from __future__ import annotations

from typing import Callable, Protocol

import torch
from torch import Tensor

__all__ = ["filter_top_k", "filter_top_p", "select_next_token", "StepFunction"]


class StepFunction(Protocol):
    """``step(tokens (B, T)) -> logits (B, V)`` of the next token; optional ``reorder(index)``."""

    def __call__(self, tokens: Tensor) -> Tensor: ...


# ---- choosing the next token ------------------------------------------------------------
def filter_top_k(logits: Tensor, k: int) -> Tensor:
    """Keep the k largest logits of each row; set the rest to -inf (ties with the k-th kept).

    Args:
        logits: (..., V) unnormalised scores.
        k: how many to keep (k >= V keeps everything).

    Returns:
        A new tensor (..., V).

    Raises:
        ValueError: if k is not a positive integer.

    Example:
        >>> filter_top_k(torch.tensor([[1.0, 3.0, 2.0]]), 2)
        tensor([[-inf, 3., 2.]])
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"top_k must be a positive integer, got {k!r}")
    if k >= logits.shape[-1]:
        return logits.clone()
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1) the k-th largest
    return logits.masked_fill(logits < kth, float("-inf"))


def filter_top_p(logits: Tensor, p: float) -> Tensor:
    """Nucleus filtering (Holtzman et al., 2020): keep the smallest set of most probable tokens
    whose total probability is >= p; set the rest to -inf. At least one token always stays.

    Args:
        logits: (..., V) unnormalised scores.
        p: probability mass to keep, in (0, 1]; 1 keeps everything.

    Returns:
        A new tensor (..., V).

    Raises:
        ValueError: if p is not in (0, 1].

    Example:
        >>> filter_top_p(torch.tensor([[0.0, 2.0, 1.0]]).log_softmax(-1), 0.6)
        tensor([[  -inf, -0.4076,   -inf]])
    """
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 < p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {p!r}")
    if p >= 1.0:
        return logits.clone()
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (..., V)
    probs = sorted_logits.float().softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs  # mass of the strictly more probable tokens
    drop_sorted = before >= p  # the set already reached p without this token
    drop_sorted[..., 0] = False  # the most probable token always stays
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def select_next_token(
    logits: Tensor,
    *,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """The next token of each row: the argmax, or a sample from softmax(logits / temperature)
    restricted by top-k and then top-p.

    Args:
        logits: (B, V) next-token scores.
        do_sample: sample instead of taking the argmax (then the other options apply).
        temperature: > 0; below 1 sharpens the distribution, above 1 flattens it.
        top_k: sample only among the k most probable tokens.
        top_p: sample only from the nucleus of mass p.
        generator: a ``torch.Generator`` for reproducible sampling.

    Returns:
        (B,) int64 token ids.

    Raises:
        ValueError: for a non-positive temperature, bad top_k/top_p, or logits not (B, V).

    Example:
        >>> select_next_token(torch.tensor([[0.1, 2.0, -1.0]]))
        tensor([1])
    """
    if logits.ndim != 2:
        raise ValueError(f"logits must be (B, V), got shape {tuple(logits.shape)}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    if not do_sample:
        if top_k is not None:
            filter_top_k(logits[:0], top_k)  # validate the option even when unused
        if top_p is not None:
            filter_top_p(logits[:0], top_p)
        return logits.argmax(dim=-1)
    scores = logits.float() / temperature
    if top_k is not None:
        scores = filter_top_k(scores, top_k)
    if top_p is not None:
        scores = filter_top_p(scores, top_p)
    probs = scores.softmax(dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
