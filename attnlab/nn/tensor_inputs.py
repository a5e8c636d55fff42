"""The one check that an input is a tensor at all, shared by the models whose inputs a
learner often has as NumPy arrays (``ElementPredictor``, the course's
``TransformerPredictor``; ``SequenceClassifier``, the model ``attnlab.load`` gives for an
anomaly or classify run) and by every mask's way in (``attnlab.nn.masks``: the course's
``scaled_dot_product(q, k, v, mask)``, ``expand_mask``, a block's or a stack's ``mask``). Its
type only: no value is read, so a forward pass that calls it stays free of host
synchronisation and of graph breaks.
"""
from __future__ import annotations

from torch import Tensor

__all__ = ["check_tensor"]


def check_tensor(x, expected: str, name: str = "x") -> None:
    """``TypeError`` unless ``x`` is a ``torch.Tensor``: a NumPy array or a list is named,
    with the fix (``torch.tensor``), instead of an ``AttributeError`` deep in the model.

    Args:
        x: the input.
        expected: what the model takes, for the message (e.g. "(B, T) of token ids").
        name: the argument's name.

    Examples:
        >>> import numpy as np
        >>> check_tensor(np.zeros((2, 3)), "(B, T) of token ids")
        Traceback (most recent call last):
        TypeError: x must be a tensor (B, T) of token ids, got ndarray: pass torch.tensor(x)
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a tensor {expected}, got {type(x).__name__}: "
                        f"pass torch.tensor({name})")
