"""The notebooks of examples/: each runs from top to bottom with its test sizes
(its metadata ``attnlab.small``) and fails on any error; the committed files carry the outputs
of a run from top to bottom, so they read well where they are shown without being run."""
from __future__ import annotations

import ast
import os
import re

import nbformat
import pytest

from examples.run import (FRAME_ID, execute, main_pages, notebooks, page_in_frame,
                          parameters_index, renew_pages, saved_attention_pages,
                          small_parameters, todays_view)

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
    assigned = parameter_names(nb)
    for name in small_parameters(nb):  # every test size names a parameter of the first cell
        assert name in assigned, f"{name} is not set in the parameters cell"


def parameter_names(nb) -> set[str]:
    """The names the parameters cell assigns (``A = 1`` and ``A, B = 1, 2``)."""
    return {target.id for node in ast.walk(ast.parse(nb.cells[parameters_index(nb)].source))
            if isinstance(node, ast.Assign) for t in node.targets
            for target in (t.elts if isinstance(t, ast.Tuple) else [t])
            if isinstance(target, ast.Name)}


# What a reader of a committed output must not meet: a warning (a library's
# notice, shown on stderr, that says nothing about the lesson), a path on the machine that ran
# the notebook, or a float's full repr where the text reads a round number (37.000003814697266).
ABSOLUTE_PATH = re.compile(r"(?<![\w.~])(/(?:work|home|tmp|root|Users|var|private|mnt|opt|srv)/"
                           r"|[A-Z]:\\)")
WARNING = re.compile(r"\w*Warning\b|\bwarnings?\.warn")
FLOAT_REPR = re.compile(r"\d\.\d{12,}")


def output_texts(output) -> list[str]:
    """The text a reader sees of one output: a stream's, or a result's plain, HTML and
    markdown forms."""
    if output.output_type == "stream":
        return [output.text]
    data = output.get("data", {})
    return [data[kind] for kind in ("text/plain", "text/html", "text/markdown") if kind in data]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_committed_output_holds_a_warning_a_machines_path_or_a_floats_repr(path):
    nb = nbformat.read(path, as_version=4)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for output in cell.outputs:
            where = f"{path.name}, cell {index}"
            assert not (output.output_type == "stream" and output.name == "stderr"), \
                f"{where} wrote to stderr: {output.text[:200]!r}"
            for text in output_texts(output):
                for pattern, what in ((WARNING, "a warning"), (ABSOLUTE_PATH, "an absolute path"),
                                      (FLOAT_REPR, "a float's repr")):
                    found = pattern.search(text)
                    assert not found, (f"{where} shows {what}: "
                                       f"{text[max(0, found.start() - 60):found.end() + 40]!r}")


@pytest.fixture(scope="session")
def kernel(spawn_session, tmp_path_factory):
    """The command of a kernel forked from this worker's kernel server (tests/forkserver.py),
    which has imported torch, Lightning and ipykernel once: each notebook still runs in a new
    kernel process of its own, without the 5-10 s of CPU a fresh kernel spends importing.
    The server's environment is a kernel's: ipykernel sets ``MPLBACKEND`` before any cell runs
    (matplotlib reads it at import), unless it is set."""
    from . import forkserver

    env = dict(os.environ)
    env["MPLBACKEND"] = env.get("MPLBACKEND") or "module://matplotlib_inline.backend_inline"
    with forkserver.running(spawn_session, str(tmp_path_factory.mktemp("kernels")), env,
                            kernel=True) as shim:
        yield [shim]


# Cells a learner runs again after the notebook: appended to its run from top to bottom, so
# that each check costs a cell, not another kernel and run of the notebook.
def again(nb, index: int, what: str, *, fails: bool = False):
    """A copy of the code cell at ``index``, its first line a comment saying it is the test's
    re-run and of ``what`` (so that a failure shown in it is not taken for the notebook's own
    cell); ``fails``: tagged so that the run goes on past its error, which is kept in its
    outputs (nbclient's ``raises-exception``)."""
    source = f"# run again by tests/test_notebooks.py, as a learner would: {what}\n"
    return nbformat.v4.new_code_cell(source + nb.cells[index].source,
                                     metadata={"tags": ["raises-exception"]} if fails else {})


# What each cell run again is, in the comment that starts its copy (``again``).
RERUN = {"drawing": "the cell that draws a top and a QCD jet",
         "attention": "the attention cell of section 6, after the drawing cell",
         "training": "the training cell, whose --out directory now holds its first run"}


def test_a_cell_run_again_says_it_is_the_tests_rerun_and_of_what():
    """A failure in a re-run cell shows, in its first line, that the test ran it again and
    which cell it is; the rest is the notebook's cell as it is, under a cell id of its own."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1\nprint(x)")])
    copy = again(nb, 0, "the cell that prints x", fails=True)
    assert copy.source == ("# run again by tests/test_notebooks.py, as a learner would: the cell "
                           "that prints x\nx = 1\nprint(x)")
    assert copy.id != nb.cells[0].id and copy.metadata["tags"] == ["raises-exception"]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_a_notebook_runs_from_top_to_bottom_at_its_test_sizes(path, tmp_path, kernel):
    """Each notebook runs at its test sizes. Then, as a learner scrolling back would:

    - notebook 05 runs the cell that draws a top and a QCD jet again, then the attention cell
      of section 6, and gets the same readings of the same test jet (the drawing cell's own
      names must not replace the test jet's ``i``, ``n`` and ``pt``);
    - a training cell (``training_cell``), run a second time, finds its --out directory holding
      the first run; `attnlab train` refuses (it never overwrites a run) and the learner must see
      why, not a bare AssertionError with the command's message swallowed."""
    nb = nbformat.read(path, as_version=4)
    rerun = {}
    if path.stem == "05_jets":
        rerun["drawing"] = code_cell_with(nb, "constituent_features(")
        rerun["attention"] = code_cell_with(nb, "get_attention_maps(")
    if training_cell(nb) is not None:
        rerun["training"] = training_cell(nb)
    nb.cells += [again(nb, i, RERUN[name], fails=name == "training")
                 for name, i in rerun.items()]
    path = tmp_path / path.name
    nbformat.write(nb, path)
    (tmp_path / "run").mkdir()
    ran = execute(path, overrides=small_parameters(nb), cwd=tmp_path / "run", timeout=600,
                  kernel=kernel)
    assert all(c.execution_count for c in ran.cells if c.cell_type == "code")
    if path.stem == "07_pretrained":  # what it saves is beside it, not left behind in /tmp
        assert (tmp_path / "run" / "07_pretrained_files" / "exported-gpt2").is_dir()
    cells = dict(zip(rerun, ran.cells[len(ran.cells) - len(rerun):]))
    if "attention" in cells:
        first = next(c for c in ran.cells if c.id == nb.cells[rerun["attention"]].id)
        assert printed(first) and printed(cells["attention"]) == printed(first)
    if "training" in cells:
        errors = [o for o in cells["training"].outputs if o.output_type == "error"]
        assert errors, "the training cell, run again, trained again over its --out directory"
        shown = printed(cells["training"]) + "\n".join(errors[0].traceback)
        shown = re.sub(r"\x1b\[[0-9;]*m", "", shown)  # the traceback, uncoloured
        assert "attnlab: error: --out " in shown, shown[-2000:]


@pytest.mark.slow
def test_a_forked_kernel_starts_as_a_new_kernel_does(kernel, tmp_path):
    """What a notebook can see of its kernel's start: a process of its own, its working
    directory and import path, its argv, the inline backend (a figure is shown as a PNG),
    nothing run before its first cell. The same from the fork server as from the python3
    kernel's own command."""
    source = ("import os, sys, matplotlib, matplotlib.pyplot as plt\n"
              "print(os.getcwd(), sys.argv[0], sys.path.index(''), matplotlib.get_backend())\n"
              "print(os.environ['MPLBACKEND'], 'In' in dir(), len(In), os.getpid() != PARENT)\n"
              "plt.plot([1, 2]); plt.show()")
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("PARENT = 0", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(source)])
    path = tmp_path / "probe.ipynb"
    nbformat.write(nb, path)
    seen = {}
    for name, command in (("python3 kernel", None), ("forked", kernel)):
        ran = execute(path, overrides={"PARENT": os.getpid()}, cwd=tmp_path, kernel=command)
        outputs = ran.cells[-1].outputs
        seen[name] = ([o.text for o in outputs if o.output_type == "stream"],
                      [sorted(o.data) for o in outputs if o.output_type == "display_data"])
    assert seen["forked"] == seen["python3 kernel"]
    assert seen["forked"][1] == [["image/png", "text/plain"]]


def full_size_flag(nb) -> ast.expr | None:
    """The expression a notebook assigns to ``FULL_SIZE``, or None if it has no such flag."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            for node in ast.walk(ast.parse(cell.source)):
                if isinstance(node, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == "FULL_SIZE" for t in node.targets):
                    return node.value
    return None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_full_size_asserts_run_at_full_size_and_only_there(path):
    """A notebook's asserts on results that need its full-size training are guarded by
    ``FULL_SIZE``: the flag must be True with the parameters cell as committed and False
    with the tests' sizes, so the full run checks the text and the small run skips only those."""
    nb = nbformat.read(path, as_version=4)
    flag = full_size_flag(nb)
    guarded = any("FULL_SIZE" in c.source for c in nb.cells if c.cell_type == "code")
    if flag is None:
        assert not guarded, "FULL_SIZE is used but never assigned"
        return
    parameters = nb.cells[parameters_index(nb)].source
    assert "FULL_SIZE" not in parameters, \
        "FULL_SIZE must be computed after the parameters cell: the test sizes are injected there"
    full: dict = {}
    exec(parameters, full)  # the notebook's own parameters cell: names bound to numbers
    expression = compile(ast.Expression(flag), "FULL_SIZE", "eval")
    assert eval(expression, full) is True
    assert eval(expression, {**full, **small_parameters(nb)}) is False


def changed(value):
    """Another value of a parameter's kind: what a learner might type in its place."""
    if isinstance(value, list):
        return value + value[-1:]
    return (value * 2 or 0.1) if isinstance(value, float) else value + 1


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_full_size_is_the_committed_parameters_and_no_others(path):
    """The text reads the outputs of the run at the committed parameters, and ``FULL_SIZE``
    asserts those readings. A learner who changes any parameter (more steps, another seed: what
    the notebooks suggest trying) gets other results, so the readings are not asserted: the
    run prints its own numbers and goes on, instead of stopping at an AssertionError about
    numbers it was never going to reproduce."""
    nb = nbformat.read(path, as_version=4)
    flag = full_size_flag(nb)
    if flag is None:
        return
    full: dict = {}
    exec(nb.cells[parameters_index(nb)].source, full)
    expression = compile(ast.Expression(flag), "FULL_SIZE", "eval")
    for name in sorted(parameter_names(nb)):
        other = changed(full[name])
        assert eval(expression, {**full, name: other}) is False, \
            f"{path.name}: with {name} = {other!r}, FULL_SIZE is still True"


def training_cell(nb) -> int | None:
    """The index of a notebook's first cell that trains a run through the `attnlab` command
    into an ``--out`` directory (the cell a learner is likeliest to run twice), or None."""
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and '"train"' in cell.source and '"--out"' in cell.source:
            return index
    return None


def code_cell_with(nb, text: str) -> int:
    """The index of the one code cell whose source contains ``text``."""
    found = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and text in c.source]
    assert len(found) == 1, f"{len(found)} code cells contain {text!r}"
    return found[0]


def printed(cell) -> str:
    """What a code cell printed."""
    return "".join(o.text for o in cell.outputs if o.output_type == "stream")


@pytest.mark.slow
def test_asking_for_more_distinct_numbers_than_there_are_stops_with_the_reason(tmp_path, kernel):
    """Notebook 03 draws N_PAIRS distinct numbers below MAX_NUMBER. A learner who lowers
    MAX_NUMBER to make the task easier, and leaves N_PAIRS, asked for more numbers than there
    are: the data cell must say so, not draw for ever."""
    from nbclient.exceptions import CellExecutionError

    path = next(p for p in NOTEBOOKS if p.stem == "03_translation")
    nb = nbformat.read(path, as_version=4)
    with pytest.raises(CellExecutionError) as stopped:
        execute(path, overrides={**small_parameters(nb), "N_PAIRS": 2_000, "MAX_NUMBER": 1_000},
                cwd=tmp_path, timeout=120, kernel=kernel)
    shown = re.sub(r"\x1b\[[0-9;]*m", "", str(stopped.value))
    assert "N_PAIRS = 2,000 distinct numbers cannot be drawn below MAX_NUMBER = 1,000" in shown


@pytest.mark.slow
def test_a_context_too_short_for_the_sampling_prompt_stops_notebook_04_before_training(
        tmp_path, kernel):
    """Notebook 04 samples after the 17-character prompt "The value of the ". A learner who
    shortens BLOCK_SIZE to 17 or less must hear so before the training, naming BLOCK_SIZE and
    the smallest context that works, not from inside generate after it
    ("max_new_tokens must be an integer >= 0, got -1"), or get samples of nothing."""
    from nbclient.exceptions import CellExecutionError

    path = next(p for p in NOTEBOOKS if p.stem == "04_language_model")
    nb = nbformat.read(path, as_version=4)
    with pytest.raises(CellExecutionError) as stopped:
        execute(path, overrides={**small_parameters(nb), "BLOCK_SIZE": 17}, cwd=tmp_path,
                timeout=120, kernel=kernel)
    shown = re.sub(r"\x1b\[[0-9;]*m", "", str(stopped.value))
    assert "BLOCK_SIZE = 17 leaves no room to sample after section 4's 17-character prompt " \
           "'The value of the ': use BLOCK_SIZE >= 18" in shown
    assert not (tmp_path / "runs").exists(), "it stopped after training"


@pytest.mark.slow
def test_a_context_shorter_than_the_attention_sentence_still_runs_notebook_04(tmp_path, kernel):
    """Notebook 04's learner who shortens BLOCK_SIZE (the model's context) below the 55
    characters of the sentence whose attention it draws gets the maps of the sentence's first
    BLOCK_SIZE characters, not a ValueError from inside the positional encoding. 18, the
    smallest context the notebook's first cells accept, runs to the end."""
    path = next(p for p in NOTEBOOKS if p.stem == "04_language_model")
    nb = nbformat.read(path, as_version=4)
    ran = execute(path, overrides={**small_parameters(nb), "BLOCK_SIZE": 18}, cwd=tmp_path,
                  timeout=600, kernel=kernel)
    shown = [o for c in ran.cells if c.cell_type == "code" and "get_attention_maps(ids)" in c.source
             for o in c.outputs if o.output_type == "display_data"]
    assert shown, "the attention cell drew no figure"


# The attention page a notebook shows is saved with its script, style and frame: a notebook run
# before the explorer changed keeps showing the old page on GitHub and in Jupyter (its output is
# not re-run). The frame's id is random per display.
def renew_hint(path) -> str:
    return (f"renew its pages from their saved data in seconds: python -m examples.run --pages "
            f"{path.stem} (a change of the page's data layout needs the full run: python -m "
            f"examples.run {path.stem})")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_a_saved_attention_page_is_the_page_attnlab_makes_today(path):
    """Each saved page, rebuilt from its own data by today's package, is the same HTML: the
    explorer's script and style, the page around them and the frame that shows it. A stale one
    is renewed by ``python -m examples.run --pages NAME`` (what this test computes)."""
    nb = nbformat.read(path, as_version=4)
    for index, output in saved_attention_pages(nb):
        saved = output.data["text/html"]
        try:
            today = todays_view(saved)
        except ValueError as e:
            pytest.fail(f"{path.name}, cell {index}: its saved attention data does not fit "
                        f"today's page ({e}): run the whole notebook, python -m examples.run "
                        f"{path.stem}")
        assert page_in_frame(saved) == today.html(), (
            f"{path.name}, cell {index}: the saved attention page is not today's: "
            f"{renew_hint(path)}")
        assert FRAME_ID.sub("", saved) == FRAME_ID.sub("", today._repr_html_()), \
            (f"{path.name}, cell {index}: the frame around the page is not today's: "
             f"{renew_hint(path)}")


def _with_a_stale_page(tmp_path):
    """A copy of notebook 03 whose attention page is not today's: its script has a line today's
    lacks, and page and frame another height rule."""
    path = next(p for p in NOTEBOOKS if p.stem == "03_translation")
    nb = nbformat.read(path, as_version=4)
    (index, output), = saved_attention_pages(nb)
    saved = output.data["text/html"]
    head, tail = saved.replace("attnlabHeight", "height").rsplit("&lt;/script&gt;", 1)
    output.data["text/html"] = head + "// an older explorer\n&lt;/script&gt;" + tail
    copy = tmp_path / path.name
    nbformat.write(nb, copy)
    return copy, index, saved


def test_pages_renews_a_stale_attention_page_from_its_saved_data(tmp_path, capsys):
    """``python -m examples.run --pages NAME`` writes today's page and frame around the data
    the notebook saved (the frame keeping its id), and changes nothing else; ``--check`` only
    counts."""
    copy, index, saved = _with_a_stale_page(tmp_path)
    stale = copy.read_text(encoding="utf-8")
    assert main_pages([copy], save=False) == 0
    assert copy.read_text(encoding="utf-8") == stale
    assert main_pages([copy], save=True) == 0
    assert capsys.readouterr().out.splitlines() == [f"{copy.name}: 1 attention page stale",
                                                    f"{copy.name}: 1 attention page renewed"]
    renewed = nbformat.read(copy, as_version=4)
    assert renewed.cells[index].outputs == nbformat.read(
        next(p for p in NOTEBOOKS if p.stem == copy.stem), as_version=4).cells[index].outputs
    assert saved_attention_pages(renewed)[0][1].data["text/html"] == saved
    assert renew_pages(copy) == 0  # renewed once, nothing left to renew


def test_pages_stops_on_saved_data_todays_page_cannot_read(tmp_path, capsys):
    copy, index, _ = _with_a_stale_page(tmp_path)
    nb = nbformat.read(copy, as_version=4)
    output = saved_attention_pages(nb)[0][1]
    output.data["text/html"] = output.data["text/html"].replace("&quot;layers&quot;",
                                                                "&quot;levels&quot;", 1)
    nbformat.write(nb, copy)
    before = copy.read_text(encoding="utf-8")
    assert main_pages([copy], save=True) == 2
    err = capsys.readouterr().err
    assert err == (f"examples.run: {copy.name}, cell {index}: its saved attention data does not "
                   "fit today's page (attention data has no 'layers'): run the whole notebook, "
                   "python -m examples.run 03_translation\n")
    assert copy.read_text(encoding="utf-8") == before
