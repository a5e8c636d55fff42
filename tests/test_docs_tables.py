"""A table on a page ends where its writer meant it to: in Markdown a table runs until a
blank line, so a paragraph written right under its last row is drawn as more rows of the
table, its words cut into the first column (docs/translation.md's comparison with a
torch.nn.Transformer baseline was three rows of its results table)."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def lines_run_into_a_table(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each line of text right under a table's last row, outside
    fenced code blocks."""
    found, fenced = [], False
    lines = text.split("\n")
    for number, (line, below) in enumerate(zip(lines, lines[1:]), start=2):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if (not fenced and line.startswith("|") and below.strip()
                and not below.startswith("|")):
            found.append((number, below))
    return found


def test_no_paragraph_runs_into_the_table_above_it():
    found = [f"{page.relative_to(ROOT)}:{number}: {line[:60]}" for page in PAGES
             for number, line in lines_run_into_a_table(page.read_text(encoding="utf-8"))]
    assert not found, "a line right under a table (put a blank line between):\n" + "\n".join(found)


def test_the_check_sees_a_paragraph_under_a_table_and_not_a_table_in_code():
    assert lines_run_into_a_table("| a |\n|---|\n| 1 |\nText.\n") == [(4, "Text.")]
    assert lines_run_into_a_table("| a |\n|---|\n| 1 |\n\nText.\n") == []
    assert lines_run_into_a_table("```\n| a |\nnot a table\n```\n") == []
