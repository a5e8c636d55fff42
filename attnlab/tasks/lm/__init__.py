"""``attnlab train lm``: a decoder-only language model on the user's text.

``spec.py`` declares the task (settings, defaults, checks; no torch), ``runtime.py`` is the part
that imports torch (model, training, inference: the ``attnlab.tasks.base.Runtime`` functions);
``checks.py`` checks --data for ``validate`` (light: no numpy, no torch); only the spec is imported
here.
"""
from .spec import TASKS, LMSettings, LMTask

__all__ = ["TASKS", "LMSettings", "LMTask"]
