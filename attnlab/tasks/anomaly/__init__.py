"""``attnlab train anomaly``: find the odd digit in a set.

``spec.py`` declares the task (settings, defaults, checks; no torch), ``runtime.py`` is the part
that imports torch (model, training, inference: the ``attnlab.tasks.base.Runtime`` functions);
``checks.py`` counts the digit classes for ``validate`` (light: no numpy); only the spec is
imported here.
"""
from .spec import TASKS, AnomalySettings, AnomalyTask

__all__ = ["TASKS", "AnomalySettings", "AnomalyTask"]
