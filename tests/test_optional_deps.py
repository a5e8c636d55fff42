"""What a user who installs attnlab with pip, without extras or with one of them, meets: every
install command attnlab prints or its pages show names an extra that pyproject.toml declares,
in a form that every shell takes; the README says how to install with pip; the optional
packages stay unimported until a command needs one."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11 on; the rules are the same on 3.10

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS = PYPROJECT["project"]["optional-dependencies"]
# `pip install attnlab[jets]`, quoted or not, in a message, a docstring or a page
_NAMES = r"[a-z][a-z0-9_-]*(?:,[a-z][a-z0-9_-]*)*"  # hf, or dev,jets,docs
_EXTRA = re.compile(r"""(?P<pip>pip install (?:--upgrade |-e )?)?(?P<quote>['"]?)"""
                    rf"""(?:attnlab|(?<=[\s'"])\.)\[(?P<names>{_NAMES})\]""")


def _texts():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [*pages, *sorted((ROOT / "attnlab").rglob("*.py"))]


def _named_extras():
    """(file, line, the match) for every ``attnlab[NAME]`` of the code and the pages."""
    for path in _texts():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in _EXTRA.finditer(line):
                yield f"{path.relative_to(ROOT)}:{n}", m


def test_every_extra_named_exists_and_every_pip_command_quotes_it():
    """zsh, macOS's shell, reads an unquoted ``attnlab[jets]`` as a file pattern and stops with
    'no matches found': the command a message gives must run as it is pasted."""
    named = list(_named_extras())
    assert named, "no install command found: the pattern no longer matches the messages"
    for where, m in named:
        for name in m["names"].split(","):
            assert name in EXTRAS, f"{where}: extra {name!r} is not in pyproject.toml"
        if m["pip"]:
            assert m["quote"], f"{where}: {m[0]!r} is not quoted (zsh: no matches found)"


def test_the_readme_says_how_to_install_with_pip_and_names_every_extra():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install torch==2.13.0" in text  # pyproject.toml's torch comment points here
    # PyPI's Linux torch is the CUDA build: a CPU-only machine is shown PyTorch's CPU index
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in text
    in_readme = {name for m in _EXTRA.finditer(text) for name in m["names"].split(",")}
    assert set(EXTRAS) <= in_readme, f"extras the README does not name: {set(EXTRAS) - in_readme}"


def test_the_version_is_declared_once():
    """``attnlab --version`` prints ``attnlab.__version__``; the installed metadata reads the
    same attribute, so the two cannot drift apart."""
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project.get("dynamic", [])
    dynamic = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "attnlab.__version__"}


# a fresh interpreter in which no optional package can be imported, as in a plain install
_BLOCKED = """
import importlib.abc, sys
blocked = set(sys.argv[1].split(","))
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Blocker())
import attnlab, attnlab.nn, attnlab.models, attnlab.tokenizers, attnlab.interop
from attnlab.cli import main
try:
    main(["--version"])
except SystemExit as e:
    assert e.code == 0, e.code
print(sorted(set(m.split(".")[0] for m in sys.modules) & blocked))
"""


def _import_names(requirement: str) -> str:
    name = re.match(r"[A-Za-z0-9_.-]+", requirement)[0].lower().replace("-", "_")
    return {"pythia8mc": "pythia8mc", "pyyaml": "yaml", "scikit_learn": "sklearn"}.get(name, name)


@pytest.mark.slow
def test_import_attnlab_and_its_version_need_no_optional_package():
    optional = {_import_names(r) for reqs in EXTRAS.values() for r in reqs}
    optional -= {_import_names(r) for r in PYPROJECT["project"]["dependencies"]}
    res = subprocess.run([sys.executable, "-c", _BLOCKED, ",".join(sorted(optional))],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [f"attnlab {_version()}", "[]"], res.stdout


def _version() -> str:
    import attnlab

    return attnlab.__version__
