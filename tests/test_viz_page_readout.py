"""The attention page's weights readout at a notebook cell's width (760 px, where it is a
190 px column beside the map): each token it lists is readable, not cut to one letter and
"…" as jets' "rank:pT" labels were ("1…" for "1:120"), and every row's columns line up."""
import numpy as np
import pytest
from selenium.webdriver.common.by import By

from attnlab.explorer import Layer, attention_data, render_html


pytestmark = pytest.mark.slow  # a browser

TOKENS = [f"{i}:{pt}" for i, pt in enumerate([319, 120, 61, 53, 43, 5, 4, 3, 2, 1, 1, 1])]


def _at(driver, width):
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": 800, "deviceScaleFactor": 1,
                            "mobile": False})
    driver.refresh()


@pytest.mark.parametrize("width", [760, 1280])
def test_the_readout_shows_each_token_whole(page, width):
    T = len(TOKENS)
    w = np.random.default_rng(0).dirichlet(np.ones(T), size=(2, T))  # (H, T, T)
    driver = page(attention_data([Layer("attn", "self", w)], TOKENS, task="jets"))
    try:
        _at(driver, width)
        driver.find_elements(By.CSS_SELECTOR, ".qtok")[1].click()  # pinned: query 1's row
        rows = driver.execute_script("""
            return [...document.querySelectorAll('#readout ol.weights li')].map((li) => {
              const tok = li.querySelector('.tok'), bar = li.children[1];
              return [tok.textContent, tok.scrollWidth <= tok.clientWidth,
                      bar.getBoundingClientRect().left]; });""")
    finally:
        _at(driver, 1280)
    assert [text for text, _, _ in rows] == [f"{i}{t}" for i, t in enumerate(TOKENS)]
    assert all(whole for _, whole, _ in rows), [text for text, whole, _ in rows if not whole]
    assert len({round(left) for _, _, left in rows}) == 1  # the bars start in one column


@pytest.mark.parametrize("width", [760, 1280])
def test_each_row_stays_on_one_line_where_the_browser_has_no_subgrid(page, width):
    """Chromium < 117, Safari < 16 and older editors' webviews drop `subgrid`: the page's own
    fallback keeps each row's token, bar and weight side by side (they stacked on 3 lines)."""
    T = len(TOKENS)
    w = np.random.default_rng(0).dirichlet(np.ones(T), size=(2, T))  # (H, T, T)
    html = render_html(attention_data([Layer("attn", "self", w)], TOKENS, task="jets"))
    assert "grid-template-columns: subgrid;" in html
    driver = page(html.replace("grid-template-columns: subgrid;", ""))  # as such an engine
    try:
        _at(driver, width)
        driver.find_elements(By.CSS_SELECTOR, ".qtok")[1].click()
        rows = driver.execute_script("""
            return [...document.querySelectorAll('#readout ol.weights li')].map((li) =>
              [...li.children].map((c) => {
                const r = c.getBoundingClientRect(); return [r.top, r.bottom]; }));""")
    finally:
        _at(driver, 1280)
    assert len(rows) == T and all(len(boxes) == 3 for boxes in rows)
    # on one line: the bar (centred, 8 px) and the weight lie within the token's height
    # (stacked, each began below the one before it ended)
    assert all(max(top for top, _ in boxes) < min(bottom for _, bottom in boxes)
               for boxes in rows), rows
