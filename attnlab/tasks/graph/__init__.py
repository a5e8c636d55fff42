"""``attnlab train graph``: classify the nodes of one graph.

``spec.py`` declares the task (settings, defaults, checks; no torch), ``runtime.py`` is the part
that imports torch (model, training, inference: the ``attnlab.tasks.base.Runtime`` functions); only
the spec is imported here.
"""
from .spec import TASKS, GraphSettings, GraphTask

__all__ = ["TASKS", "GraphSettings", "GraphTask"]
