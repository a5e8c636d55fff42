"""mkdocs hooks of the docs site (mkdocs.yml).

Links to the code: the concept pages link to the code and tests they describe
(``../attnlab/nn/blocks.py``), which live outside ``docs/``. Such a link works on a code host;
for the site, each linked file that exists is copied to ``source/<its path>`` and the link
pointed there. A link to a file that does not exist is left as it is, so the strict build still
fails on it.

Formulas: the site must work offline, so no MathJax is fetched. Every formula — ``$...$`` and
``$$...$$`` of the pages (pymdownx.arithmatex) and of the notebooks' markdown cells — is turned
into MathML when the site is built (latex2mathml), which browsers draw themselves. A formula
that cannot be converted is a warning, so the strict build fails on it.
"""
from __future__ import annotations

import html
import json
import logging
import os
import re
from pathlib import Path

from latex2mathml.converter import convert as latex_to_mathml
from markdown.extensions.toc import nest_toc_tokens
from mkdocs.structure.files import File
from mkdocs.structure.toc import get_toc

ROOT = Path(__file__).resolve().parent
LINK = re.compile(r"(\]\()([^)#\s]+)([#)\s])")
SOURCE = "source"


def _outside_target(page_dir: Path, link: str, docs: Path) -> Path | None:
    """The repository file a relative link of a page points at, when it is outside docs/."""
    if "://" in link or link.startswith(("/", "mailto:")):
        return None
    seen = Path(os.path.normpath(page_dir / link))  # as the site sees it: symlinks kept
    if docs in seen.parents:
        return None
    target = seen.resolve()
    if not target.is_file() or ROOT not in target.parents:
        return None
    return target


def on_files(files, config):
    docs = Path(config["docs_dir"]).resolve()
    wanted = set()
    for path in docs.rglob("*.md"):  # rglob keeps the symlinked examples/ under docs/
        for match in LINK.finditer(path.read_text(encoding="utf-8")):
            target = _outside_target(path.parent, match.group(2), docs)
            if target is not None:
                wanted.add(target)
    for target in sorted(wanted):
        uri = f"{SOURCE}/{target.relative_to(ROOT).as_posix()}"
        files.append(File.generated(config, uri, abs_src_path=str(target)))
    return files


def on_page_markdown(markdown, page, config, files):
    docs = Path(config["docs_dir"]).resolve()
    page_dir = (docs / page.file.src_uri).parent

    def point(match):
        target = _outside_target(page_dir, match.group(2), docs)
        if target is None:
            return match.group(0)
        copy = docs / SOURCE / target.relative_to(ROOT)
        return match.group(1) + os.path.relpath(copy, page_dir) + match.group(3)

    return separate_lists(plain_fences(LINK.sub(point, markdown)))


# ---- code blocks ---------------------------------------------------------------------------------

# an opening fence with words after its language: ```console slow, ```python norun,
# ```yaml file=small.yaml (what tests/test_docs_examples.py reads)
MARKED_FENCE = re.compile(r"^([ \t]*(?:`{3,}|~{3,})[\w+-]+)[ \t]+[^`{\n][^`\n]*$", re.M)


def plain_fences(markdown: str) -> str:
    r"""Opening fences with their language alone, as the site needs them.

    The words after a block's language are for the docs test (``slow``, ``norun``,
    ``file=NAME``). Python-Markdown reads such a line as text, so the block's closing fence
    would open a code block that runs on over the prose after it.

    Examples:
        >>> plain_fences("```console slow\n$ attnlab train lm\n```")
        '```console\n$ attnlab train lm\n```'
        >>> plain_fences("```yaml file=small.yaml\nseed: 1\n```")
        '```yaml\nseed: 1\n```'
    """
    return MARKED_FENCE.sub(r"\1", markdown)


# ---- lists ----------------------------------------------------------------------------------------

LIST_ITEM = re.compile(r"([-*+]|1[.)])\s")   # what may start a list right after a paragraph line


def separate_lists(markdown: str) -> str:
    r"""A blank line before a list that follows a line of text directly.

    The pages are written for a code host, where (as in CommonMark) a list may start right
    under a paragraph; Python-Markdown, which builds the site, needs a blank line there and
    would otherwise run the items into the paragraph. Only what CommonMark reads as a list is
    separated: a bullet, or an ordered list that starts at 1. Code blocks are left alone.

    Examples:
        >>> separate_lists("Two kinds:\n- one\n- two\n")
        'Two kinds:\n\n- one\n- two\n'
        >>> separate_lists("in the year\n2019. Then\n")  # not a list on a code host either
        'in the year\n2019. Then\n'
    """
    out: list[str] = []
    fence = None
    for line in markdown.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            fence = None if fence and stripped.startswith(fence) else (fence or stripped[:3])
        elif fence is None and out and LIST_ITEM.match(line):
            previous = out[-1]
            if previous.strip() and not previous[0].isspace() and not LIST_ITEM.match(previous) \
                    and not re.match(r"\d+[.)]\s|[#|>]", previous):
                out.append("")
        out.append(line)
    return "\n".join(out)


# ---- a notebook's contents ----------------------------------------------------------------------

# a heading of a notebook's markdown cell as nbconvert writes it, with its permalink
NOTEBOOK_HEADING = re.compile(r'<h([1-6]) id="([^"]+)">(.*?)<a class="anchor-link"', re.S)


def notebook_contents(page_html: str) -> list[dict]:
    """The contents of a notebook's page, read from its headings as the page shows them.

    mkdocs-jupyter makes a notebook's contents from a markdown copy of it that drops a
    heading's code (``## 1. GPT-2 → attnlab `CausalLM` `` is listed as "1. GPT-2 → attnlab"),
    so the entry was cut and its link led to an anchor no heading has. The headings' own ids
    and text are the ones the contents must point at.

    Examples:
        >>> page = ('<h1 id="pretrained">Pretrained<a class="anchor-link" href="#">¶</a></h1>'
        ...         '<h2 id="1-gpt-2-attnlab-causallm">1. GPT-2 → attnlab <code>CausalLM</code>'
        ...         '<a class="anchor-link" href="#1-gpt-2-attnlab-causallm">¶</a></h2>')
        >>> [(t["id"], t["name"], len(t["children"])) for t in notebook_contents(page)]
        [('pretrained', 'Pretrained', 1)]
        >>> notebook_contents(page)[0]["children"][0]["name"]
        '1. GPT-2 → attnlab CausalLM'
    """
    tokens = [{"level": int(level), "id": html.unescape(anchor), "name": _text(inner),
               "children": []} for level, anchor, inner in NOTEBOOK_HEADING.findall(page_html)]
    return nest_toc_tokens(tokens)


def _text(fragment: str) -> str:
    """A heading's HTML as the contents' entry, which the theme inserts as it is: tags dropped,
    its text kept escaped (a heading's `` `<pad>` `` would be a ``<pad>`` element), as
    Markdown's own contents are.

    Examples:
        >>> _text('Q &amp; A <code>&lt;pad&gt;</code> "x"')
        'Q &amp; A &lt;pad&gt; "x"'
    """
    return html.escape(html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip(), quote=False)


def on_page_content(output, page, config, files):
    if page.file.src_uri.endswith(".ipynb"):
        page.toc = get_toc(notebook_contents(output))
        # the theme's name for a heading's permalink: its search leaves the "¶" out of the
        # section's title ("1. Reversal¶" was listed), and it is drawn as the other pages' are
        output = output.replace('<a class="anchor-link" ', '<a class="headerlink" ')
    return output


# ---- formulas -----------------------------------------------------------------------------------

log = logging.getLogger("mkdocs.hooks.math")
ARITHMATEX = re.compile(r'<(span|div) class="arithmatex">\\[(\[](.*?)\\[)\]]</\1>', re.S)
MARKDOWN_CELL = re.compile(r'(<div class="jp-RenderedHTMLCommon jp-RenderedMarkdown '
                           r'jp-MarkdownOutput"[^>]*>)(.*?)(</div>)', re.S)
CELL_MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$\n]+?)\$", re.S)
CODE = re.compile(r"(<(pre|code)\b.*?</\2>)", re.S)
NAV_LABEL = re.compile(r'(<span class="md-ellipsis">)(.*?)(</span>)', re.S)  # e.g. the contents
MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.S)


def mathml(latex: str, display: bool, where: str) -> str | None:
    """``latex`` (as it stands in the HTML, entities escaped) as MathML; None, with a warning
    naming the page and the formula, when it cannot be converted."""
    source = html.unescape(latex).strip()
    try:
        return latex_to_mathml(source, display="block" if display else "inline")
    except Exception as error:  # latex2mathml raises its own errors and plain ones
        log.warning("%s: cannot render the formula %r: %s", where, source, error)
        return None


def _cell_math(text: str, where: str) -> str:
    def one(match):
        display = match.group(1) is not None
        return mathml(match.group(1) if display else match.group(2), display, where) or match.group(0)

    # code spans and blocks keep their dollars: only prose is mathematics
    return "".join(part if CODE.fullmatch(part) else CELL_MATH.sub(one, part)
                   for part in _split_keeping_code(text))


def _split_keeping_code(text: str) -> list[str]:
    """``text`` cut into prose and whole <pre>/<code> elements, in order."""
    parts, at = [], 0
    for match in CODE.finditer(text):
        parts += [text[at:match.start()], match.group(1)]
        at = match.end()
    return parts + [text[at:]]


def on_post_page(output, page, config):
    where = page.file.src_uri
    output = ARITHMATEX.sub(
        lambda m: mathml(m.group(2), m.group(1) == "div", where) or m.group(0), output)
    if where.endswith(".ipynb"):
        output = MATHJAX.sub("", output)  # nothing to typeset, and nothing to fetch
        for part in (MARKDOWN_CELL, NAV_LABEL):  # a heading's formula is in the contents too
            output = part.sub(
                lambda m: m.group(1) + _cell_math(m.group(2), where) + m.group(3), output)
    return output


# ---- the search index ---------------------------------------------------------------------------

# TeX a search result's title can say in plain characters; any other command loses its backslash
TEX_SYMBOLS = {"cdot": "·", "times": "×", "top": "ᵀ", "in": "∈", "infty": "∞", "le": "≤",
               "ge": "≥", "alpha": "α", "beta": "β", "theta": "θ", "sigma": "σ", "mu": "μ"}
TEX_COMMAND = re.compile(r"\\([A-Za-z]+)")
TEX_SQRT = re.compile(r"\\sqrt\s*\{([^{}]*)\}")


def tex_text(latex: str) -> str:
    r"""A formula as plain text for where no formula can be drawn (a search result's title).

    Examples:
        >>> tex_text(r"\sqrt{d_k}"), tex_text(r"\alpha \cdot \sqrt{x + 1}")
        ('√d_k', 'α · √(x + 1)')
    """
    text = TEX_SQRT.sub(lambda m: "√" + (m.group(1) if re.fullmatch(r"[\w^]+", m.group(1))
                                         else f"({m.group(1)})"), latex)
    text = TEX_COMMAND.sub(lambda m: TEX_SYMBOLS.get(m.group(1), m.group(1)), text)
    return text.replace("{", "").replace("}", "").strip()


def on_post_build(config):
    """Search lists a section by its heading's text, read before the formulas are drawn: a
    notebook's "3. Why divide by $\\sqrt{d_k}$?" was listed with its TeX. Its formulas are
    listed as plain text ("√d_k")."""
    path = Path(config["site_dir"]) / "search" / "search_index.json"
    if not path.is_file():
        return
    index = json.loads(path.read_text(encoding="utf-8"))
    for doc in index.get("docs", []):
        doc["title"] = CELL_MATH.sub(lambda m: tex_text(m.group(1) or m.group(2)), doc["title"])
    path.write_text(json.dumps(index, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
