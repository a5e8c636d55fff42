"""Registry of the tasks of ``attnlab train``: name → module holding a ``TASK`` instance."""
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
}

__all__ = ["TASKS", "get_task", "available_tasks", "Task", "SHARED_DEFAULTS"]


def get_task(name: str) -> Task:
    """The ``Task`` called ``name``; ``UsageError`` for an unknown one."""
    if name not in TASKS:
        raise UsageError(f"unknown task {name!r}; choose one of: {', '.join(TASKS)}")
    module = import_module(TASKS[name])
    tasks = getattr(module, "TASKS", None)  # a module may serve several tasks
    return tasks[name] if tasks else module.TASK


def available_tasks() -> dict[str, Task]:
    """Every task whose module is present (modules still being written are left out)."""
    found = {}
    for name in TASKS:
        try:
            found[name] = get_task(name)
        except ModuleNotFoundError:
            continue
    return found
