"""A page of docs/ points a reader at another page by a link the site can follow.

On the site a path in the text ("see docs/scale.md, "Memory"") is a dead end: the reader has
to find the page in the navigation and the section in it. Every such mention is a link, to the
section where the text names one (the strict build checks that the page and anchor exist)."""
from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
FENCED = re.compile(r"^(`{3,}|~{3,}).*?^\1", re.M | re.S)
PAGES = sorted(DOCS.glob("*.md"))


def mentions_as_text(text: str) -> list[str]:
    """The mentions of a page of docs/ (docs/NAME.md) outside code blocks and link targets."""
    prose = FENCED.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    found = []
    for m in re.finditer(r"docs/([a-z_]+)\.md", prose):
        if prose[:m.start()].endswith("](") or not (DOCS / f"{m.group(1)}.md").exists():
            continue
        found.append(f"line {prose.count(chr(10), 0, m.start()) + 1}: {m.group(0)}")
    return found


def test_a_page_names_another_page_by_a_link():
    unlinked = [f"{page.name} {where}" for page in PAGES for where in mentions_as_text(
        page.read_text(encoding="utf-8"))]
    assert not unlinked, "write these as links, e.g. [scale.md](scale.md):\n" + "\n".join(unlinked)


def test_the_check_tells_a_mention_from_a_link_and_from_code():
    text = ("see docs/scale.md, or [scale.md](scale.md) or [x](docs/scale.md)\n"
            "```console\n$ cat docs/masks.md\n```\n(`docs/masks.md`)\n")
    assert mentions_as_text(text) == ["line 1: docs/scale.md", "line 5: docs/masks.md"]
