"""Registry of the tasks of ``attnlab train``: each task is a package here (``sequence/``,
``translate/``, ...; see ``base.py``), and its ``TASKS`` dict holds its ``Task`` objects by name
(one package may serve several: reverse, copy, sort). Importing a package imports its light
spec only, so the registry imports them all (its ``runtime.py`` is imported by
``Task.runtime`` when a command needs it); adding a task is one package and one line below.
"""
from __future__ import annotations

from ..errors import UsageError
from . import anomaly, classify, graph, jets, lm, sequence, tag, translate
from .base import SHARED_DEFAULTS, Capabilities, Runtime, Task

TASKS: dict[str, Task] = {
    **sequence.TASKS,  # reverse, copy, sort
    **anomaly.TASKS,
    **classify.TASKS,
    **tag.TASKS,
    **translate.TASKS,
    **lm.TASKS,
    **jets.TASKS,
    **graph.TASKS,
}

__all__ = ["TASKS", "get_task", "available_tasks", "Task", "Capabilities", "Runtime",
           "SHARED_DEFAULTS"]


def get_task(name: str) -> Task:
    """The ``Task`` called ``name``; ``UsageError`` for an unknown one."""
    if name not in TASKS:
        raise UsageError(f"unknown task {name!r}; choose one of: {', '.join(TASKS)}")
    return TASKS[name]


def available_tasks() -> dict[str, Task]:
    """Every registered task, by name (``attnlab train``'s subcommands, in this order)."""
    return dict(TASKS)
