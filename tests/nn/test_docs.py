"""The core library's docs pages: every snippet runs and prints what the page says it prints.

A snippet is a ```python block followed by a ```text block holding its exact output.
"""
import contextlib
import io
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = ["attention.md", "multihead.md", "masks.md", "blocks.md", "positional_encoding.md",
         "schedules.md"]
SNIPPET = re.compile(r"```python\n(.*?)```\n\n```text\n(.*?)```", re.S)


def _snippets():
    for page in PAGES:
        text = (DOCS / page).read_text()
        found = SNIPPET.findall(text)
        assert len(found) == text.count("```python"), f"{page}: a snippet without its output"
        for n, (code, output) in enumerate(found):
            yield pytest.param(page, code, output, id=f"{page}#{n}")


@pytest.mark.parametrize("page,code,output", list(_snippets()))
def test_snippet_prints_what_the_page_says(page, code, output):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(DOCS / page), "exec"), {})
    assert printed.getvalue() == output


def test_index_lists_every_page():
    index = (DOCS / "index.md").read_text()
    for page in PAGES:
        assert f"({page})" in index
