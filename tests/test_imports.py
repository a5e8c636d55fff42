"""The package's import graph: no cycles between attnlab's modules (issue #9).

Every ``import``/``from ... import`` of an attnlab module counts — at module level or inside a
function, since a function-local import that closes a cycle is a knot waiting to fail at
import time once someone moves it up — except those under ``if TYPE_CHECKING:``, which never
run.
"""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "attnlab"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The attnlab modules ``path`` imports (a name imported from a package counts as its
    submodule when there is one)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names if a.name in modules)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (child.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    if sub in modules:
                        found.add(sub)
                    elif base in modules:
                        found.add(base)
            visit(child)

    visit(ast.parse(path.read_text()))
    found.discard(name)
    return found


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: _imports(path, set(files)) for name, path in files.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of modules, or None. A package's own ``__init__``
    importing its submodules is how packages re-export, so an edge from a submodule up to its
    enclosing package's __init__ is followed only when the package is not its ancestor."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def edges(node):
        return [m for m in graph[node] if not node.startswith(m + ".")]

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


def test_the_import_graph_has_no_cycle():
    cycle = _cycle(_graph())
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle({"p": {"p.x"}, "p.x": {"p"}}) is None  # a submodule using its package


MAX_FUNCTION_LINES = 60  # issue #9 "Done when": no function in the package over 60 lines


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


def test_task_specs_are_light_and_a_flag_error_needs_no_torch():
    """Every task's spec module (the one ``attnlab.tasks.TASKS`` names) imports neither torch,
    numpy nor Lightning, so ``attnlab train TASK --help`` and a refused flag answer before
    torch loads; the heavy half lives in the module ``Task.runtime`` names (issue #9 part 5)."""
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
