"""``pytest --doctest-modules attnlab`` collects the package's doctests only: a function of
the package named ``test_*`` (classify's ``test_scores``, metrics of the test split) or a class
named ``Test*`` would be collected as a test and error for want of its arguments, unless it
says ``NAME.__test__ = False``. Read from the source (no module imported)."""
import ast
from pathlib import Path

import attnlab

PACKAGE = Path(attnlab.__file__).parent


def _collected(tree: ast.Module) -> set[str]:
    """Top-level functions and classes pytest's default patterns would collect."""
    return {node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.name.startswith("test")
            or isinstance(node, ast.ClassDef) and node.name.startswith("Test")}


def _marked(tree: ast.Module) -> set[str]:
    """Names given ``NAME.__test__ = False`` at the top level."""
    return {target.value.id for node in tree.body if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant) and node.value.value is False
            for target in node.targets if isinstance(target, ast.Attribute)
            and target.attr == "__test__" and isinstance(target.value, ast.Name)}


def test_no_function_of_the_package_is_collected_as_a_test():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if left := _collected(tree) - _marked(tree):
            found[str(path.relative_to(PACKAGE))] = sorted(left)
    assert found == {}
