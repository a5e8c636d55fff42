"""``attnlab train tag``: token classification with BIO tags on the user's sentences.

``spec.py`` declares the task (settings, defaults, checks; no torch), ``runtime.py`` imports
torch (model, training, inference); ``data.py`` reads the CoNLL and JSON Lines files and
``scoring.py`` computes the entity scores (both light: no torch); only the spec is imported
here.
"""
from .spec import TASKS, TagSettings, TagTask

__all__ = ["TASKS", "TagSettings", "TagTask"]
