"""``attnlab train classify``: texts, or sets of feature rows, of the user's file.

``spec.py`` declares the task (settings, defaults, checks; no torch), ``runtime.py`` is the part
that imports torch (model, training, inference: the ``attnlab.tasks.base.Runtime`` functions);
``data.py`` reads the files and the splits (light: no torch); only the spec is imported here.
"""
from .spec import TASKS, ClassifySettings, ClassifyTask

__all__ = ["TASKS", "ClassifySettings", "ClassifyTask"]
