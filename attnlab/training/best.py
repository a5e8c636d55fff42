"""``--keep-best`` and ``--patience``: which validation has been the best so far, its weights,
and when to stop waiting for a better one.

The best validation is the one whose ``--monitor`` metric is lowest (a metric whose mode is
"min", ``attnlab.settings.VAL_METRICS``) or highest ("max"); a NaN is never the best. That is
the validation whose weights ``--keep-best`` keeps, as transformers' ``Trainer`` keeps its
``best_model_checkpoint`` and Lightning's ``ModelCheckpoint`` its best: every improvement
counts there, however small. ``--min-delta`` serves ``--patience`` only, as in Lightning's and
Keras's ``EarlyStopping``: the wait ends when the metric beats the value the last wait ended
at (its *reference*) by more than the delta, so a run that creeps by less than the delta
each time stops, while one that gains more than the delta over several validations goes on.
(Keras also keeps, with ``restore_best_weights``, only the weights of such a gain; the
Trainer compares with its best so far. With the default delta of 0 all of them agree.)

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

__all__ = ["BestWatch", "cpu_copy", "MEASURE"]

# How the watched numbers are measured, saved with the watch: 2 since a split whose examples
# have unequal numbers of targets is measured per target of the whole split (``totals``:
# translate, instruction rows, tag, classify --class-weights). A watch saved before (no
# "measure") holds a mean of per-batch means, which a resumed run cannot compare with its own.
MEASURE = 2


def cpu_copy(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``model``'s state dict on the CPU, in the dtypes it trains in (training goes
    on changing the originals in place)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


class BestWatch:
    """The best validation so far by ``metric``, and the validations since the wait began.

    Args:
        metric: the validation metric watched (``--monitor``), one of ``VAL_METRICS``.
        min_delta: the gain over the reference that ends a wait (``--min-delta``, module
            docstring); the best itself moves with any gain.
        patience: validations in a row without such a gain after which to stop; None: never.
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
        self.reference: float | None = None  # the value the wait is counted from
        self.waited = 0  # validations without a gain of more than min_delta on the reference
        self.weights: dict[str, torch.Tensor] | None = None

    def beats(self, value: float, than: float | None, by: float = 0.0) -> bool:
        """Whether ``value`` is better than ``than`` by more than ``by`` (anything finite
        beats None; a NaN or an infinity beats nothing)."""
        if not math.isfinite(value):
            return False
        if than is None:
            return True
        return value < than - by if self.mode == "min" else value > than + by

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
        if self.beats(value, self.reference, self.min_delta):
            self.reference, self.waited = value, 0
        else:
            self.waited += 1
        if not self.beats(value, self.value):
            return False
        self.step, self.value, self.metrics = step, value, dict(metrics)
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
        # waited, not patience: a stopped run resumed with a raised budget waits one more
        return f"{self.metric} did not improve{more} for {self.waited} validations ({best})"

    def summary(self) -> dict[str, Any]:
        """What ``metrics.json`` records of the best validation: ``best_step``,
        ``best_metric`` and ``best_value`` (empty before any finite value)."""
        if self.value is None:
            return {}
        return {"best_step": self.step, "best_metric": self.metric, "best_value": self.value}

    # ---- in the checkpoint --------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"measure": MEASURE, "metric": self.metric, "step": self.step, "value": self.value,
                "metrics": dict(self.metrics), "reference": self.reference,
                "waited": self.waited, "weights": self.weights}

    def load_state_dict(self, state: dict[str, Any], where: str) -> str | None:
        """The watch of a checkpoint; a note (None: nothing to say) when its numbers were
        measured otherwise (``MEASURE``): then it is forgotten, and the best is chosen again
        from the resumed step on."""
        if state["metric"] != self.metric:  # config.yaml and the checkpoint disagree
            raise UsageError(f"--resume: {where} watched {state['metric']}, this run "
                             f"--monitor {self.metric}; start a new run with another --out")
        if state.get("measure") != MEASURE:
            best = ("" if state["value"] is None else
                    f" ({self.metric} {state['value']:.4g} at step {state['step']})")
            return (f"--resume: {where} holds its best validation{best} as an older attnlab "
                    f"measured it, a mean of per-batch means; it is not compared with this "
                    f"one's numbers: the best is chosen again from here")
        self.step, self.value = state["step"], state["value"]
        self.metrics, self.waited = dict(state["metrics"]), int(state["waited"])
        self.reference = state["reference"]
        if self.keep:
            self.weights = state["weights"]
        return None
