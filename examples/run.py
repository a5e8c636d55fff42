"""Run the notebooks of ``examples/`` from top to bottom, in a fresh kernel each.

    python -m examples.run                      # all of them at full size, outputs saved in place
    python -m examples.run 03_translation       # one (a name, with or without .ipynb)
    python -m examples.run --check 01_attention_from_scratch   # run, save nothing
    python -m examples.run --pages 03_translation   # renew its attention pages only (seconds)

``make notebooks`` is the first line. Each notebook runs in its own new temporary directory, so
what it writes (runs, figures, data) stays out of ``examples/``; its outputs are written back
into the ``.ipynb`` file, which is how the committed notebooks got theirs.

A notebook's first code cell holds its parameters (sizes, steps) and is tagged ``parameters``;
``execute(path, overrides={...})`` runs a cell with the overrides right after it. The
notebook's metadata ``attnlab.small`` holds the overrides the tests (``tests/test_notebooks.py``)
run it with: ``--small`` here does the same.

``--pages`` trains nothing: each attention page (``AttentionView``) a notebook's outputs hold
is rendered again from its own saved data by today's package (script, style, frame), which is
what ``tests/test_notebooks.py`` compares with. A change of the page's data layout (what the
notebook computes and puts in it) needs the full run instead.
"""
from __future__ import annotations

import argparse
import html
import re
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The frame around a saved attention page has a random id per display (``AttentionView``).
FRAME_ID = re.compile(r"attnlab-view-[0-9a-f]{12}")


def notebooks(names: list[str] | None = None) -> list[Path]:
    """The notebooks of examples/ in order, or those named (``NAME`` or ``NAME.ipynb``)."""
    found = sorted(HERE.glob("[0-9][0-9]_*.ipynb"))
    if not names:
        return found
    by_name = {p.stem: p for p in found}
    missing = [n for n in names if n.removesuffix(".ipynb") not in by_name]
    if missing:
        raise SystemExit(f"examples.run: no notebook {missing[0]!r} in {HERE} "
                         f"(there are: {', '.join(by_name)})")
    return [by_name[n.removesuffix(".ipynb")] for n in names]


def parameters_index(nb) -> int:
    """The index of the cell tagged ``parameters``: it must be the notebook's first code cell."""
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    tagged = [i for i in code if "parameters" in nb.cells[i].get("metadata", {}).get("tags", [])]
    if tagged != code[:1]:
        raise ValueError("the first code cell (and only it) must be tagged 'parameters'")
    return tagged[0]


def small_parameters(nb) -> dict:
    """The sizes a notebook runs with in the tests: its metadata ``attnlab.small``, a dict of
    parameter names (of the parameters cell) to values."""
    small = nb.metadata.get("attnlab", {}).get("small")
    if not isinstance(small, dict) or not small:
        raise ValueError("the notebook's metadata has no attnlab.small (the test sizes)")
    return dict(small)


def execute(path: Path, *, overrides: dict | None = None, cwd: Path | None = None,
            timeout: int = 1800, kernel: list[str] | None = None):
    """Run the notebook at ``path`` in a new kernel (working directory ``cwd``) and return it
    with its outputs. ``overrides`` (name -> value) are assigned in a cell after the parameters
    cell. ``kernel``: the command that starts the kernel, in place of the python3 kernel's
    ``python -m ipykernel_launcher`` (the tests start theirs from a fork server); it gets the
    same arguments. Raises ``nbclient.exceptions.CellExecutionError`` on the first cell that
    fails."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    at = parameters_index(nb)
    if overrides:
        code = "\n".join(f"{name} = {value!r}" for name, value in overrides.items())
        cell = nbformat.v4.new_code_cell("# injected by examples.run: smaller sizes\n" + code)
        cell.metadata["tags"] = ["injected-parameters"]
        nb.cells.insert(at + 1, cell)
    with tempfile.TemporaryDirectory(prefix="attnlab-notebook-") as tmp:
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                km=kernel_manager(kernel) if kernel else None,
                                resources={"metadata": {"path": str(cwd or tmp)}})
        client.execute(cleanup_kc=True)  # the kernel is shut down, whoever made its manager
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = coalesce_streams(cell.outputs)
    return nb


def kernel_manager(command: list[str]):
    """A manager of the python3 kernel whose process is started with ``command`` in place of
    the kernel spec's ``python -m ipykernel_launcher``."""
    from jupyter_client.manager import AsyncKernelManager

    manager = AsyncKernelManager(kernel_name="python3")
    spec = manager.kernel_spec
    launcher = spec.argv.index("ipykernel_launcher")  # python -m ipykernel_launcher -f {...}
    spec.argv = [*command, *spec.argv[launcher + 1:]]
    return manager


def coalesce_streams(outputs: list) -> list:
    """Consecutive outputs of one stream (stdout or stderr) joined into one, as Jupyter shows
    them: a cell that prints piece by piece (``print(..., end="", flush=True)``) is one block
    of text in the saved notebook, not one output per piece."""
    merged: list = []
    for out in outputs:
        last = merged[-1] if merged else None
        if (out.get("output_type") == "stream" and last is not None
                and last.get("output_type") == "stream" and last.get("name") == out.get("name")):
            last["text"] += out["text"]
        else:
            merged.append(out)
    return merged


def saved_attention_pages(nb) -> list[tuple[int, dict]]:
    """(cell index, output) of each attention page (``AttentionView``) a notebook's outputs
    hold, the page's HTML in ``output.data["text/html"]``."""
    return [(index, output) for index, cell in enumerate(nb.cells)
            if cell.cell_type == "code" for output in cell.outputs
            if "attnlab-view-" in output.get("data", {}).get("text/html", "")]


def page_in_frame(frame: str) -> str:
    """The page (an HTML document) a saved frame shows: its ``srcdoc``, unescaped."""
    return html.unescape(frame.split('srcdoc="', 1)[1].split('"', 1)[0])


def todays_view(frame: str):
    """Today's ``AttentionView`` of the data the saved ``frame``'s page holds.

    Raises:
        ValueError: if that data does not have the layout today's page reads (a full run of
            the notebook renews it).
    """
    from attnlab.explorer import AttentionView, read_data

    return AttentionView(read_data(page_in_frame(frame)))


def renew_pages(path: Path, *, save: bool = True) -> int:
    """Render each attention page the notebook at ``path`` shows again from its own saved data
    with today's package (its frame keeps its id); write the notebook if one changed and
    ``save``. Returns how many pages changed. Raises ``ValueError`` naming the cell whose data
    today's page cannot read."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    changed = 0
    for index, output in saved_attention_pages(nb):
        saved = output.data["text/html"]
        try:
            view = todays_view(saved)
        except ValueError as e:
            raise ValueError(f"{path.name}, cell {index}: its saved attention data does not fit "
                             f"today's page ({e}): run the whole notebook, python -m "
                             f"examples.run {path.stem}") from None
        today = FRAME_ID.sub(FRAME_ID.search(saved).group(0), view._repr_html_())
        if today != saved:
            output.data["text/html"] = today
            changed += 1
    if changed and save:
        nbformat.write(nb, path)
    return changed


def main(argv: list[str] | None = None) -> int:
    import nbformat

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", help="notebooks to run (default: all)")
    p.add_argument("--check", action="store_true", help="run them, save nothing")
    p.add_argument("--small", action="store_true",
                   help="with the tests' sizes (implies --check: small outputs are not saved)")
    p.add_argument("--pages", action="store_true",
                   help="run nothing: render their attention pages again from the data saved in "
                        "them, with today's attnlab (seconds; a change of the pages' data "
                        "layout needs a full run)")
    args = p.parse_args(argv)
    if args.pages and args.small:
        p.error("--pages runs no cell: it takes no --small")
    args.check = args.check or args.small
    if args.pages:
        return main_pages(notebooks(args.names), save=not args.check)
    for path in notebooks(args.names):
        start = time.perf_counter()
        small = small_parameters(nbformat.read(path, as_version=4)) if args.small else None
        nb = execute(path, overrides=small)
        if not args.check:
            nbformat.write(nb, path)
        print(f"{path.name}: ran in {time.perf_counter() - start:.0f} s"
              + ("" if args.check else ", outputs saved"), flush=True)
    return 0


def main_pages(paths: list[Path], *, save: bool) -> int:
    """``--pages``: renew the attention pages of ``paths``; 2 with one line on a page whose
    data today's page cannot read."""
    for path in paths:
        try:
            changed = renew_pages(path, save=save)
        except ValueError as e:
            print(f"examples.run: {e}", file=sys.stderr)
            return 2
        verb = "renewed" if save else "stale"
        print(f"{path.name}: {changed} attention page{'s' * (changed != 1)} {verb}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
