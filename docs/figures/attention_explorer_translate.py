"""Take docs/images/attention_explorer_translate.png: the explorer's cross-attention of a German
number translator, the row of "undvierzigtausend" pinned (docs/attention_explorer.md).

    python docs/figures/attention_explorer_translate.py [--run DIR] [--out PNG]

Without ``--run`` it trains the run the page describes, ``attnlab train translate --src en
--tgt de`` with the defaults (seed 42, 600 steps; minutes on a laptop's CPU), in a temporary
directory. Then, as a reader would: ``attnlab view RUN --input TEXT``, the page opened in
Debian's headless Chromium at 1280 x 800 (as the explorer's browser tests open it), the
"cross-attention" tab clicked, layer 1 head 1, the row of ``--row`` pinned by a click on its
label. It prints that row's largest weights, which the page's text quotes, so a changed run
shows where the text no longer holds. ``make docs-images`` runs it.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # benchmarks' browser, run as `python docs/figures/...`
OUT = ROOT / "docs" / "images" / "attention_explorer_translate.png"
TEXT = "three hundred and forty-two thousand six hundred and five"
ROW = "undvierzigtausend"
TRAIN = ["train", "translate", "--src", "en", "--tgt", "de", "--seed", "42"]


class NotARow(ValueError):
    """``--row`` is not a token of the translation."""


def attnlab(*argv: str, cwd: Path | None = None) -> str:
    """Run the ``attnlab`` command of this checkout (in ``cwd``); its standard output. Its
    PYTHONPATH starts with this checkout, so an ``attnlab`` installed elsewhere is not run."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-m", "attnlab", *argv], check=True, cwd=cwd,
                          stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONPATH": path})
    return done.stdout


def shoot(page: Path, row: str, out: Path) -> list[tuple[str, str]]:
    """Screenshot ``page`` (an ``attnlab view`` page of a translate run) on its cross-attention,
    layer 1 head 1, the query row whose token is ``row`` pinned. Returns that row's readout,
    (key token, weight as shown), largest first."""
    from selenium.webdriver.common.by import By

    from benchmarks.explorer import browser  # headless Chromium, a 1280 x 800 viewport

    driver = browser()
    try:
        driver.get(page.as_uri())
        if driver.execute_script("return document.body.dataset.ready") != "1":
            raise RuntimeError(f"{page}: the page did not finish drawing")
        driver.find_element(By.CSS_SELECTOR, 'button.group[data-group="cross"]').click()
        tokens, keys = driver.execute_script(
            "const d = window.attnlab.data, l = d.layers.find((x) => x.group === 'cross');"
            "return [l.query_tokens || d.query_tokens, l.key_tokens || d.key_tokens];")
        if row not in tokens:
            raise NotARow(f"--row {row!r} is not a token of the translation: {tokens}")
        driver.find_element(By.CSS_SELECTOR,
                            f'.qtok[data-index="{tokens.index(row)}"]').click()  # pinned
        driver.execute_script("document.activeElement.blur()")  # no focus ring in the picture
        out.parent.mkdir(parents=True, exist_ok=True)
        if not driver.save_screenshot(str(out)):
            raise RuntimeError(f"{out}: no screenshot")
        read = [(keys[int(e.get_attribute("data-key"))], e.text)
                for e in driver.find_elements(By.CSS_SELECTOR, "#readout .weight[data-key]")]
    finally:
        driver.quit()
    return sorted(read, key=lambda kw: -float(kw[1]))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", type=Path, help="a translate run to show (default: train one)")
    p.add_argument("--input", default=TEXT, help="the source text (default: the docs')")
    p.add_argument("--row", default=ROW, help="the target token whose row is pinned")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        # the page's header names the run as the command was given it: "runs/de", the docs'
        run, where = (args.run, None) if args.run else (Path("runs") / "de", Path(tmp))
        if args.run is None:
            attnlab(*TRAIN, "--out", str(run), cwd=where)
        page = Path(tmp) / "attention.html"
        attnlab("view", str(run), "--input", args.input, "--out", str(page), cwd=where)
        try:
            read = shoot(page, args.row, args.out)
        except NotARow as e:  # one line, as attnlab's own errors
            print(f"{p.prog}: error: {e}", file=sys.stderr)
            raise SystemExit(2) from None
    print(f"{args.out}: cross-attention layer 1 head 1, row {args.row!r}: " +
          ", ".join(f"{w} on {k!r}" for k, w in read[:3]))


if __name__ == "__main__":
    main()
