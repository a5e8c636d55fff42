"""The notebooks of examples/ (issue #13): each runs from top to bottom with its test sizes
(its metadata ``attnlab.small``) and fails on any error; the committed files carry the outputs
of a run from top to bottom, so they read well where they are shown without being run."""
from __future__ import annotations

import ast

import nbformat
import pytest

from examples.run import execute, notebooks, parameters_index, small_parameters

NOTEBOOKS = notebooks()
IDS = [p.stem for p in NOTEBOOKS]


def test_the_course_notebooks_are_there():
    names = {p.stem.split("_", 1)[1] for p in NOTEBOOKS}
    assert {"attention_from_scratch", "reversal_and_sets"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_a_committed_notebook_holds_the_outputs_of_one_run_in_order(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.execution_count for c in code]
    assert None not in counts, "a code cell was never run: `make notebooks`"
    assert counts == list(range(1, len(code) + 1)), "cells were run out of order"
    for cell in code:  # printed piece by piece, shown as one block of text (examples.run)
        for a, b in zip(cell.outputs, cell.outputs[1:]):
            assert not (a.output_type == b.output_type == "stream" and a.name == b.name), \
                "split stream output: re-run with `make notebooks`"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, errors[0]["ename"] if errors else ""
    assert parameters_index(nb) == next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    assigned = {target.id for node in ast.walk(ast.parse(nb.cells[parameters_index(nb)].source))
                if isinstance(node, ast.Assign) for t in node.targets
                for target in (t.elts if isinstance(t, ast.Tuple) else [t])
                if isinstance(target, ast.Name)}
    for name in small_parameters(nb):  # every test size names a parameter of the first cell
        assert name in assigned, f"{name} is not set in the parameters cell"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_a_notebook_runs_from_top_to_bottom_at_its_test_sizes(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    ran = execute(path, overrides=small_parameters(nb), cwd=tmp_path, timeout=600)
    assert all(c.execution_count for c in ran.cells if c.cell_type == "code")
