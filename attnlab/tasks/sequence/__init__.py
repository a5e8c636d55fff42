"""``attnlab train reverse|copy|sort``: per-element prediction on random symbol sequences.

``spec.py`` declares the task (settings, defaults, checks; no torch), ``runtime.py`` is the part
that imports torch (model, training, inference: the ``attnlab.tasks.base.Runtime`` functions); only
the spec is imported here.
"""
from .spec import TASKS, SequenceSettings, SequenceTask

__all__ = ["TASKS", "SequenceSettings", "SequenceTask"]
