"""The attention page at a large model's size — 12 layers × 12 heads × 128 tokens — in
headless Chromium: its size, the time to first render, and how fast it answers a hover and a key
press.

    python -m benchmarks.explorer [--quick]

No peer page works offline (bertviz loads its scripts from a CDN), so the yardstick is the
~100 ms within which a response feels immediate; each figure is printed with its ratio to it.
Times are measured inside the page (``performance.now()``), from the event to the next painted
frame (two ``requestAnimationFrame`` callbacks), median of ``--repeats``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

import numpy as np

from attnlab.explorer import Layer, attention_data, render_html

IMMEDIATE_MS = 100.0

_TIMED = """
const [kind, arg, done] = arguments;
const t0 = performance.now();
if (kind === 'hover') {
  document.querySelector(`.qtok[data-index="${arg}"]`).dispatchEvent(new MouseEvent('mouseenter'));
} else {
  document.dispatchEvent(new KeyboardEvent('keydown', {key: arg}));
}
requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - t0)));
"""


def page(layers: int, heads: int, tokens: int) -> str:
    rng = np.random.default_rng(0)
    w = rng.random((layers, heads, tokens, tokens)) ** 4
    w /= w.sum(-1, keepdims=True)
    names = [f"t{i}" for i in range(tokens)]
    return render_html(attention_data([Layer(f"layers.{i}", "self", w[i]) for i in range(layers)],
                                      names, title=f"{layers} x {heads} x {tokens}"))


# Chromium's options, the one list of the browser tests (tests/conftest.py's browser),
# this benchmark and the docs' pictures (docs/figures/attention_explorer_translate.py), which
# must not show scrollbars
CHROMIUM_ARGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,800",
                 "--disable-dev-shm-usage", "--hide-scrollbars")


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in CHROMIUM_ARGS:
        options.add_argument(arg)
    options.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    return driver


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="5 repeats instead of 20")
    p.add_argument("--repeats", type=int, default=20)
    args = p.parse_args()
    repeats = 5 if args.quick else args.repeats
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    driver = browser()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for shape in ((4, 4, 32), (12, 12, 128)):
                path = Path(tmp) / "page.html"
                path.write_text(page(*shape), encoding="utf-8")
                loads = []
                for _ in range(3):
                    driver.get(path.as_uri())
                    loads.append(driver.execute_script("return window.attnlab.readyMs"))
                driver.set_script_timeout(30)
                T = shape[2]
                hover = [driver.execute_async_script(_TIMED, "hover", (7 * i) % T)
                         for i in range(repeats)]
                keys = [driver.execute_async_script(_TIMED, "key", ("ArrowRight", "ArrowDown")[i % 2])
                        for i in range(repeats)]
                size = path.stat().st_size / 1e6
                print(f"{shape[0]} layers x {shape[1]} heads x {T} tokens: page {size:.1f} MB")
                for name, values in (("first render (ms since navigation)", loads),
                                     ("hover a token -> readout painted (ms)", hover),
                                     ("key press -> next head painted (ms)", keys)):
                    m = statistics.median(values)
                    print(f"  {name:40s} median {m:7.1f}  (min {min(values):.1f}, max "
                          f"{max(values):.1f})  ratio to {IMMEDIATE_MS:.0f} ms: {m / IMMEDIATE_MS:.2f}")
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
