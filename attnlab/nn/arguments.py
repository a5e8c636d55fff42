"""The ranges of the arguments of attnlab.nn's building blocks, declared once.

The blocks keep the course's constructors (plain positional and keyword arguments, Tutorial 6's
names), so they cannot be handed a checked config as the models are. Instead each checks the
arguments it uses against these declarations, through the same ``attnlab.settings`` machinery
that checks a flag or a model config field; a ``ValueError`` names the argument and its value.
The checks run once, when a block is built, never in ``forward``.

This module itself imports no torch (the package attnlab.nn does).

Examples:
    >>> checked("num_layers", 0)
    Traceback (most recent call last):
    ...
    ValueError: num_layers must be a positive integer, got 0
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..settings import check_argument, setting

__all__ = ["BlockArguments", "checked"]


@dataclass
class BlockArguments:
    """The arguments of the attention, feed-forward, block and stack constructors that have a
    range (the defaults are the constructors' own; these declare ranges only)."""

    input_dim: int = setting(None, help="model width D, the inputs' last dimension", low=1)
    embed_dim: int = setting(None, help="the attention's width (heads x head width)", low=1)
    num_heads: int = setting(None, help="attention heads H", low=1)
    dim_feedforward: int = setting(None, help="the feed-forward network's hidden width", low=1)
    num_layers: int = setting(None, help="blocks in a stack", low=1)
    dropout: float = setting(0.0, help="a dropout rate", low=0, below=1)
    ff_dropout: float = setting(None, help="dropout inside the feed-forward network (None: "
                                           "the block's dropout)", low=0, below=1,
                                optional=True)
    attention_dropout: float = setting(0.0, help="dropout on the attention weights", low=0,
                                       below=1)
    num_kv_heads: int = setting(None, help="key/value heads (grouped-query attention)", low=1)
    window: int = setting(None, help="keys a query sees in sliding-window attention", low=1,
                          optional=True)
    d_model: int = setting(None, help="a position table's width", low=1)
    head_dim: int = setting(None, help="a rotary table's width, one head's", low=1)
    max_len: int = setting(None, help="positions a table holds", low=1)
    dim: int = setting(None, help="a norm's width, the inputs' last dimension", low=1)
    eps: float = setting(None, help="added to a norm's mean square (0: none)", low=0)


def checked(name: str, value: Any) -> Any:
    """``value`` of the argument ``name`` checked against its declaration in
    ``BlockArguments``: a ``ValueError`` naming the argument if it is out of range."""
    return check_argument(BlockArguments, name, value)
