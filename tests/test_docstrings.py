"""The code's prose — docstrings and comments — cites no tracker tickets.

A docstring or comment states the rule and why it holds; the ticket that forced a change
belongs in the commit message, where ``git log`` and ``git blame`` find it, and "(#27)" tells a
reader of the code nothing they can act on. Measured numbers likewise live in
``benchmarks/RESULTS.md``, with the machine and command that gave them, and the code names the
section (that is not checked here: a number in prose is too often not a measurement).

Scanned: every Python file under attnlab/, benchmarks/ and examples/ (its comments, and its
docstrings: every string that stands alone as a statement), and the comments of the explorer's
JavaScript and CSS. Code and ordinary strings are not prose and are not scanned, so a colour
such as ``"#1f77b4"`` or a ``# noqa`` never counts; the pattern itself is tested below.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("attnlab", "benchmarks", "examples")

# Files still being moved by other changes, which clean their prose as they move them. This
# list only shrinks: once those changes are merged it is emptied, and a file is never added
# to it to let a new ticket reference in.
NOT_YET_CLEANED: tuple[str, ...] = ()  # every move is merged

# A ticket: "#27", "(#8)", "#27 item 11", "issue 9", "issue #17", "Issues #9 and #10". Not a
# ticket: a colour ("#1f77b4": hex letters follow), an HTML entity ("&#8212;"), a URL's anchor
# ("page.html#12", "#L12"), a "# noqa" or "#:" comment marker (no digit follows the "#").
TICKET = re.compile(r"(?<![\w&/#])#\d+(?![\w-])|\bissues?\s+#?\d+\b", re.IGNORECASE)


def _python_prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and every line of every docstring of ``source``."""
    prose = [(tok.start[0], tok.string)
             for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            lines = source.splitlines()[node.lineno - 1:node.end_lineno]
            prose += [(node.lineno + i, line) for i, line in enumerate(lines)]
    return prose


def _web_prose(source: str, *, line_comments: bool) -> list[tuple[int, str]]:
    """(line, text) of the comments of a CSS file (``/* */``) or a script (also ``//``, but
    not the ``//`` of a URL)."""
    pattern = r"/\*.*?\*/" + (r"|(?<![:\"'\\])//[^\n]*" if line_comments else "")
    prose = []
    for match in re.finditer(pattern, source, re.DOTALL):
        first = source.count("\n", 0, match.start()) + 1
        prose += [(first + i, line) for i, line in enumerate(match.group().splitlines())]
    return prose


def _prose(path: Path) -> list[tuple[int, str]]:
    source = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return _python_prose(source)
    return _web_prose(source, line_comments=path.suffix == ".js")


def _scanned_files() -> list[Path]:
    files = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            name = path.relative_to(ROOT).as_posix()
            if (path.suffix in (".py", ".js", ".css") and path.is_file()
                    and not name.startswith(NOT_YET_CLEANED)):
                files.append(path)
    return files


@pytest.mark.slow
def test_no_ticket_numbers_in_docstrings_or_comments():
    found = [f"{path.relative_to(ROOT).as_posix()}:{line}: {text.strip()}"
             for path in _scanned_files()
             for line, text in _prose(path) if TICKET.search(text)]
    assert not found, ("a ticket number in the code's prose: say the rule and its reason, and "
                       "cite the ticket in the commit message instead:\n" + "\n".join(found))


def test_the_scan_sees_this_package():
    """The scan is not vacuous: it reads the package's prose, comments of every kind included."""
    names = {path.relative_to(ROOT).as_posix() for path in _scanned_files()}
    assert {"attnlab/nn/attention.py", "attnlab/explorer/static/explorer.js",
            "attnlab/explorer/static/explorer.css"} <= names
    assert len(_prose(ROOT / "attnlab/nn/attention.py")) > 20


@pytest.mark.parametrize("text", [
    "# main() prints the prefix (#8)", "(issue #27: a fixed 760 px clipped the map)",
    "#27 item 11: --help promised", "Issue 9, part 1", "issues #9 and #10", "(#27, #28)",
    "before #9's renames"])
def test_a_ticket_is_found(text):
    assert TICKET.search(text)


@pytest.mark.parametrize("text", [
    "# noqa: E501", "#: the shape key", "color: #1f77b4", "'#ff7f0e'", "#0a0", "&#8212;",
    "docs/cli.md#threads", "https://github.com/o/r/blob/main/x.py#L12", "page.html#12",
    "# (B, H, T, T) weights", "an issue of memory", "8 heads, 12 layers", "C#"])
def test_what_is_not_a_ticket(text):
    assert not TICKET.search(text)


def test_prose_is_comments_and_docstrings_only():
    source = ('"""Module (#1)."""\n'
              'COLOUR = "#2"  # the tab colour (#3)\n'
              'def f():\n'
              '    """Doc (#4)."""\n'
              '    return "#5"\n')
    assert [text for _, text in _python_prose(source) if TICKET.search(text)] == [
        "# the tab colour (#3)", '"""Module (#1)."""', '    """Doc (#4)."""']
    script = 'const url = "https://x.org/a#6"; // drawn row by row (#7)\n/* wide\n (#8) */\n'
    assert [n for n, text in _web_prose(script, line_comments=True)
            if TICKET.search(text)] == [1, 3]
