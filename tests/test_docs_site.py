"""The docs site: `make docs` builds docs/, the notebooks of examples/ and the API
reference with mkdocs in strict mode, so a broken link or a docstring that fails to render
fails here."""
from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}

pytestmark = pytest.mark.slow  # every notebook is converted to HTML


def mkdocs(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "mkdocs", *args], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    done = mkdocs("build", "--strict", "--site-dir", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_the_site_builds_strictly_with_every_page_and_notebook(site):
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")}
    assert pages <= {p.stem for p in site.glob("*.html")}
    notebooks = sorted((ROOT / "examples").glob("[0-9][0-9]_*.ipynb"))
    assert notebooks
    for nb in notebooks:
        assert (site / "examples" / f"{nb.stem}.html").is_file(), nb.name


def test_a_notebook_heading_with_markup_characters_is_listed_as_text_in_the_contents():
    """A notebook's contents entry is inserted into the page as it is: a heading
    ``## Q & A `<pad>` `` was listed un-escaped, a raw ``<pad>`` element in the page's
    contents where the reader should read "<pad>"."""
    import importlib.util

    from mkdocs.structure.toc import get_toc

    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "mkdocs_hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    page = ('<h2 id="q-a-pad">Q &amp; A <code>&lt;pad&gt;</code>'
            '<a class="anchor-link" href="#q-a-pad">¶</a></h2>')
    [entry] = get_toc(hooks.notebook_contents(page))
    assert entry.title == "Q &amp; A &lt;pad&gt;" and entry.url == "#q-a-pad"


def test_a_notebook_page_shows_its_committed_outputs(site):
    text = (site / "examples" / "01_attention_from_scratch.html").read_text(encoding="utf-8")
    assert "attnlab equals the hand computation: True" in text  # a printed output
    assert "data:image/png;base64" in text                       # a figure


def test_the_api_reference_is_generated_from_the_docstrings(site):
    text = (site / "api.html").read_text(encoding="utf-8")
    for name in ("MultiheadAttention", "scaled_dot_product", "CausalLM", "CosineWarmupScheduler",
                 "attention_view_of", "from_hf"):
        assert f'id="attnlab.' in text and name in text, name
    # a docstring's example is shown as code, not as text with brackets taken for links
    shown = html.unescape(re.sub(r"<[^>]+>", "", text))  # the text a reader sees
    assert ">>> window_mask(4, 1).int().tolist()[0]\n[1, 1, 0, 0]" in shown
    assert '<span class="gp">&gt;&gt;&gt; </span><span class="n">window_mask</span>' in text


def test_links_to_the_code_lead_to_a_copy_of_it(site):
    copy = site / "source" / "attnlab" / "nn" / "blocks.py"
    assert copy.read_text(encoding="utf-8") == (ROOT / "attnlab/nn/blocks.py").read_text(
        encoding="utf-8")
    assert 'href="source/attnlab/nn/blocks.py"' in (site / "blocks.html").read_text(
        encoding="utf-8")


def test_formulas_are_drawn_without_a_network(site):
    # the pages' and the notebooks' formulas are MathML, made at build time: none is left as
    # TeX for a script to typeset, and no page loads a script, style or image from the web
    pages = sorted(site.glob("*.html")) + sorted((site / "examples").glob("*.html"))
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert 'class="arithmatex"' not in text, page.name
        assert not re.search(r'<(script|link|img)[^>]*(src|href)="(https?:)?//', text), page.name
    schedules = (site / "schedules.html").read_text(encoding="utf-8")
    assert schedules.count("<math") >= 3 and "<mtable" in schedules  # the cases of f(e)
    notebook = (site / "examples" / "01_attention_from_scratch.html").read_text(encoding="utf-8")
    assert "MathJax" not in notebook
    assert "$$" not in notebook.split('id="1-a-soft-dictionary-look-up"')[1].split("In&nbsp;[3]")[0]
    assert re.search(r"Why divide by <math[^>]*>.*?<msqrt>", notebook)  # its heading, contents too
    assert "$ attnlab" in (site / "examples" / "03_translation.html").read_text(encoding="utf-8")


def test_lists_written_for_a_code_host_are_lists_on_the_site(site):
    # a list right under a line of text, and one nested by two spaces, as the pages write them
    history = (site / "history.html").read_text(encoding="utf-8")
    intro = history.split("The course tells the Transformer")[1].split("This page lets you")[0]
    assert intro.count("<li>") == 4 and "<ol>" in intro
    steps = (site / "architecture.html").read_text(encoding="utf-8").split("What a training")[-1]
    fit = steps.split("engine.fit")[1].split("The task evaluates")[0]
    parts = fit.split("<ul>")[1].split("</ul>")[0]
    assert parts.count("<li>") == 4  # the loop's parts: a list inside item 5
    assert "<li>" in steps.split("The task evaluates")[0][-60:]  # item 6 is an item of its own


def test_a_formula_that_cannot_be_drawn_fails_the_strict_build(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nFine: $x^2$. Broken: $\\left( x$.\n")
    done = build_alone(tmp_path, docs)
    assert done.returncode != 0
    assert "index.md: cannot render the formula '\\\\left( x'" in done.stderr


def build_alone(tmp_path, docs):
    """Build ``docs`` (a directory with index.md) with this site's settings and hooks."""
    config = tmp_path / "mkdocs.yml"
    config.write_text(f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: {docs}\n"
                      f"hooks: [{ROOT / 'mkdocs_hooks.py'}]\nnav: [index.md]\n"
                      "plugins: [search]\nexclude_docs: ''\n")
    return mkdocs("build", "--strict", "-f", str(config), "--site-dir", str(tmp_path / "site"),
                  cwd=tmp_path)


def test_a_block_marked_for_the_docs_test_is_a_code_block_on_the_site(tmp_path):
    # `slow`, `norun` and `file=` after a block's language are for tests/test_docs_examples.py;
    # Python-Markdown took such an opening line for text, so the block's closing line opened a
    # code block that swallowed the heading and prose after it (language_model.md's "The Llama
    # family's parts" had no anchor, and interop.md's links to it failed the strict build)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n```console slow\n$ attnlab train lm\n```\n\n"
                                   "## After the block\n\nProse, not code.\n\n"
                                   "```yaml file=small.yaml\nseed: 1\n```\n\nThe end.\n")
    done = build_alone(tmp_path, docs)
    assert done.returncode == 0, done.stderr[-2000:]
    page = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "```" not in page
    assert 'id="after-the-block"' in page and "<p>Prose, not code.</p>" in page
    assert "<p>The end.</p>" in page and page.count('<div class="highlight">') == 2


def test_a_broken_link_fails_the_strict_build(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    code = os.path.relpath(ROOT / "attnlab" / "nn" / "blocks.py", docs)
    (docs / "index.md").write_text(f"# Home\n\nSee [the layers]({code}) and "
                                   "[a page that is not there](missing.md).\n")
    done = build_alone(tmp_path, docs)
    assert done.returncode != 0
    assert "missing.md" in done.stderr
    assert "blocks.py" not in done.stderr  # the link to the code is not the broken one


def test_fences_stretch_around_fractions_and_sums_centre_their_limits(site, fresh_browser):
    """Chromium once drew softmax's parentheses small around the tall fraction (MathML's
    stretchy fences need an OpenType math font, which the site's stylesheet now names) and
    Σ's limits off-centre in notebook 06."""
    measure = """
        const box = (e) => e.getBoundingClientRect();
        const fences = [...document.querySelectorAll('mo[stretchy="true"]')]
          .filter((mo) => mo.nextElementSibling && mo.nextElementSibling.tagName === 'mfrac')
          .map((mo) => [box(mo).height, box(mo.nextElementSibling).height]);
        const centre = (e) => (box(e).left + box(e).right) / 2;
        const sums = [...document.querySelectorAll('math[display="block"] munderover')]
          .filter((u) => u.firstElementChild.textContent === '∑')
          .map((u) => [...u.children].map(centre));
        return {fences, sums};"""
    browser = fresh_browser
    for page, fences, sums in (("attention.html", 1, 0), ("examples/06_history.html", 0, 1)):
        browser.get((site / page).as_uri())
        got = browser.execute_script(measure)
        assert len(got["fences"]) >= fences and len(got["sums"]) >= sums, (page, got)
        for fence, fraction in got["fences"]:  # the parenthesis as tall as what it encloses
            assert fence >= 0.9 * fraction, (page, fence, fraction)
        for base, under, over in got["sums"]:  # the limits centred on the Σ
            assert abs(under - base) <= 1.5 and abs(over - base) <= 1.5, (page, base, under, over)


def test_a_notebooks_contents_lead_to_its_headings(site):
    """mkdocs-jupyter listed a heading without its code ("1. GPT-2 → attnlab" for "1. GPT-2 →
    attnlab `CausalLM`") and linked it to an anchor no heading had: a click in the contents
    went nowhere."""
    for page in sorted((site / "examples").glob("[0-9][0-9]_*.html")):
        text = page.read_text(encoding="utf-8")
        ids = set(re.findall(r'\sid="([^"]+)"', text))
        for anchor in re.findall(r'<a href="#([^"]+)" class="md-nav__link">', text):
            assert html.unescape(anchor) in ids, (page.name, anchor)
    pretrained = (site / "examples" / "07_pretrained.html").read_text(encoding="utf-8")
    entry = re.search(r'<a href="#1-gpt-2-attnlab-causallm" class="md-nav__link">(.*?)</a>',
                      pretrained, re.S)
    assert entry and "1. GPT-2 → attnlab CausalLM" in entry.group(1)


def test_search_lists_a_notebooks_sections_without_the_permalink_sign(site):
    """The search box listed a notebook's sections as "1. Reversal¶": nbconvert's permalink,
    which the theme's search does not know, was read as part of the heading."""
    import json

    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    sections = [d["title"] for d in index["docs"] if d["location"].startswith("examples/0")]
    assert "1. Reversal" in sections
    assert [t for t in sections if "¶" in t] == []


def test_search_lists_a_formula_in_a_heading_as_text(site):
    """The search box listed notebook 01's section as "3. Why divide by $\\sqrt{d_k}$?", its
    TeX raw: search reads a heading before its formula is drawn. It reads "√d_k" now."""
    import json

    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    titles = [d["title"] for d in index["docs"]]
    assert "3. Why divide by √d_k?" in titles
    assert [t for t in titles if "$" in t or "\\" in t] == []


def test_a_formula_wider_than_a_phone_scrolls_by_itself(site, fresh_browser):
    """On a 390 px phone, MultiHead's and RoPE's formulas made the whole page scroll sideways
    (multihead.html was 788 px wide) and cut the formula at the screen's edge; at 1280 px
    MultiHead's ran past the text column, and at 1920 px SwiGLU's. Each now fits a desktop
    column with a scrollbar shown, or on a phone scrolls in its own box, drawn whole in
    height."""
    # the session's browser hides scrollbars; a reader's desktop window shows one, and its
    # column is narrower by its width (17 px, the widest a desktop browser draws): SwiGLU's
    # line was 820 px in an 815 px box at 1920 px, 745 in 733 at 1280 with a scrollbar
    measure = """
        const scrollbar = 17;
        const formulas = [...document.querySelectorAll('math[display="block"]')];
        return {page: document.documentElement.scrollWidth,
                view: document.documentElement.clientWidth, formulas: formulas.length,
                cut: formulas.filter((m) => m.scrollHeight > m.clientHeight).length,
                scrolled: formulas.map((m) => {
                    // the formula's own width: its box fills the column, whatever it holds
                    const parts = [...m.children].map((c) => c.getBoundingClientRect());
                    const drawn = Math.max(...parts.map((r) => r.right))
                                  - Math.min(...parts.map((r) => r.left));
                    return [Math.ceil(drawn), m.clientWidth - scrollbar, m.textContent];
                }).filter(([drawn, room]) => drawn > room)};"""
    pages = ("multihead.html", "llama_family.html", "positional_encoding.html", "blocks.html",
             "schedules.html")
    browser = fresh_browser  # reset to 1280 px by the fixture, whatever a test before left
    for width in (390, 1280, 1920):
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": 800, "deviceScaleFactor": 1, "mobile": width < 500})
        for page in pages:
            browser.get((site / page).as_uri())
            got = browser.execute_script(measure)
            assert got["formulas"] and got["page"] <= got["view"], (width, page, got)
            assert got["cut"] == 0, (width, page, got)
            if width > 500:  # a reader sees each whole
                assert got["scrolled"] == [], (width, page, got["scrolled"])
