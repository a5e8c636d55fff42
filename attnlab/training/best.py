"""``--keep-best`` and ``--patience``: which validation has been the best so far, its weights,
and when to stop waiting for a better one.

One definition of "better" serves both: a validation improves on the best so far when its
``--monitor`` metric is lower (a metric whose mode is "min", ``attnlab.settings.VAL_METRICS``)
or higher ("max") by more than ``--min-delta``. Keras's ``EarlyStopping`` with
``restore_best_weights`` counts the same way; a NaN never improves.

The watch is part of what a run resumes from: ``state_dict`` goes into
``checkpoints/last.ckpt`` (key ``best``), the best weights with it. Kept there rather than in
a file of their own, the best weights always belong to the same timeline as the checkpoint: a
separate file written at step 300 while the last checkpoint was of step 200 would outlive a
kill, and a resumed run whose steps 201-300 came out differently (a raised --max-steps changes
the schedule) would end with weights its own validations never saw.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ..errors import UsageError
from ..settings import VAL_METRICS

__all__ = ["BestWatch", "cpu_copy"]


def cpu_copy(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``model``'s state dict on the CPU, in the dtypes it trains in (training goes
    on changing the originals in place)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


class BestWatch:
    """The best validation so far by ``metric``, and the validations since it.

    Args:
        metric: the validation metric watched (``--monitor``), one of ``VAL_METRICS``.
        min_delta: the smallest change that counts as an improvement (``--min-delta``).
        patience: validations in a row without improvement after which to stop; None: never.
        keep: keep a copy of the best validation's weights (``--keep-best``).

    Examples:
        >>> watch = BestWatch("val_loss", patience=2)
        >>> [watch.see(step, {"val_loss": v}) for step, v in [(10, 2.0), (20, 1.5), (30, 1.6)]]
        [True, True, False]
        >>> watch.exhausted(), watch.see(40, {"val_loss": 1.7}), watch.exhausted()
        (False, False, True)
        >>> watch.reason()
        'val_loss did not improve for 2 validations (best 1.5 at step 20)'
    """

    def __init__(self, metric: str, *, min_delta: float = 0.0, patience: int | None = None,
                 keep: bool = False) -> None:
        self.metric, self.mode = metric, VAL_METRICS[metric]
        self.min_delta, self.patience, self.keep = float(min_delta), patience, keep
        self.step: int | None = None  # of the best validation
        self.value: float | None = None
        self.metrics: dict[str, float] = {}  # everything that validation measured
        self.waited = 0  # validations since the best
        self.weights: dict[str, torch.Tensor] | None = None

    def improves(self, value: float) -> bool:
        """Whether ``value`` is better than the best so far by more than ``min_delta``."""
        if not math.isfinite(value):
            return False
        if self.value is None:
            return True
        if self.mode == "min":
            return value < self.value - self.min_delta
        return value > self.value + self.min_delta

    def see(self, step: int, metrics: dict[str, float],
            weights: Callable[[], dict[str, torch.Tensor]] | None = None) -> bool:
        """Take the validation of ``step``; True when it is the new best. ``weights`` gives
        the copy kept with ``keep`` (None: this process keeps none, a DDP rank but rank 0).

        Raises:
            RuntimeError: the validation did not compute the metric (the task's
                ``val_metrics`` declares one its validation does not log: a fault of attnlab's).
        """
        if self.metric not in metrics:
            raise RuntimeError(f"the validation at step {step} computed no {self.metric} "
                               f"(it computed {', '.join(sorted(metrics)) or 'nothing'}), "
                               f"though the task declares it")
        value = float(metrics[self.metric])
        if not self.improves(value):
            self.waited += 1
            return False
        self.step, self.value, self.metrics, self.waited = step, value, dict(metrics), 0
        if self.keep and weights is not None:
            self.weights = weights()
        return True

    def exhausted(self) -> bool:
        """Whether ``patience`` validations in a row have not improved."""
        return self.patience is not None and self.waited >= self.patience

    def reason(self) -> str:
        """Why the run stops (``exhausted``), for the line the run ends with."""
        best = "none finite" if self.value is None else f"best {self.value:.4g} at step {self.step}"
        more = f" by more than {self.min_delta:g}" if self.min_delta else ""
        return f"{self.metric} did not improve{more} for {self.patience} validations ({best})"

    def summary(self) -> dict[str, Any]:
        """What ``metrics.json`` records of the best validation: ``best_step``,
        ``best_metric`` and ``best_value`` (empty before any finite value)."""
        if self.value is None:
            return {}
        return {"best_step": self.step, "best_metric": self.metric, "best_value": self.value}

    # ---- in the checkpoint --------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "step": self.step, "value": self.value,
                "metrics": dict(self.metrics), "waited": self.waited, "weights": self.weights}

    def load_state_dict(self, state: dict[str, Any], where: str) -> None:
        if state["metric"] != self.metric:  # config.yaml and the checkpoint disagree
            raise UsageError(f"--resume: {where} watched {state['metric']}, this run "
                             f"--monitor {self.metric}; start a new run with another --out")
        self.step, self.value = state["step"], state["value"]
        self.metrics, self.waited = dict(state["metrics"]), int(state["waited"])
        if self.keep:
            self.weights = state["weights"]
