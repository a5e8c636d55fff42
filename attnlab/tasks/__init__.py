"""Registry of the tasks of ``attnlab train``: name → the module whose ``TASKS`` dict holds the
``Task`` of that name (every task module exposes ``TASKS``; one module may serve several)."""
from __future__ import annotations

from importlib import import_module

from ..errors import UsageError
from .base import SHARED_DEFAULTS, Task

TASKS = {
    "reverse": "attnlab.tasks.sequence",
    "copy": "attnlab.tasks.sequence",
    "sort": "attnlab.tasks.sequence",
    "anomaly": "attnlab.tasks.anomaly",
    "classify": "attnlab.tasks.classify",
    "translate": "attnlab.tasks.translate",
    "lm": "attnlab.tasks.lm",
    "jets": "attnlab.tasks.jets",
    "graph": "attnlab.tasks.graph",
}

__all__ = ["TASKS", "get_task", "available_tasks", "Task", "SHARED_DEFAULTS"]


def get_task(name: str) -> Task:
    """The ``Task`` called ``name``; ``UsageError`` for an unknown one."""
    if name not in TASKS:
        raise UsageError(f"unknown task {name!r}; choose one of: {', '.join(TASKS)}")
    return import_module(TASKS[name]).TASKS[name]


def available_tasks() -> dict[str, Task]:
    """Every task whose module is present (modules still being written are left out)."""
    found = {}
    for name in TASKS:
        try:
            found[name] = get_task(name)
        except ModuleNotFoundError:
            continue
    return found
