"""Validation numbers of the whole split: sums that the loop adds up as they are, and the
ratios ``TaskModule.summarise`` makes of them (torch only).

The loop's default for a validation number is the mean of its per-batch values, each batch
weighted by its examples. That is the split's mean only when every example has as many targets.
A translation has as many as its target has tokens, an instruction row as many as its reply, and a
class-weighted cross-entropy weighs a row by its class. For such numbers a task's ``loss`` gives,
in validation, a batch's sum and its count (``ratio``); the loop adds both up over the split
(``is_total``), and ``summarise`` divides (``resolve``):

    val_NAME = Σ_split sum / Σ_split count.

So the number is the same however the split is cut into batches. Every rank validates every
batch under DDP, so each rank's totals are the split's (no reduction across ranks is needed).
A ``total`` without a count (entities found, say) reaches ``summarise`` as the split's
sum.

Examples:
    >>> import torch
    >>> numbers = {**ratio("loss", torch.tensor(6.0), torch.tensor(3)), "acc": 0.5}
    >>> sorted(numbers)
    ['acc', 'loss:count', 'loss:sum']
    >>> resolve({"loss:sum": 6.0, "loss:count": 3.0, "acc": 0.5})
    {'acc': 0.5, 'loss': 2.0}
"""
from __future__ import annotations

from torch import Tensor

__all__ = ["ratio", "total", "is_total", "resolve"]

# the suffixes that mark a number the loop adds up as it is (one declaration of the rule)
SUM, COUNT = ":sum", ":count"


def total(**values: Tensor) -> dict[str, Tensor]:
    """Validation numbers that the loop sums over the split (``resolve`` gives each split's
    sum under its own name): counts, such as the entities a batch found."""
    return {name + SUM: value for name, value in values.items()}


def ratio(name: str, value: Tensor, count: Tensor) -> dict[str, Tensor]:
    """A validation number that is ``value`` summed over the split divided by ``count`` summed
    over the split (``resolve``): a batch's summed loss and its targets, say. It replaces the
    loop's mean of the same name (``loss``: the batch means the step returns)."""
    return {name + SUM: value, name + COUNT: count}


def is_total(key: str) -> bool:
    """Whether the loop adds ``key``'s batch values up as they are (not weighted by the
    batch's examples)."""
    return key.endswith((SUM, COUNT))


def resolve(numbers: dict[str, float]) -> dict[str, float]:
    """``numbers`` (the loop's means and the split's totals) with each ``ratio`` divided out
    (NaN where its count is 0, as a mean of nothing is) and each ``total`` under its own
    name; a ratio replaces a mean of the same name."""
    out = {k: v for k, v in numbers.items() if not is_total(k)}
    for key, value in numbers.items():
        if key.endswith(SUM):
            name = key[:-len(SUM)]
            count = numbers.get(name + COUNT)
            out[name] = value if count is None else value / count if count else float("nan")
    return out
