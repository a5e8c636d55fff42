"""What the training log shows of the step itself, beside the task's numbers: the learning rate,
the gradients' norm and the throughput.

- ``lr``: the rate the logged step trained at (AdamW's; ``muon_lr`` too with
  ``--optimizer muon``), read before the schedule moves it on.
- ``grad_norm``: the global 2-norm of the gradients before clipping, the number
  ``--grad-clip`` compares with its limit (under 16-mixed: after the scale is divided out).
- ``samples_per_second``: examples trained per second of training (``train_seconds``) since
  the previous training row, over every process; ``tokens_per_second`` the same in tokens,
  for the tasks whose ``TaskModule.tokens`` counts them (lm: every position of every window).

Counting examples is host arithmetic on batch shapes; the norm stays on the device until a
step that logs reads it (the loop reads nothing off the device at other steps).
"""
from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["StepStats", "learning_rates"]


def learning_rates(optimizer: torch.optim.Optimizer) -> dict[str, float]:
    """The rates of ``optimizer``'s groups as the log names them: ``lr`` (the first group's;
    AdamW's groups share one rate) and, where groups are marked ``"muon"``, ``muon_lr``.

    Examples:
        >>> w = torch.nn.Parameter(torch.zeros(2))
        >>> learning_rates(torch.optim.AdamW([w], lr=0.01))
        {'lr': 0.01}
    """
    groups = optimizer.param_groups
    rates = {"lr": float(groups[0]["lr"])}
    muon = [g for g in groups if g.get("muon")]
    if muon:
        rates["muon_lr"] = float(muon[0]["lr"])
    return rates


class StepStats:
    """The step's own numbers for the rows of the training log.

    Args:
        size: examples in a batch.
        tokens: tokens in a batch, or None where the task does not count them.

    Examples:
        >>> stats = StepStats(size=len, tokens=lambda batch: None)
        >>> stats.begin(0.0)
        >>> stats.count([[1, 2, 3, 4]]); stats.count([[5, 6, 7, 8]])  # two steps of 4 examples
        >>> stats.row(2.0, processes=1)
        {'samples_per_second': 4.0}
    """

    def __init__(self, *, size: Callable[[object], int],
                 tokens: Callable[[object], int | None]) -> None:
        self.size, self.tokens_of = size, tokens
        self.samples, self.tokens = 0, 0
        self.since = 0.0  # training seconds at the previous row
        self.noted: dict[str, float | torch.Tensor] = {}

    def begin(self, seconds: float) -> None:
        """Training (re)starts ``seconds`` in (a resumed run: its checkpoint's)."""
        self.since, self.samples, self.tokens = seconds, 0, 0

    def count(self, batches: list) -> None:
        """After each step: its batches' examples and tokens (host arithmetic only)."""
        for batch in batches:
            self.samples += self.size(batch)
            self.tokens += self.tokens_of(batch) or 0

    def note(self, optimizer: torch.optim.Optimizer, grad_norm: torch.Tensor | None) -> None:
        """At a step that logs, before the update: its rates and gradient norm (left on the
        device)."""
        self.noted = learning_rates(optimizer)
        if grad_norm is not None:
            self.noted["grad_norm"] = grad_norm

    def row(self, seconds: float, *, processes: int) -> dict[str, float]:
        """The numbers of a training row ``seconds`` into training, reading the norm off the
        device; ``processes`` examples of each size were trained per batch (DDP)."""
        numbers = {k: float(v) for k, v in self.noted.items()}
        elapsed = seconds - self.since
        if elapsed > 0 and self.samples:
            numbers["samples_per_second"] = self.samples * processes / elapsed
            if self.tokens:
                numbers["tokens_per_second"] = self.tokens * processes / elapsed
        self.begin(seconds)
        self.noted = {}
        return numbers
