"""Lightning training: the engine (Trainer factory, fit, finish) and the task modules.

This is the only layer that imports Lightning.
"""
import warnings

# Lightning imports tqdm's notebook bar, which warns in Jupyter when ipywidgets is missing;
# attnlab shows no progress bars (it prints ten progress lines), so the warning says nothing.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="IProgress not found")
    import lightning.pytorch  # noqa: F401  (first here, under the filter)

from .engine import (FitResult, NonFiniteLoss, StopAtTarget, finish, fit, make_trainer,
                     parameter_count)
from .module import TaskModule, make_optimizer

__all__ = ["FitResult", "NonFiniteLoss", "StopAtTarget", "finish", "fit", "make_trainer", "parameter_count",
           "TaskModule", "make_optimizer", "TransformerPredictor"]


def __getattr__(name):
    if name == "TransformerPredictor":
        from .predictor import TransformerPredictor

        return TransformerPredictor
    raise AttributeError(f"module 'attnlab.training' has no attribute {name!r}")
