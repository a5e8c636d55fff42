"""Training: the loop every ``attnlab train`` run goes through (``engine``, on Lightning
Fabric), the task modules it trains, and the course's ``TransformerPredictor``.

This is the only layer that imports Lightning: ``lightning_fabric`` for the loop (when a run
starts), and Lightning's Trainer only for ``TransformerPredictor``, the course's
LightningModule, which is imported when asked for.
"""
from .engine import FitResult, NonFiniteLoss, StopAt, finish, fit, parameter_count
from .module import TaskModule, make_optimizer

__all__ = ["FitResult", "NonFiniteLoss", "StopAt", "finish", "fit",
           "parameter_count", "TaskModule", "make_optimizer", "TransformerPredictor"]


def __getattr__(name):
    if name == "TransformerPredictor":
        import warnings

        # Lightning imports tqdm's notebook bar, which warns in Jupyter when ipywidgets is
        # missing; the course's Trainer shows its own progress, and the warning says nothing.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="IProgress not found")
            from .predictor import TransformerPredictor

        return TransformerPredictor
    raise AttributeError(f"module 'attnlab.training' has no attribute {name!r}")
