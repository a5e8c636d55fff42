"""A table on a page ends where its writer meant it to: in Markdown a table runs until a
blank line, so a paragraph written right under its last row is drawn as more rows of the
table, its words cut into the first column (docs/translation.md's comparison with a
torch.nn.Transformer baseline was three rows of its results table)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A fence: three or more backticks or tildes, indented or not (a list item's block is).
FENCE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")


def fenced_lines(text: str) -> list[bool]:
    """For each line of ``text``, whether it belongs to a fenced code block (a fence included).

    As CommonMark has it, a block that opens with a fence of backticks or tildes closes only at
    a fence of the same character, at least as long, with nothing after it: a ``~~~`` block, or
    a ```````` block that shows a ```` ``` ```` line, stays open across those lines."""
    fenced, opening = [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if opening is None:
            if m and not (m[1][0] == "`" and "`" in m[2]):  # ``` `a` ``` is inline code
                opening = m[1]
            fenced.append(opening is not None)
            continue
        fenced.append(True)
        if m and m[1][0] == opening[0] and len(m[1]) >= len(opening) and not m[2].strip():
            opening = None
    return fenced


def lines_run_into_a_table(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each line of text right under a table's last row, outside
    fenced code blocks."""
    lines = text.split("\n")
    return [(number, below) for number, (line, below, fenced)
            in enumerate(zip(lines, lines[1:], fenced_lines(text)), start=2)
            if not fenced and line.startswith("|") and below.strip()
            and not below.startswith("|")]


def test_no_paragraph_runs_into_the_table_above_it():
    found = [f"{page.relative_to(ROOT)}:{number}: {line[:60]}" for page in PAGES
             for number, line in lines_run_into_a_table(page.read_text(encoding="utf-8"))]
    assert not found, "a line right under a table (put a blank line between):\n" + "\n".join(found)


def test_the_check_sees_a_paragraph_under_a_table_and_not_a_table_in_code():
    assert lines_run_into_a_table("| a |\n|---|\n| 1 |\nText.\n") == [(4, "Text.")]
    assert lines_run_into_a_table("| a |\n|---|\n| 1 |\n\nText.\n") == []
    assert lines_run_into_a_table("```\n| a |\nnot a table\n```\n") == []


def test_a_fence_closes_only_at_its_own_kind_and_length():
    """Each of these was wrong when any ``` line opened or closed a block: a table in a ~~~
    block was checked, a ``` line shown in a ```` block closed it, a ``` line in a ~~~ block
    opened one that hid the real table after it, and ```lang after a ``` line closed nothing."""
    code = "| a |\nnot a table\n"
    assert lines_run_into_a_table(f"~~~\n{code}~~~\n") == []
    assert lines_run_into_a_table(f"````markdown\n```\n{code}```\n````\n") == []
    assert lines_run_into_a_table(f"  ~~~~\n{code}  ~~~~\n") == []  # indented, in a list item
    table = "| a |\n|---|\n| 1 |\nText.\n"
    assert lines_run_into_a_table(f"~~~\n```\n~~~\n{table}") == [(7, "Text.")]
    assert lines_run_into_a_table(f"```\n```python\n{code}```\n{table}") == [(9, "Text.")]
    assert fenced_lines("a ``` `b` ``` c\n| a |") == [False, False]
