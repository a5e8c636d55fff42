"""The attention page a teacher shows in class, in headless Chromium: the heads' mean stays
chosen across a layer of one head, and so on (Debian's chromium and chromium-driver, as
tests/explorer/conftest.py drives them)."""
import numpy as np
import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from attnlab.explorer import Layer, attention_data

pytestmark = pytest.mark.slow  # a browser


def ready(driver):
    assert driver.execute_script("return document.body.dataset.ready") == "1"


def readout(driver):
    """{key index: text} of the readout's weights of the hovered query."""
    return {int(e.get_attribute("data-key")): e.text
            for e in driver.find_elements(By.CSS_SELECTOR, "#readout .weight[data-key]")}


def hover(driver, selector):
    ActionChains(driver).move_to_element(driver.find_element(By.CSS_SELECTOR, selector)).perform()


def key(driver, k):
    driver.find_element(By.TAG_NAME, "body").send_keys(k)


@pytest.fixture
def heads_2_1_2():
    """A graph run's shape: layers of 2, 1 and 2 heads over 4 tokens (weights, data)."""
    rng = np.random.default_rng(3)
    weights = []
    for H in (2, 1, 2):
        w = rng.random((H, 4, 4)) ** 3
        weights.append(w / w.sum(-1, keepdims=True))
    layers = [Layer(f"layers.{i}", "self", w) for i, w in enumerate(weights)]
    return weights, attention_data(layers, list("abcd"))


def test_the_heads_mean_is_shown_again_after_a_layer_of_one_head(page, heads_2_1_2):
    """Averaging the heads, then ↓ to a one-head layer and ↑ back, showed head 1, not the mean:
    the one-head layer dropped the choice. The mean is shown again, and its numbers are the
    mean of the model's heads rounded once."""
    weights, data = heads_2_1_2
    driver = page(data)
    ready(driver)
    average = driver.find_element(By.ID, "average-heads")
    average.click()
    assert driver.find_element(By.ID, "layer-label").text == "layer 1 · mean of 2 heads"
    key(driver, Keys.ARROW_DOWN)
    assert driver.find_element(By.ID, "layer-label").text == "layer 2 · head 1"
    assert not average.is_displayed()  # one head: nothing to average, no box
    key(driver, Keys.ARROW_DOWN)
    assert driver.find_element(By.ID, "layer-label").text == "layer 3 · mean of 2 heads"
    assert average.is_displayed() and average.is_selected()
    hover(driver, '.qtok[data-index="2"]')
    assert readout(driver) == {j: f"{weights[2][:, 2, j].mean():.4f}" for j in range(4)}
    key(driver, Keys.ARROW_UP)
    key(driver, Keys.ARROW_UP)
    assert driver.find_element(By.ID, "layer-label").text == "layer 1 · mean of 2 heads"
    selected = driver.find_elements(By.CSS_SELECTOR, "canvas.thumb.selected")
    assert {(c.get_attribute("data-layer"), c.get_attribute("data-head"))
            for c in selected} == {("0", "0"), ("0", "1")}


def test_the_head_chosen_is_shown_again_after_a_layer_of_one_head(page, heads_2_1_2):
    """Head 2 chosen, ↓ to a one-head layer and ↓ on: head 1 was shown, not the head chosen."""
    weights, data = heads_2_1_2
    driver = page(data)
    ready(driver)
    key(driver, Keys.ARROW_RIGHT)
    assert driver.find_element(By.ID, "layer-label").text == "layer 1 · head 2"
    key(driver, Keys.ARROW_DOWN)
    assert driver.find_element(By.ID, "layer-label").text == "layer 2 · head 1"
    key(driver, Keys.ARROW_DOWN)
    assert driver.find_element(By.ID, "layer-label").text == "layer 3 · head 2"
    hover(driver, '.qtok[data-index="1"]')
    assert readout(driver) == {j: f"{weights[2][1, 1, j]:.4f}" for j in range(4)}


def test_a_head_selected_by_script_is_the_head_the_arrows_keep(page, heads_2_1_2):
    """window.attnlab.select(0, 0, 1) showed head 2, but ↓ ↓ then showed head 1: the head the
    arrows keep was not set. The head selected is kept as a click's."""
    weights, data = heads_2_1_2
    driver = page(data)
    ready(driver)
    driver.execute_script("window.attnlab.select(0, 0, 1)")
    assert driver.find_element(By.ID, "layer-label").text == "layer 1 · head 2"
    key(driver, Keys.ARROW_DOWN)
    key(driver, Keys.ARROW_DOWN)
    assert driver.find_element(By.ID, "layer-label").text == "layer 3 · head 2"


# Every element's own text: its colour, faded by its and its ancestors' opacity, and the colour
# under it (its backgrounds blended, the page's at the bottom), as the browser computed them;
# whether it is a hovered token's label, in a masked readout row, in the run's metrics; and
# whether a filter (which this cannot measure) is on it. A canvas (the maps) is not text.
_TEXTS = """
const rgba = (s) => { const m = s.match(/[\\d.]+/g).map(Number); return m.length === 3 ? [...m, 1] : m; };
function under(node) {
  const layers = [];
  for (let n = node; n; n = n.parentElement) {
    const c = rgba(getComputedStyle(n).backgroundColor);
    if (c[3] > 0) layers.push(c);
    if (c[3] === 1) break;
  }
  let bg = [255, 255, 255];  // the canvas of a page without a background
  layers.reverse().forEach(([r, g, b, a]) => { bg = [r, g, b].map((v, k) => a * v + (1 - a) * bg[k]); });
  return bg;
}
function faded(node) {  // [opacity, filtered] of node and its ancestors
  let opacity = 1, filtered = false;
  for (let n = node; n; n = n.parentElement) {
    const style = getComputedStyle(n);
    opacity *= Number(style.opacity);
    filtered = filtered || style.filter !== "none";
  }
  return [opacity, filtered];
}
const out = [];
document.querySelectorAll("body *").forEach((n) => {
  const own = [...n.childNodes].filter((c) => c.nodeType === 3).map((c) => c.textContent).join("").trim();
  const style = getComputedStyle(n), box = n.getBoundingClientRect();
  if (!own || style.visibility !== "visible" || box.width === 0 || n.closest("[hidden]")) return;
  const c = rgba(style.color), bg = under(n), [opacity, filtered] = faded(n), a = c[3] * opacity;
  const kind = n.matches(".qtok.on .label, .ktok.on .label") ? "hovered label"
    : n.closest("li.masked") ? "masked row" : n.closest(".run-metrics") ? "run metrics" : "";
  out.push([own.slice(0, 20), n.className || n.tagName, c.slice(0, 3).map((v, k) => a * v + (1 - a) * bg[k]), bg,
            kind, filtered]);
});
return out;
"""


def contrast(a, b) -> float:
    """WCAG 2's contrast ratio of two sRGB colours (0-255)."""
    def luminance(rgb):
        lin = [c / 255 / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4
               for c in rgb]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.fixture(params=["a NaN metric", "no metrics"])
def masked_translation(request, tmp_path):
    """An encoder-decoder's three groups, the decoder's causal (a grey, masked readout row), of
    a run whose metrics.json holds a null (a NaN: the alarm's colour) or is not written yet."""
    import json

    import torch

    from attnlab.explorer.collect import collect_layers, with_tokens
    from attnlab.explorer.record import run_record
    from attnlab.models import Seq2SeqTransformer

    torch.manual_seed(1)
    model = Seq2SeqTransformer(12, 9, model_dim=16, num_heads=2, num_layers=2,
                               dim_feedforward=32).eval()
    layers = collect_layers(model, torch.tensor([[5, 6, 7, 8, 2]]), torch.tensor([[1, 4, 5, 6]]))
    source, target = ["three", "hundred", "forty", "two", "</s>"], ["<s>", "342", "·", "x"]
    run = tmp_path / "de"
    run.mkdir()
    if request.param == "a NaN metric":
        (run / "metrics.json").write_text(json.dumps({"steps": 40, "val_loss": None,
                                                      "test_token_accuracy": 0.5}))
    return attention_data(with_tokens(layers, source, target), source, task="translate",
                          run="runs/de", title="translate: attention on '342'",
                          record=run_record(run))


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_text_is_readable_in_light_and_dark(page, masked_translation, scheme):
    """A class's projector, a dark room: with the reader's system in dark mode the page stayed
    white, and in either mode the hovered token's red label (3.5:1 on white) and a masked
    readout row (#aaa, 2.3:1) were under WCAG's 4.5:1. Now the page follows the reader's
    scheme and every text on it, hovered or not, stands at least 4.5:1 from what is under it."""
    driver = page(masked_translation)
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [
        {"name": "prefers-color-scheme", "value": scheme}]})
    try:
        driver.refresh()
        ready(driver)
        background = driver.execute_script(
            "return getComputedStyle(document.body).backgroundColor")
        dark = contrast([int(v) for v in background[4:-1].split(",")[:3]], [0, 0, 0]) < 2
        assert dark == (scheme == "dark"), background
        poor, kinds = [], set()
        for group in ("decoder", "cross"):
            driver.find_element(By.CSS_SELECTOR, f'button.group[data-group="{group}"]').click()
            # a token's label marked (the decoder's later keys masked), then a cell: its row
            # of the readout marked
            for target in ('.qtok[data-index="1"]', "#main-map"):
                hover(driver, target)
                texts = driver.execute_script(_TEXTS)
                kinds |= {kind for *_, kind, _ in texts}
                poor += [(text, where, "filtered" if filtered else round(contrast(c, bg), 2))
                         for text, where, c, bg, _, filtered in texts
                         if filtered or contrast(c, bg) < 4.5]
        assert not poor, "\n".join(map(str, poor))  # (text, element, ratio)
        # the texts the 4.5:1 was missed on before were among those measured
        assert {"hovered label", "masked row", "run metrics"} <= kinds, kinds
    finally:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def test_masked_cells_turn_dark_when_the_system_does_with_the_page_open(page,
                                                                        masked_translation):
    """The system switched to dark with the page open: the page turned dark but the decoder's
    masked cells stayed light grey (226, 226, 226) until a reload. They follow, no reload."""
    from tests.explorer.test_page_browser import _pixel

    driver = page(masked_translation)
    ready(driver)
    driver.find_element(By.CSS_SELECTOR, 'button.group[data-group="decoder"]').click()
    assert _pixel(driver, 0, 3) == [226, 226, 226]  # a causal query 0 cannot see key 3
    try:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [
            {"name": "prefers-color-scheme", "value": "dark"}]})
        cell = driver.execute_script("return getComputedStyle(document.documentElement)"
                                     ".getPropertyValue('--masked-cell').trim()")
        dark = [int(cell[i:i + 2], 16) for i in (1, 3, 5)]
        assert dark != [226, 226, 226]
        assert _pixel(driver, 0, 3) == dark
        thumbs = driver.execute_script("""
            return [...document.querySelectorAll('canvas.thumb')].map((c) =>
              [...c.getContext('2d').getImageData(c.width - 1, 0, 1, 1).data].slice(0, 3));""")
        assert thumbs and all(t == dark for t in thumbs)  # every small map's corner too
    finally:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
