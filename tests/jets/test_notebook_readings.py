"""Notebook 05 reads its rejections as the run's metrics.json does: with
``attnlab.tasks.jets.metrics.rejection`` on P(top) in float64 (``top_probability``), and checks
them against metrics.json. It read them with ``np.interp`` and a floor of 1e-9 on ε_B, on
float32 scores: the largest ε_B where several ROC points have the ε_S asked for, and 10⁹ where
no QCD jet passes, where metrics.json gives the lowest and the bound N_B. This test checks the
notebook's code only; that the reading it uses gives a run's metrics.json is checked on a tiny run
(tests/jets/test_task.py, ``test_the_notebooks_reading_of_the_rejections_is_the_runs``), and on
the notebook's own runs by its assert when the notebook tests run it."""
from pathlib import Path

import nbformat

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "05_jets.ipynb"


def _code() -> str:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "code")


def test_the_notebook_reads_rejections_with_the_projects_function():
    code = _code()
    assert "np.interp" not in code and "1e-9" not in code
    assert "rejection(scored[name], test_labels, efficiency)" in code
    assert "top_probability(model(batch))" in code and '"test_rejection_30"' in code
