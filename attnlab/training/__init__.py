"""Lightning training: the engine (Trainer factory, fit, finish) and the task modules.

This is the only layer that imports Lightning.
"""
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
