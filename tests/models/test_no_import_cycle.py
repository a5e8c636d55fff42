"""No import circle among the modules of attnlab.models, counting every import statement,
those under ``if TYPE_CHECKING:`` and inside functions too: a module that names another for its
annotations only still ties the two together (and a type checker follows the loop)."""
import ast
from pathlib import Path

MODELS = Path(__file__).resolve().parents[2] / "attnlab" / "models"


def _absolute(node: ast.ImportFrom) -> str:
    """The module an import-from names, read from within attnlab.models."""
    anchor = ["attnlab", "models"][: max(0, 3 - node.level)] if node.level else []
    return ".".join([*anchor, *([node.module] if node.module else [])])


def imported_models(source: str, modules: set[str]) -> set[str]:
    """The modules of ``modules`` (names within attnlab.models) that ``source``, a module of
    attnlab.models, imports, wherever the import statement is (``if TYPE_CHECKING:`` too)."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = _absolute(node)
            package = base == "attnlab.models"  # from attnlab.models import x: x is a module
            names += [f"{base}.{a.name}" for a in node.names] if package else [base]
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    parts = [n.split(".") for n in names]
    return {p[2] for p in parts if p[:2] == ["attnlab", "models"] and len(p) > 2} & modules


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (module -> the modules it imports), or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return None
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if found := visit(nxt):
                return found
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        if found := visit(start):
            return found
    return None


def test_the_modules_of_models_import_each_other_one_way_only():
    files = {p.stem: p for p in MODELS.glob("*.py") if p.stem != "__init__"}
    graph = {name: imported_models(p.read_text(encoding="utf-8"), set(files))
             for name, p in files.items()}
    assert "configs" in graph["causal_lm"]  # the parser sees the imports
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_a_type_checking_import_closes_a_planted_cycle():
    lm = "from .generation import stream\n"
    generation = ("from typing import TYPE_CHECKING\n"
                  "if TYPE_CHECKING:\n    from .lm import LM\n")
    modules = {"lm", "generation"}
    graph = {"lm": imported_models(lm, modules),
             "generation": imported_models(generation, modules)}
    assert find_cycle(graph) == ["generation", "lm", "generation"]
    for spelled in ("from attnlab.models import lm\n", "import attnlab.models.lm as m\n",
                    "from ..models.lm import LM\n", "def f():\n    from . import lm\n"):
        assert imported_models(spelled, modules) == {"lm"}, spelled
    graph["generation"] = imported_models("from attnlab.models import other\n", modules)
    assert find_cycle(graph) is None
