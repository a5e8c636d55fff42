"""``attnlab train jets``: top-quark tagging with a set Transformer over a jet's constituents.

``spec.py`` declares the task (settings, defaults, checks; no torch), ``runtime.py`` is the part
that imports torch (model, training, inference: the ``attnlab.tasks.base.Runtime`` functions);
``checks.py`` checks the files for ``validate`` (light at import) and splits --data by index;
``data.py`` reads and writes jet files (numpy, pandas), ``generate.py`` and ``detector.py`` make
them (``attnlab data jets``), ``metrics.py`` scores taggers (ROC, rejection, the baselines); the
physics the model reads is ``attnlab.models.jet_physics``; only the spec is imported here.
"""
from .spec import TASKS, JetsSettings, JetsTask

__all__ = ["TASKS", "JetsSettings", "JetsTask"]
