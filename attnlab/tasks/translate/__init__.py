"""``attnlab train translate``: an encoder-decoder that translates.

``spec.py`` declares the task (settings, defaults, checks; no torch), ``runtime.py`` is the part
that imports torch (model, training, inference: the ``attnlab.tasks.base.Runtime`` functions);
``data.py`` the text side (splits, languages, tokenisers, and the files ``validate`` checks),
``scoring.py`` decoding and the metrics; only the spec is imported here.
"""
from .spec import TASKS, TranslateSettings, TranslateTask

__all__ = ["TASKS", "TranslateSettings", "TranslateTask"]
