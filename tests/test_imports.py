"""The package's import graph: imports point down the layers that docs/architecture.md shows, and
no module imports itself back.

An import counts wherever it is written, at module level or inside a function (a function-local
import that climbs up or closes a loop is a knot that fails at import time once someone moves it
to the top), except under ``if TYPE_CHECKING:``, which never runs. A literal string that names
an attnlab module counts too, as it is imported by that name somewhere: a dotted name such as
``"attnlab.tasks.lm"`` anywhere in the code, and in ``import_module`` a relative name
(``".seq2seq", __name__``) or an f-string's fixed start (``f"attnlab.commands.{name}"`` names
``attnlab.commands``).
"""
import ast
import functools
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "attnlab"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"

# Imports that point up the layers today, each with the reason it is still there. The layer
# test fails on any other, and on one of these once it is gone, so that its line goes too.
UPWARD_ALLOWED: dict[tuple[str, str], str] = {}

def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _owner(name: str, modules: set[str]) -> str | None:
    """``name`` if it is a module, else the nearest enclosing module (``import a.b.C``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _resolve(relative: str, anchor: str) -> str:
    """An absolute module name: ``relative`` (``..x.y``) read from the package ``anchor``."""
    level = len(relative) - len(relative.lstrip("."))
    if not level:
        return relative
    parts = anchor.split(".")
    parts = parts[: len(parts) - (level - 1)]
    rest = relative[level:]
    return ".".join([*parts, rest] if rest else parts)


class _Imports(ast.NodeVisitor):
    """The attnlab modules that one module's source imports: ``real`` by its import statements,
    ``named`` by literal strings (see the module docstring)."""

    def __init__(self, name: str, is_package: bool, modules: set[str]) -> None:
        self.name, self.modules = name, modules
        self.package = name if is_package else name.rpartition(".")[0]
        self.real: set[str] = set()
        self.named: set[str] = set()

    def add(self, found: set[str], name: str) -> None:
        owner = _owner(name, self.modules)
        if owner and owner != self.name:
            found.add(owner)

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node):
            self.generic_visit(node)
            return
        for statement in node.orelse:  # only the body is for the type checker
            self.visit(statement)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.add(self.real, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = _resolve("." * node.level + (node.module or ""), self.package)
        for alias in node.names:
            self.add(self.real, f"{base}.{alias.name}")

    def visit_Constant(self, node: ast.Constant) -> None:
        # a dotted name only: a bare "attnlab" is the program's name (``prog="attnlab"``)
        if isinstance(node.value, str) and "." in node.value and node.value in self.modules:
            self.add(self.named, node.value)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if called == "import_module" and node.args:
            self.add_string_import(node.args[0], node.args[1:])
        self.generic_visit(node)

    def add_string_import(self, name: ast.expr, package: list[ast.expr]) -> None:
        if isinstance(name, ast.JoinedStr) and name.values:
            name = name.values[0]  # an f-string: its fixed start
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            return
        text = name.value.rstrip(".") if not name.value.startswith(".") else name.value
        if text.startswith("."):
            anchor = getattr(package[0], "id", None) if package else None
            if anchor not in ("__name__", "__package__"):
                return
            text = _resolve(text, self.name if anchor == "__name__" else self.package)
        self.add(self.named, text)


def _imports_of(source: str, name: str, is_package: bool,
                modules: set[str]) -> tuple[set[str], set[str]]:
    """(real, named): the modules of ``modules`` that module ``name``'s source imports."""
    visitor = _Imports(name, is_package, modules)
    visitor.visit(ast.parse(source))
    return visitor.real, visitor.named


@functools.lru_cache(maxsize=1)
def _graphs() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """The package's (real, named) import graphs: module → the modules it imports."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(files)
    found = {name: _imports_of(path.read_text(), name, path.name == "__init__.py", modules)
             for name, path in files.items()}
    return ({name: real for name, (real, _) in found.items()},
            {name: named for name, (_, named) in found.items()})


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of modules, or None. A package's own ``__init__``
    importing its submodules is how packages re-export, so an edge from a submodule up to its
    enclosing package's __init__ is followed only when the package is not its ancestor."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def edges(node):
        return [m for m in graph.get(node, ()) if not node.startswith(m + ".")]

    def dfs(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges(node)):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := dfs(nxt)):
                return found
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := dfs(node)):
            return found
    return None


@pytest.mark.slow
def test_the_import_graph_has_no_cycle():
    real, named = _graphs()
    cycle = _cycle({m: real[m] | named[m] for m in real})
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle({"p": {"p.x"}, "p.x": {"p"}}) is None  # a submodule using its package


PLANTED = {  # a package p whose two modules use each other, one for real, the other for its
    # annotations only (a type-only import, which makes no circle)
    "p.lm": "from .generation import stream\n",
    "p.generation": (
        "from typing import TYPE_CHECKING\n"
        "import typing\n"
        "if TYPE_CHECKING:\n    from .lm import LM\n"
        "if typing.TYPE_CHECKING:\n    import p.lm\nelse:\n    import p.tables\n"
        "def stream(model: 'LM'):\n    from .cache import Cache\n"
        "    return import_module('p.plugins'), import_module(f'p.extra.{model}')\n"),
    "p.relative": "from importlib import import_module\nimport_module('.tables', __package__)\n",
}
PLANTED_MODULES = {"p", "p.lm", "p.generation", "p.cache", "p.tables", "p.plugins", "p.extra",
                   "p.relative"}


def test_imports_under_type_checking_do_not_count_and_those_in_functions_do():
    def imports(name, source=None):
        return _imports_of(source or PLANTED[name], name, False, PLANTED_MODULES)

    real, named = imports("p.generation")
    assert real == {"p.cache", "p.tables"}  # the function's import and the else branch's
    assert named == {"p.plugins", "p.extra"}
    assert imports("p.relative")[1] == {"p.tables"}
    graph = {name: imports(name)[0] for name in PLANTED}
    assert _cycle(graph) is None  # lm -> generation, and back only for the type checker
    in_function = PLANTED["p.generation"].replace("):\n", "):\n    from .lm import LM\n")
    graph["p.generation"] = imports("p.generation", in_function)[0]  # the same import, run
    assert _cycle(graph) == ["p.generation", "p.lm", "p.generation"]


def _layers(page: str) -> list[list[str]]:
    """The rows of the page's "Layers" table, lowest first, each as the modules and packages
    its first column names (``attnlab/nn`` is ``attnlab.nn``, ``attnlab/__init__.py`` is
    ``attnlab``)."""
    section = page.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]
    paths = [re.findall(r"`(attnlab/[^`]*)`", row.split("|")[1]) for row in rows]
    return [[_module_name(PACKAGE.parent / (p if p.endswith(".py") else p + "/__init__.py"))
             for p in row] for row in paths]


def _layer_of(module: str, layers: list[list[str]]) -> int | None:
    """The row that names ``module`` or its nearest enclosing package (``attnlab`` itself names
    only the package's own ``__init__``)."""
    best = None
    for i, row in enumerate(layers):
        for entry in row:
            if module == entry or (entry != "attnlab" and module.startswith(entry + ".")):
                if best is None or len(entry) > len(best[1]):
                    best = (i, entry)
    return best[0] if best else None


def _upward(graph: dict[str, set[str]], layers: list[list[str]]) -> set[tuple[str, str]]:
    """Every (importer, imported) of ``graph`` whose imported module sits in a higher layer.
    A module's enclosing packages do not count: Python imports them before it, whatever it
    names (``cli.py``'s ``from . import __version__``)."""
    found = set()
    for source, targets in graph.items():
        for target in targets:
            low, high = _layer_of(source, layers), _layer_of(target, layers)
            if not source.startswith(target + ".") and None not in (low, high) and high > low:
                found.add((source, target))
    return found


def test_the_layer_table_places_every_module_once():
    layers = _layers(ARCHITECTURE.read_text(encoding="utf-8"))
    real, _ = _graphs()
    entries = [entry for row in layers for entry in row]
    assert len(layers) > 5 and len(entries) == len(set(entries)), layers
    unplaced = sorted(m for m in real if _layer_of(m, layers) is None)
    assert not unplaced, f"docs/architecture.md's layer table places no row for {unplaced}"
    unknown = sorted(set(entries) - set(real))
    assert not unknown, f"docs/architecture.md's layer table names no module: {unknown}"


def test_no_module_imports_a_module_of_a_higher_layer():
    """Module level, inside functions and by name, as docs/architecture.md's table orders the
    layers (lowest row first)."""
    layers = _layers(ARCHITECTURE.read_text(encoding="utf-8"))
    real, named = _graphs()
    upward = _upward({m: real[m] | named[m] for m in real}, layers)
    shown = [f"{a} (row {_layer_of(a, layers) + 1}) imports {b} (row {_layer_of(b, layers) + 1})"
             for a, b in sorted(upward - set(UPWARD_ALLOWED))]
    assert not shown, "imports that climb up the layers:\n" + "\n".join(shown)
    gone = sorted(set(UPWARD_ALLOWED) - upward)
    assert not gone, f"these upward imports are gone: remove them from UPWARD_ALLOWED: {gone}"


def test_the_layer_check_finds_a_planted_upward_import():
    layers = [["attnlab.runs"], ["attnlab.nn"], ["attnlab.tasks"], ["attnlab"]]
    graph = {"attnlab.runs": {"attnlab.tasks"}, "attnlab.nn.attention": {"attnlab.runs"},
             "attnlab.tasks.lm": {"attnlab", "attnlab.nn"}, "attnlab": {"attnlab.tasks"}}
    assert _upward(graph, layers) == {("attnlab.runs", "attnlab.tasks")}


def test_models_import_neither_data_nor_tasks():
    """``attnlab/models`` is built from ``attnlab/nn`` and the layers below it: no reader of
    files, no task (the physics a jet model reads is ``models/jet_physics.py``). The layer test
    says this too; this one names the two rows that once leaked in."""
    real, named = _graphs()
    leaks = sorted((m, t) for m in real if m.startswith("attnlab.models")
                   for t in real[m] | named[m]
                   if t.startswith(("attnlab.data", "attnlab.tasks", "attnlab.tokenizers")))
    assert not leaks, f"models/ imports data or tasks: {leaks}"


def test_the_tasks_are_reached_by_real_imports():
    """The registry imports every task package, and nothing names a task module by a string
    (a spec reaches its runtime by ``from . import runtime``)."""
    real, named = _graphs()
    by_name = sorted((m, t) for m in named for t in named[m] if t.startswith("attnlab.tasks"))
    assert not by_name, f"task modules reached by name: {by_name}"
    packages = {p.parent.name for p in (PACKAGE / "tasks").glob("*/spec.py")}
    assert len(packages) >= 7 and {f"attnlab.tasks.{p}" for p in packages} <= real["attnlab.tasks"]
    for p in packages:
        assert f"attnlab.tasks.{p}.runtime" in real[f"attnlab.tasks.{p}.spec"], p


def test_the_run_directory_layers_import_nothing_heavy():
    """What the table says of ``runs.py`` (and the rest of the bottom row) and ``loading.py``:
    importing them loads none of torch, numpy, yaml or safetensors, so a command can check a
    run directory before it pays for torch."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import attnlab.errors, attnlab.settings, attnlab.runs, attnlab.activation_names\n"
        "import attnlab.positional_names, attnlab.loading\n"
        "heavy = {'torch', 'numpy', 'yaml', 'safetensors'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr[-2000:]


MAX_FUNCTION_LINES = 60  # the package's "Done when" for function length


@pytest.mark.slow
def test_no_function_in_the_package_is_over_60_lines():
    """Counted from ``def`` to the function's last line, docstring included (decorators not);
    methods and nested functions count on their own (a nested one also counts in its parent)."""
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    where = path.relative_to(PACKAGE.parent)
                    long.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, (f"{len(long)} function(s) over {MAX_FUNCTION_LINES} lines:\n"
                      + "\n".join(long))


@pytest.mark.slow
def test_task_specs_are_light_and_a_flag_error_needs_no_torch():
    """Every task's spec module (``attnlab/tasks/NAME/spec.py``, which the registry imports)
    imports neither torch, numpy nor Lightning, so ``attnlab train TASK --help`` and a refused
    flag answer before torch loads; the part that imports torch is the package's ``runtime.py``."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from attnlab.tasks import TASKS, get_task\n"
        "from attnlab.cli import main\n"
        "for name in TASKS: get_task(name)\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'numpy', 'lightning', 'lightning_fabric'})\n"
        "assert not heavy, f'importing the task specs loaded {heavy}'\n"
        "try:\n"
        "    main(['train', 'reverse', '--seq-len', '0'])\n"
        "except SystemExit as e:\n"
        "    assert e.code == 2, e.code\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'numpy', 'lightning', 'lightning_fabric'})\n"
        "assert not heavy, f'refusing a flag loaded {heavy}'\n"
        "print('light')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "light", out.stderr[-2000:]
    assert "--seq-len must be a positive integer, got 0" in out.stderr
