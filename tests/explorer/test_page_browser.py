"""The attention page in a real browser (headless Chromium): it loads from a file with no
console error and no network request, shows every layer and head, reads out the same weights
as the model's ``get_attention_maps``, switches a translation to its cross-attention, keeps its
labels apart, and renders a 12 × 12 × 128 model."""
import contextlib
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from attnlab.explorer import AttentionView, Layer, attention_data
from attnlab.explorer.collect import collect_layers, with_tokens
from attnlab.models import Seq2SeqTransformer

from .conftest import ARTIFACTS

DOCS_SHOT = Path(__file__).resolve().parents[2] / "docs" / "images" / "attention_explorer.png"

pytestmark = pytest.mark.slow  # a browser and a reversal run: too slow for `make test-fast`


@pytest.fixture(scope="module")
def course_model():
    """The course's TransformerPredictor (3 layers × 2 heads) on a one-hot input of 6 tokens."""
    from attnlab.training import TransformerPredictor  # Lightning's Trainer: when used

    torch.manual_seed(0)
    model = TransformerPredictor(input_dim=10, model_dim=16, num_heads=2, num_classes=10,
                                 num_layers=3, lr=1e-3, warmup=10, max_iters=100).eval()
    tokens = [3, 1, 4, 1, 5, 9]
    x = torch.nn.functional.one_hot(torch.tensor([tokens]), 10).float()
    maps = [m[0] for m in model.get_attention_maps(x)]  # L × (H, T, T)
    data = attention_data([Layer(f"layers.{i}", "self", m) for i, m in enumerate(maps)],
                          [str(t) for t in tokens])
    return maps, data


@pytest.fixture(scope="module")
def translation():
    """A tiny encoder–decoder's three groups: source 5 tokens, decoder input 4 tokens."""
    torch.manual_seed(1)
    model = Seq2SeqTransformer(12, 9, model_dim=16, num_heads=2, num_layers=2,
                               dim_feedforward=32).eval()
    src, tgt = torch.tensor([[5, 6, 7, 8, 2]]), torch.tensor([[1, 4, 5, 6]])
    layers = collect_layers(model, src, tgt)
    source, target = ["three", "hundred", "forty", "two", "</s>"], ["<s>", "342", "·", "x"]
    return layers, attention_data(with_tokens(layers, source, target), source,
                                  title="translate: attention on '342'", task="translate")


def shown(w) -> str:
    """The weight ``w`` (a float or a 0-d tensor) as the page shows it by default: rounded once
    to attention_data's 4 decimals, as a learner rounding ``get_attention_maps`` would."""
    return f"{float(w):.4f}"


def as_shown(text: str, w) -> str:
    """``w`` rounded by hand to the decimals ``text`` shows."""
    return f"{float(w):.{len(text.split('.')[1])}f}"


def ready(driver):
    assert driver.execute_script("return document.body.dataset.ready") == "1"


def console_errors(driver):
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]


def requests(driver):
    sent = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            sent.append(message["params"]["request"]["url"])
    return sent


def readout(driver, attribute):
    """{index: text} of the readout's weights (``data-key`` or ``data-query``)."""
    return {int(e.get_attribute(attribute)): e.text
            for e in driver.find_elements(By.CSS_SELECTOR, f"#readout .weight[{attribute}]")}


def hover(driver, selector):
    ActionChains(driver).move_to_element(driver.find_element(By.CSS_SELECTOR, selector)).perform()


def test_loads_offline_with_every_layer_and_head(page, course_model):
    maps, data = course_model
    driver = page(data)
    ready(driver)
    thumbs = driver.find_elements(By.CSS_SELECTOR, "canvas.thumb")
    assert len(thumbs) == len(maps) * maps[0].shape[0] == 6
    assert {(t.get_attribute("data-layer"), t.get_attribute("data-head")) for t in thumbs} == {
        (str(l), str(h)) for l in range(3) for h in range(2)}
    assert console_errors(driver) == []
    assert requests(driver) == [driver.page_path.as_uri()]  # the page itself, nothing else


def test_hover_reads_out_the_models_weights(page, course_model):
    maps, data = course_model
    driver = page(data)
    driver.find_element(By.CSS_SELECTOR, 'canvas.thumb[data-layer="2"][data-head="1"]').click()
    assert driver.find_element(By.ID, "layer-label").text == "layer 3 · head 2"
    T = maps[0].shape[1]
    for i in range(T):  # every query: the row it gives
        hover(driver, f'.qtok[data-index="{i}"]')
        assert readout(driver, "data-key") == {j: shown(maps[2][1, i, j]) for j in range(T)}
    hover(driver, '.ktok[data-index="4"]')  # a key: the column it receives
    assert readout(driver, "data-query") == {i: shown(maps[2][1, i, 4]) for i in range(T)}

    body = driver.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.ARROW_UP, Keys.ARROW_LEFT)  # layer 2, head 1, by keyboard
    assert driver.find_element(By.ID, "layer-label").text == "layer 2 · head 1"
    hover(driver, '.qtok[data-index="2"]')
    assert readout(driver, "data-key") == {j: shown(maps[1][0, 2, j]) for j in range(T)}

    driver.find_element(By.ID, "average-heads").click()
    assert driver.find_element(By.ID, "layer-label").text == "layer 2 · mean of 2 heads"
    hover(driver, '.qtok[data-index="2"]')
    mean = maps[1].double().mean(0)  # as the page takes it: from the weights, not rounded
    assert readout(driver, "data-key") == {j: shown(mean[2, j]) for j in range(T)}


def test_translation_switches_to_cross_attention(page, translation):
    layers, data = translation
    driver = page(data)
    buttons = driver.find_elements(By.CSS_SELECTOR, "button.group")
    assert [b.get_attribute("data-group") for b in buttons] == ["encoder", "decoder", "cross"]
    main = driver.find_element(By.ID, "main-map")
    assert (main.get_attribute("data-rows"), main.get_attribute("data-cols")) == ("5", "5")

    driver.find_element(By.CSS_SELECTOR, 'button.group[data-group="cross"]').click()
    assert "active" in driver.find_element(
        By.CSS_SELECTOR, 'button.group[data-group="cross"]').get_attribute("class")
    assert (main.get_attribute("data-rows"), main.get_attribute("data-cols")) == ("4", "5")
    assert len(driver.find_elements(By.CSS_SELECTOR, ".qtok")) == 4
    assert len(driver.find_elements(By.CSS_SELECTOR, ".ktok")) == 5
    assert len(driver.find_elements(By.CSS_SELECTOR, "canvas.thumb")) == 2 * 2
    cross = [layer.weights for layer in layers if layer.group == "cross"]
    driver.find_element(By.CSS_SELECTOR, 'canvas.thumb[data-layer="1"][data-head="0"]').click()
    hover(driver, '.qtok[data-index="3"]')
    assert readout(driver, "data-key") == {j: shown(cross[1][0, 3, j]) for j in range(5)}
    assert driver.find_element(By.ID, "layer-label").text == "cross-attention · layer 2 · head 1"

    driver.find_element(By.CSS_SELECTOR, 'button.group[data-group="decoder"]').click()
    hover(driver, '.qtok[data-index="0"]')  # the first target token sees only itself
    assert readout(driver, "data-key") == {0: "1.0000", 1: "0.0000", 2: "0.0000", 3: "0.0000"}
    assert console_errors(driver) == []


def test_embedded_json_parses_and_tokens_stay_text(page):
    tokens = ['</script><b>x</b>', '"quoted" \'single\'', "naïve → ünïcode", "&amp;"]
    data = attention_data([Layer("attn", "self", np.full((1, 4, 4), 0.25))], tokens)
    driver = page(data)
    ready(driver)
    parsed = driver.execute_script(
        "return JSON.parse(document.getElementById('attnlab-attention').textContent)")
    assert parsed == data
    assert driver.find_elements(By.TAG_NAME, "b") == []  # not markup
    labels = [e.get_attribute("title") for e in driver.find_elements(By.CSS_SELECTOR, ".qtok")]
    assert labels == [f"query {i}: {t}" for i, t in enumerate(tokens)]


def _boxes(driver, selector):
    return driver.execute_script("""
        return [...document.querySelectorAll(arguments[0])]
          .filter((e) => getComputedStyle(e).visibility !== 'hidden' && e.textContent)
          .map((e) => { const r = e.getBoundingClientRect();
                        return [r.left, r.top, r.right, r.bottom]; });""", selector)


def _overlap(a, b):
    return a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5


def _metrics(driver, width):
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": 800, "deviceScaleFactor": 1,
                            "mobile": False})


@contextlib.contextmanager
def _width(driver, width):
    """The open page reloaded at ``width`` × 800 CSS pixels; 1280 × 800 again after."""
    _metrics(driver, width)
    try:
        driver.refresh()
        yield
    finally:
        _metrics(driver, 1280)


@pytest.mark.parametrize("T, word", [(128, "tok{}"), (40, "a-rather-long-word-piece-{}"),
                                     (6, "antidisestablishment-{}")])
def test_labels_never_overlap(page, T, word):
    rng = np.random.default_rng(0)
    w = rng.random((2, T, T))
    tokens = [word.format(i) for i in range(T)]
    driver = page(attention_data([Layer("attn", "self", w / w.sum(-1, keepdims=True))], tokens))
    ready(driver)
    for selector in (".qtok .label", ".ktok .label"):
        boxes = _boxes(driver, selector)
        assert len(boxes) >= min(T, 16)  # thinned, but labelled along the whole axis
        assert not any(_overlap(a, b) for a, b in zip(boxes, boxes[1:])), selector
    assert len(driver.find_elements(By.CSS_SELECTOR, ".qtok")) == T  # every token hoverable
    for i in (T // 2 + 1, T - 1):  # a hovered token's label shows, among the thinned ones
        hover(driver, f'.qtok[data-index="{i}"]')
        assert len(readout(driver, "data-key")) == T
        boxes = _boxes(driver, ".qtok .label")
        assert not any(_overlap(a, b) for a, b in zip(boxes, boxes[1:]))
        assert driver.find_element(By.CSS_SELECTOR, f'.qtok[data-index="{i}"] .label').is_displayed()


def test_twelve_layers_twelve_heads_128_tokens(page):
    rng = np.random.default_rng(0)
    w = rng.random((12, 12, 128, 128)) ** 4
    w /= w.sum(-1, keepdims=True)
    tokens = [f"t{i}" for i in range(128)]
    driver = page(attention_data([Layer(f"layers.{i}", "self", w[i]) for i in range(12)], tokens))
    ready(driver)
    assert len(driver.find_elements(By.CSS_SELECTOR, "canvas.thumb")) == 144
    driver.find_element(By.CSS_SELECTOR, 'canvas.thumb[data-layer="11"][data-head="11"]').click()
    hover(driver, '.qtok[data-index="100"]')
    got = readout(driver, "data-key")
    assert got == {j: shown(w[11, 11, 100, j]) for j in range(128)}
    assert console_errors(driver) == []


@pytest.fixture(scope="module")
def reverse_page(tmp_path_factory):
    """`attnlab view` of a trained reversal run (the course's experiment; it stops after
    100–130 steps, as docs/reverse.md measured)."""
    from attnlab.cli import main

    tmp = tmp_path_factory.mktemp("reverse")
    here = os.getcwd()
    os.chdir(tmp)  # the page names the run as the user typed it: runs/reverse
    try:
        assert main(["train", "reverse", "--out", "runs/reverse", "--threads", "1"]) == 0
        assert main(["view", "runs/reverse", "--input", "3 1 4 1 5 9 2 6 5 3 5 8 9 7 9 3",
                     "--out", "reverse.html"]) == 0
    finally:
        os.chdir(here)
    return tmp / "reverse.html"


def test_trained_reversal_page_shows_the_anti_diagonal(page, reverse_page):
    driver = page(reverse_page.read_text(encoding="utf-8"))
    ready(driver)
    for i in (0, 5, 15):  # query i looks most at key 15 - i
        hover(driver, f'.qtok[data-index="{i}"]')
        weights = {j: float(w) for j, w in readout(driver, "data-key").items()}
        assert max(weights, key=weights.get) == 15 - i


def every_shown_weight(driver, layer, heads, T):
    """{(head, query): readout texts} of every query of ``layer`` (head "mean": averaged)."""
    out = {}
    for h in heads:
        if h == "mean":
            if not driver.find_element(By.ID, "average-heads").is_selected():
                driver.find_element(By.ID, "average-heads").click()
        else:
            driver.find_element(By.CSS_SELECTOR,
                                f'canvas.thumb[data-layer="{layer}"][data-head="{h}"]').click()
        for i in range(T):
            hover(driver, f'.qtok[data-index="{i}"]')
            got = readout(driver, "data-key")
            out[h, i] = [got[j] for j in range(len(got))]
    return out


def test_a_shown_weight_is_the_weight_rounded_once(page):
    """Weights were stored to 4 decimals and shown to 3, so rounded twice: 0.07849 was
    stored 0.0785 and shown 0.079, where a learner rounding it by hand gets 0.078. Every
    number shown (the readout, the legend's largest weight, the map's spoken cell) is now the
    weight rounded once to the decimals it shows."""
    w = np.array([[0.07849, 0.92151], [0.0009996, 0.9990004]])  # double rounding: 0.079, 0.001
    driver = page(attention_data([Layer("attn", "self", w)], ["a", "b"]))
    ready(driver)
    for i in range(2):
        hover(driver, f'.qtok[data-index="{i}"]')
        got = readout(driver, "data-key")
        assert got == {j: as_shown(got[j], w[i, j]) for j in range(2)}
    legend = driver.find_element(By.CSS_SELECTOR, ".legend-max").text
    assert legend == as_shown(legend, w.max())
    main = driver.find_element(By.ID, "main-map")
    cell = main.size["width"] / 2
    ActionChains(driver).move_to_element_with_offset(  # the cell (0, 0)
        main, int(-main.size["width"] / 2 + cell / 2), int(-main.size["height"] / 2 + cell / 2)
    ).perform()
    spoken = main.accessible_name.rsplit("weight ", 1)[1]
    assert spoken == as_shown(spoken, w[0, 0])


def test_every_weight_on_a_trained_reversal_page_is_the_models_rounded_once(page, reverse_page):
    """On a reversal run 48 of 1024 weights read 0.001 off the model's weight rounded to the
    decimals shown. Every head's every weight, and the mean of the heads, now equals the
    weight from ``get_attention_maps`` (``attnlab.load``) rounded once, as a learner would."""
    import attnlab
    from attnlab.explorer import read_data

    model = attnlab.load(reverse_page.parent / "runs" / "reverse")
    x = torch.tensor([[int(t) for t in "3 1 4 1 5 9 2 6 5 3 5 8 9 7 9 3".split()]])
    with torch.no_grad():
        maps = [m[0].double() for m in model.get_attention_maps(x)]  # L × (H, T, T)
    data = read_data(reverse_page.read_text(encoding="utf-8"))
    assert len(data["layers"]) == len(maps)
    driver = page(reverse_page.read_text(encoding="utf-8"))
    ready(driver)
    H, T = maps[0].shape[:2]
    for layer, w in enumerate(maps):
        heads = list(range(H)) + ["mean"] * (H > 1)
        for (h, i), got in every_shown_weight(driver, layer, heads, T).items():
            true = w.mean(0)[i] if h == "mean" else w[h, i]
            assert len(got) == T and got == [as_shown(t, v) for t, v in zip(got, true)], (h, i)


def test_a_reversal_pages_rows_are_labelled_with_what_they_output(reverse_page):
    """The rows were once labelled with the input's symbols; row i is where output i is
    predicted, so a trained reversal's rows read the input backwards."""
    from attnlab.explorer import read_data

    data = read_data(reverse_page.read_text(encoding="utf-8"))
    given = "3 1 4 1 5 9 2 6 5 3 5 8 9 7 9 3".split()
    assert data["key_tokens"] == given
    assert data["query_tokens"] == given[::-1]


def test_screenshot_at_1280_by_800_is_not_blank(page, reverse_page):
    from PIL import Image

    driver = page(reverse_page.read_text(encoding="utf-8"))
    ready(driver)
    hover(driver, '.qtok[data-index="4"]')
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "attention_explorer.png"  # docs/images/attention_explorer.png is this
    assert driver.save_screenshot(str(shot))
    image = np.asarray(Image.open(shot).convert("RGB"))
    assert image.shape[:2] == (800, 1280)
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 50  # the maps' colours, not a blank
    main = driver.find_element(By.ID, "main-map").rect
    crop = image[int(main["y"]):int(main["y"] + main["height"]),
                 int(main["x"]):int(main["x"] + main["width"])]
    assert crop.size and crop.std() > 10
    assert console_errors(driver) == []
    # docs/attention_explorer.md shows this screenshot. Its pixels depend on the run (another
    # CPU's kernels stop it 10 steps later) and on the system font (the map moves), so `make
    # docs-images` renews the picture and here only what holds on any machine is checked: it is
    # a 1280 x 800 shot of a page in colour, not a blank or a page of another size.
    docs = np.asarray(Image.open(DOCS_SHOT).convert("RGB"))
    assert docs.shape == image.shape, f"{DOCS_SHOT} is stale: run `make docs-images`"
    assert len(np.unique(docs.reshape(-1, 3), axis=0)) > 50, f"{DOCS_SHOT} is blank"


def test_the_whole_map_is_in_the_window_at_1280_by_800(page, reverse_page):
    """At 1280 x 800 the reversal page's 16th row was below the fold (and cut from the docs'
    screenshot): a page of its own fits its map in the window's height, and again when the
    window is made shorter."""
    driver = page(reverse_page.read_text(encoding="utf-8"))
    ready(driver)

    def bottom():
        return driver.execute_script(
            "return document.getElementById('main-map').getBoundingClientRect().bottom;")

    try:
        assert driver.execute_script("return window.innerHeight;") == 800
        assert bottom() <= 800
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 1280, "height": 700, "deviceScaleFactor": 1, "mobile": False})
        driver.execute_async_script("requestAnimationFrame(() => requestAnimationFrame("
                                    "arguments[arguments.length - 1]));")
        assert bottom() <= 700
    finally:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})


def test_a_short_window_keeps_every_key_label(page, reverse_page):
    """In a 1280 x 450 window the height rule shrank the reversal's cells from 32 px to 12 px,
    under a label's line: every other key label was hidden (and the map still did not fit).
    A short window never shrinks a cell below the line; every key keeps its label."""
    driver = page(reverse_page.read_text(encoding="utf-8"))
    ready(driver)
    try:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 1280, "height": 450, "deviceScaleFactor": 1, "mobile": False})
        driver.execute_async_script("requestAnimationFrame(() => requestAnimationFrame("
                                    "arguments[arguments.length - 1]));")
        keys = driver.find_elements(By.CSS_SELECTOR, ".ktok")
        assert len(keys) == 16
        hidden = [k.get_attribute("aria-label") for k in keys
                  if "thin" in k.find_element(By.CSS_SELECTOR, ".label").get_attribute("class")]
        assert hidden == []
        assert [k.find_element(By.CSS_SELECTOR, ".label").text for k in keys] == \
            "3 1 4 1 5 9 2 6 5 3 5 8 9 7 9 3".split()
    finally:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})


def test_inline_view_renders_inside_its_iframe(page, course_model):
    _, data = course_model
    driver = page(f"<!DOCTYPE html><html><body>{AttentionView(data)._repr_html_()}</body></html>",
                  name="notebook.html")
    driver.switch_to.frame(driver.find_element(By.TAG_NAME, "iframe"))
    try:
        ready(driver)
        assert len(driver.find_elements(By.CSS_SELECTOR, "canvas.thumb")) == 6
    finally:
        driver.switch_to.default_content()


@pytest.mark.parametrize("width", [480, 700])
def test_a_narrow_page_stacks_its_columns_and_nothing_overlaps(page, reverse_page, width):
    """A notebook's output column or a docs page is narrower than a window: the three columns
    become one, the map keeps its width and the legend, the map and the readout do not overlap."""
    driver = page(reverse_page.read_text(encoding="utf-8"))
    with _width(driver, width):
        ready(driver)
        boxes = {name: driver.find_element(By.CSS_SELECTOR, css).rect for name, css in
                 (("legend", "#legend"), ("map", "#main-map"), ("readout", ".readout-box"),
                  ("thumbs", ".grid"))}
        assert boxes["map"]["width"] >= 16 * 10  # 16 tokens, still drawn large
        for a, b in (("legend", "readout"), ("map", "readout"), ("thumbs", "legend"),
                     ("thumbs", "map")):
            assert not overlap(boxes[a], boxes[b]), (a, b, boxes[a], boxes[b])
        for box in boxes.values():  # all inside the page's width
            assert box["x"] >= 0 and box["x"] + box["width"] <= width


def overlap(a, b) -> bool:
    return (a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"]
            and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"])


def _in_frame(driver, script):
    driver.switch_to.frame(driver.find_element(By.TAG_NAME, "iframe"))
    try:
        return driver.execute_script(script)
    finally:
        driver.switch_to.default_content()


@pytest.mark.parametrize("width", [600, 1280])
def test_inline_view_is_sized_to_its_content_and_shows_every_key(page, reverse_page, width):
    """Inline in a notebook (a 617 px output column) the frame was once 760 px high whatever
    its content, the map was drawn 630 px wide in 551 px, hiding the two rightmost key columns,
    and the weights were below the fold. Now every key column is inside the frame, the weights
    sit beside the map, and the frame is as high as the page in it."""
    from attnlab.explorer import read_data

    view = AttentionView(read_data(reverse_page.read_text(encoding="utf-8")))
    host = ("<!DOCTYPE html><html><body style='margin:8px'><p>In [3]:</p>"
            f"<div style='max-width:617px'>{view._repr_html_()}</div></body></html>")
    driver = page(host, name="notebook.html")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": 800, "deviceScaleFactor": 1,
                            "mobile": False})
    try:
        driver.refresh()
        frame = driver.find_element(By.TAG_NAME, "iframe")
        # the page posts its height once drawn; a busy machine's Chromium takes seconds to
        # draw, so the wait ends on the height (or after 60 s), not after a count of tries
        deadline = time.monotonic() + 60
        while True:
            inner = _in_frame(driver, "return document.body.dataset.ready === '1' && "
                                      "Math.ceil(document.body.getBoundingClientRect().height)")
            if inner and abs(frame.rect["height"] - inner) <= 4 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert inner and abs(frame.rect["height"] - inner) <= 4, (frame.rect, inner)
        assert frame.rect["height"] != 760
        got = _in_frame(driver, """
            const r = (s) => document.querySelector(s).getBoundingClientRect();
            const keys = [...document.querySelectorAll('.ktok')].map((k) => k.getBoundingClientRect());
            const scroll = document.querySelector('.head-view .scroll');
            return {width: window.innerWidth, map: r('#main-map'), readout: r('.readout-box'),
                    keys: keys.map((k) => [k.left, k.right]), hidden: scroll.scrollWidth - scroll.clientWidth,
                    scrollRight: scroll.getBoundingClientRect().right};""")
        assert len(got["keys"]) == 16
        assert all(right <= got["scrollRight"] + 0.5 for _, right in got["keys"])
        assert got["hidden"] <= 0 and got["map"]["right"] <= got["width"]
        assert got["map"]["width"] >= 16 * 12  # every key column, still large enough to read
        # the weights beside the map, not under it
        assert got["readout"]["left"] >= got["map"]["right"] and got["readout"]["top"] < got["map"]["bottom"]
        assert got["readout"]["right"] <= got["width"]
    finally:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": 1280, "height": 800, "deviceScaleFactor": 1,
                                "mobile": False})


def test_every_small_map_fits_a_notebooks_output_on_a_phone(page):
    """A notebook page of the docs site on a 390 px phone gives its output a 242 px frame:
    the grid of 4 heads' maps was drawn 64 px a map, 304 px wide, and the fourth head's maps
    were cut off at the frame's edge (the page inside scrolled sideways)."""
    rng = np.random.default_rng(0)
    layers = [Layer(f"layers.{i}", "self", rng.dirichlet(np.ones(8), size=(4, 8)))
              for i in range(3)]
    view = AttentionView(attention_data(layers, [f"t{i}" for i in range(8)]))
    host = ("<!DOCTYPE html><html><body style='margin:0'>"
            f"<div style='width:242px'>{view._repr_html_()}</div></body></html>")
    driver = page(host, name="notebook.html")
    got = _in_frame(driver, """
        const thumbs = [...document.querySelectorAll('canvas.thumb')];
        return {ready: document.body.dataset.ready, width: window.innerWidth,
                page: document.documentElement.scrollWidth, thumbs: thumbs.length,
                right: Math.max(...thumbs.map((c) => c.getBoundingClientRect().right)),
                size: thumbs[0].getBoundingClientRect().width};""")
    assert got["ready"] == "1" and got["thumbs"] == 12 and got["width"] == 242, got
    assert got["page"] <= got["width"] and got["right"] <= got["width"], got
    assert got["size"] >= 18  # still a map one can see and click


def test_a_resize_redraws_the_small_maps_only_when_their_size_changes(page):
    """A resize rebuilt and repainted every small map (144 maps of 128 × 128 on the benchmark
    page) even where their size stayed; a narrow window shrinks them, and widening it again
    gives the 64 px maps back."""
    rng = np.random.default_rng(0)
    layers = [Layer(f"layers.{i}", "self", rng.dirichlet(np.ones(8), size=(4, 8)))
              for i in range(3)]
    driver = page(attention_data(layers, [f"t{i}" for i in range(8)]))
    size = """return document.querySelector('canvas.thumb').getBoundingClientRect().width;"""

    def resize(width):
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": 800, "deviceScaleFactor": 1, "mobile": False})
        # the page redraws on the next animation frame after the resize event
        driver.execute_async_script("requestAnimationFrame(() => requestAnimationFrame("
                                    "arguments[arguments.length - 1]));")

    try:
        assert driver.execute_script(size) == 64
        driver.execute_script("document.querySelector('canvas.thumb').dataset.kept = '1';")
        resize(1200)  # still room for 64 px maps: the same canvases, not repainted
        assert driver.execute_script(size) == 64
        assert driver.execute_script(
            "return document.querySelector('canvas.thumb').dataset.kept") == "1"
        resize(300)
        assert 18 <= driver.execute_script(size) < 64  # narrower, every head still shown
        resize(1280)
        assert driver.execute_script(size) == 64
    finally:
        resize(1280)


def _causal(T):
    rng = np.random.default_rng(0)
    w = np.tril(rng.random((1, T, T)) + 0.05)
    w /= w.sum(-1, keepdims=True)
    return w


def _pixel(driver, i, j):
    """The RGB of cell (query i, key j) of the large map."""
    return driver.execute_script("""
        const c = document.getElementById('main-map'), n = Number(c.dataset.cols);
        const cell = c.width / n;
        return [...c.getContext('2d').getImageData(Math.floor((arguments[1] + .5) * cell),
                Math.floor((arguments[0] + .5) * cell), 1, 1).data].slice(0, 3);""", i, j)


def test_a_causal_map_is_scaled_row_by_row_unless_the_shared_scale_is_chosen(page):
    """Query 0's weight of 1.0 must not set a causal map's scale and leave the rest near-black."""
    T = 12
    w = _causal(T)
    data = attention_data([Layer("causal", "causal", w), Layer("self", "self", w)],
                          [f"t{i}" for i in range(T)])
    driver = page(data)
    ready(driver)
    top = [253, 231, 37]  # viridis' brightest: the largest weight of the scale
    box = driver.find_element(By.ID, "row-scale")
    assert box.is_selected()
    for i in range(T):  # every row's largest weight is drawn at the top of the scale
        assert _pixel(driver, i, int(np.argmax(w[0, i]))) == top
    assert "each row" in driver.find_element(By.ID, "legend").text
    box.click()  # the shared scale: only query 0's weight of 1 reaches the top
    assert not box.is_selected() and _pixel(driver, 0, 0) == top
    assert _pixel(driver, T - 1, int(np.argmax(w[0, T - 1]))) != top
    driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_DOWN)  # the choice holds
    assert not driver.find_element(By.ID, "row-scale").is_selected()


def test_a_self_attention_map_shares_one_scale_by_default(page):
    data = attention_data([Layer("self", "self", _causal(6))], list("abcdef"))
    driver = page(data)
    ready(driver)
    assert not driver.find_element(By.ID, "row-scale").is_selected()


def test_thinned_character_labels_read_as_runs_of_the_text(page):
    """An lm's characters thinned to every other one read as gibberish ("t o t o s n"): shown
    labels carry the characters up to the next one."""
    text = "the quick brown fox jumps over the lazy dog; attention is all you need"
    T = len(text)
    data = attention_data([Layer("causal", "causal", _causal(T))], list(text))
    driver = page(data)
    ready(driver)
    shown = driver.execute_script("""
        return [...document.querySelectorAll('.qtok .label')]
          .filter((e) => getComputedStyle(e).visibility !== 'hidden').map((e) => e.textContent);""")
    assert 1 < len(shown) < T  # thinned
    assert "".join(shown).replace("␣", " ") == text
    hover(driver, '.qtok[data-index="5"]')  # a hovered token shows itself, not a run
    assert driver.find_element(By.CSS_SELECTOR, '.qtok[data-index="5"] .label').text == "u"


def test_a_hovered_long_label_keeps_its_first_letter(page):
    """A hovered truncated label stays inside the label column (it once ran past it and lost
    its first letter)."""
    tokens = [f"MMMMMMMMMMMMMMMMMM{i}" for i in range(8)]
    driver = page(attention_data([Layer("self", "self", _causal(8))], tokens))
    ready(driver)
    hover(driver, '.qtok[data-index="3"]')
    column = driver.find_element(By.CSS_SELECTOR, ".qlabels").rect
    label = driver.find_element(By.CSS_SELECTOR, '.qtok[data-index="3"] .label')
    assert label.text.startswith("M") and label.rect["x"] >= column["x"] - 0.5
    assert label.rect["x"] + label.rect["width"] <= column["x"] + column["width"] + 0.5


def test_a_cut_label_never_splits_an_emoji(page):
    """Labels and the readout are cut by characters, not by UTF-16 halves: an emoji at the
    cut showed as a broken glyph, and ten emoji (20 halves) were cut although they fit."""
    tokens = ["abcdefghijkl😀xyz", "😀" * 10, "ok"]
    driver = page(attention_data([Layer("self", "self", np.full((1, 3, 3), 1 / 3))], tokens))
    ready(driver)
    # as code points: a lone half cannot even be handed back to Python as a string
    def codes(text):
        return [ord(c) for c in text]

    as_text = "return [...document.querySelectorAll(arguments[0])].map((e) => " \
              "Array.from(e.textContent, (c) => c.codePointAt(0)))"
    label = driver.execute_script(as_text, '.qtok[data-index="0"] .label')
    assert label == [codes("abcdefghijkl😀…")]
    hover(driver, '.qtok[data-index="2"]')
    shown = driver.execute_script(as_text, "#readout .tok")
    assert shown == [codes("0abcdefghijkl😀xyz"), codes("1" + "😀" * 10), codes("2ok")]


def test_a_head_chosen_while_averaging_is_shown(page, course_model):
    """With the heads averaged, clicking a head's map (or ← →) showed the mean still: the
    click did nothing a learner could see. Choosing a head now shows that head."""
    maps, data = course_model
    driver = page(data)
    ready(driver)
    driver.find_element(By.ID, "average-heads").click()
    driver.find_element(By.CSS_SELECTOR, 'canvas.thumb[data-layer="1"][data-head="1"]').click()
    assert driver.find_element(By.ID, "layer-label").text == "layer 2 · head 2"
    assert not driver.find_element(By.ID, "average-heads").is_selected()
    hover(driver, '.qtok[data-index="3"]')
    assert readout(driver, "data-key") == {j: shown(maps[1][1, 3, j]) for j in range(6)}
    driver.find_element(By.ID, "average-heads").click()
    driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_LEFT)
    assert driver.find_element(By.ID, "layer-label").text == "layer 2 · head 1"
    hover(driver, '.qtok[data-index="3"]')
    assert readout(driver, "data-key") == {j: shown(maps[1][0, 3, j]) for j in range(6)}


@pytest.mark.parametrize("T", [128, 300])
def test_the_first_key_label_keeps_off_the_corners_words(page, T):
    """Cells thinner than a line: the first key's label, centred on its column, ran into
    "keys →" and "queries ↓" in the corner."""
    w = np.full((1, T, T), 1 / T)
    driver = page(attention_data([Layer("attn", "self", w)], ["[CLS]"] + ["tok"] * (T - 1)))
    ready(driver)
    corner = _boxes(driver, ".corner span")
    labels = _boxes(driver, ".ktok .label")
    assert len(corner) == 2 and labels
    assert not any(_overlap(a, b) for a in corner for b in labels)


def test_a_graphs_non_edges_are_grey_not_weights_of_0(page):
    """A graph's non-edges (exactly 0 in every head, the mask's) were painted and read out as
    weights of 0 the model chose; they are grey now, in the large map and the read-out, and
    the legend says what grey is. An edge's small weight is still a colour of the scale."""
    from attnlab.nn import scaled_dot_product

    torch.manual_seed(0)
    edges = torch.rand(8, 8) < 0.3
    edges |= edges.T | torch.eye(8, dtype=torch.bool)  # (N, N): undirected, with self-loops
    q = k = torch.randn(2, 8, 4)  # (H, N, d)
    _, weights = scaled_dot_product(q, k, k, edges)  # (H, N, N)
    driver = page(attention_data([Layer("layers.0", "self", weights)],
                                 [f"{n}:node" for n in range(8)]))
    ready(driver)
    grey = [226, 226, 226]
    for i in range(8):
        for j in range(8):
            assert (_pixel(driver, i, j) == grey) == (not edges[i, j]), (i, j)
    assert "grey: masked" in driver.find_element(By.ID, "legend").text
    hover(driver, '.qtok[data-index="0"]')
    rows = driver.find_elements(By.CSS_SELECTOR, "#readout ol.weights li")
    assert ["masked" in r.get_attribute("class") for r in rows] == (~edges[0]).tolist()


def test_every_map_sits_in_its_layers_row_and_its_heads_column(page):
    """With a first layer of one head and a second of three, the grid had one column of maps:
    layer 2's heads 2 and 3 slid under layer 3's label, so the map beside "L3" was layer 2's.
    Each map now sits in the row of its layer's label and the column of its head's."""
    rng = np.random.default_rng(0)
    layers = []
    for i, H in enumerate((1, 3, 2)):
        w = rng.random((H, 4, 4))
        layers.append(Layer(f"layers.{i}", "self", w / w.sum(-1, keepdims=True)))
    driver = page(attention_data(layers, list("abcd")))
    ready(driver)
    rows = [e.rect for e in driver.find_elements(By.CSS_SELECTOR, "#grid .layer-label")]
    columns = [e.rect for e in driver.find_elements(By.CSS_SELECTOR, "#grid .head-label")]
    assert len(rows) == 3 and len(columns) == 3
    thumbs = driver.find_elements(By.CSS_SELECTOR, "#grid canvas.thumb")
    assert len(thumbs) == 6
    for thumb in thumbs:
        l, h = int(thumb.get_attribute("data-layer")), int(thumb.get_attribute("data-head"))
        box = thumb.rect
        row, column = rows[l], columns[h]
        assert box["y"] <= row["y"] + row["height"] / 2 <= box["y"] + box["height"], (l, h)
        assert box["x"] <= column["x"] + column["width"] / 2 <= box["x"] + box["width"], (l, h)


def test_a_short_label_of_wide_letters_is_not_cut(page):
    """The query column was sized by counting characters at an average Latin letter's width:
    a token of wide letters (capital Cyrillic, "W" and "M", and Chinese or Japanese characters,
    twice as wide again) was cut with "…" although it is short and the column could have held
    it. Every label of at most 14 characters is now shown whole, hovered (bold) or not. (The
    Chinese and Japanese case cannot be checked here: this machine has no CJK font, and
    Chromium draws their missing glyphs narrow.)"""
    tokens = ["ЩЕДРОСТЬ", "ЖЮРИ", "ШУМ", "ok"]  # capital Cyrillic: "generosity", "jury", "noise"
    T = len(tokens)
    driver = page(attention_data([Layer("self", "self", np.full((1, T, T), 1 / T))], tokens))
    ready(driver)
    cut = "return [...document.querySelectorAll('.qtok .label')]" \
          ".filter((e) => e.scrollWidth > e.clientWidth).map((e) => e.textContent)"
    assert driver.execute_script(cut) == []
    for i in range(T):
        hover(driver, f'.qtok[data-index="{i}"]')
        assert driver.execute_script(cut) == [], tokens[i]


def test_the_weights_can_be_read_without_a_mouse(page, course_model):
    """The tokens answered only the mouse: with the keyboard alone (Tab, Enter) no weight could
    be read. Tab now reaches every query and key label and reads its weights out as a hover
    does; Enter pins it, and Esc unpins."""
    maps, data = course_model
    driver = page(data)
    ready(driver)
    focused = "const e = document.activeElement; " \
              "return ['qtok', 'ktok'].filter((c) => e.classList.contains(c)) + ' ' + " \
              "(e.dataset.index || '')"
    for _ in range(12):  # past the group button, the two boxes and the 6 keys
        ActionChains(driver).send_keys(Keys.TAB).perform()
        if driver.execute_script(focused) == "qtok 0":
            break
    assert driver.execute_script(focused) == "qtok 0"
    about = driver.find_element(By.CSS_SELECTOR, "#readout .about").text
    assert about.startswith("query 0 “3”")
    shown = {k: float(w) for k, w in readout(driver, "data-key").items()}
    assert shown == pytest.approx({k: float(w) for k, w in enumerate(maps[0][0, 0])}, abs=1e-3)
    assert driver.find_element(By.ID, "readout").get_attribute("aria-live") == "polite"
    # → shows the next head: the labels are drawn anew, and the keyboard stays on query 0
    # (review: focus fell to the page, and the next Tab started again from the first key)
    ActionChains(driver).send_keys(Keys.ARROW_RIGHT).perform()
    assert driver.execute_script(focused) == "qtok 0"
    shown = {k: float(w) for k, w in readout(driver, "data-key").items()}
    assert shown == pytest.approx({k: float(w) for k, w in enumerate(maps[0][1, 0])}, abs=1e-3)
    ActionChains(driver).send_keys(Keys.ARROW_LEFT).perform()
    ActionChains(driver).send_keys(Keys.TAB).perform()       # the next query
    assert driver.execute_script(focused) == "qtok 1"
    assert driver.find_element(By.CSS_SELECTOR, "#readout .about").text.startswith("query 1")
    ActionChains(driver).send_keys(Keys.ENTER).send_keys(Keys.TAB).perform()   # pin, move on
    assert driver.find_element(By.CSS_SELECTOR, "#readout .about").text.startswith("query 1")
    ActionChains(driver).send_keys(Keys.ESCAPE).perform()
    assert driver.find_element(By.CSS_SELECTOR, "#readout .about").text.startswith("query 2")


def _tab(driver, *keys):
    ActionChains(driver).send_keys(*keys).perform()
    return driver.switch_to.active_element


def _tab_to(driver, selector, tries=12):
    """Tab until the keyboard is on an element matching ``selector``; that element."""
    for _ in range(tries):
        on = _tab(driver, Keys.TAB)
        if driver.execute_script("return arguments[0].matches(arguments[1])", on, selector):
            return on
    raise AssertionError(f"Tab never reached {selector}")


def test_the_heads_are_one_tab_stop_of_named_buttons(page, course_model):
    """The small maps answered only the mouse, and a screen reader met 6 unnamed canvases: the
    keyboard could not reach the grid, nor hear which head was shown. The grid is now one tab
    stop (the shown head's map), a named button that says whether it is shown; ← → ↑ ↓ there
    move the selection and the keyboard with it, and Tab goes on past the grid."""
    _, data = course_model
    driver = page(data)
    ready(driver)
    on = _tab_to(driver, "canvas.thumb")
    assert (on.get_attribute("data-layer"), on.get_attribute("data-head")) == ("0", "0")
    assert (on.aria_role, on.accessible_name) == ("button", "layer 1, head 1")
    ring = "return getComputedStyle(arguments[0]).outlineColor"
    focused = driver.execute_script(ring, on)  # the keyboard's place, not only "shown"'s red
    pressed = "return [...document.querySelectorAll('canvas.thumb')].filter((c) => " \
              "c.getAttribute('aria-pressed') === 'true').map((c) => c.getAttribute('aria-label'))"
    assert driver.execute_script(pressed) == ["layer 1, head 1"]
    on = _tab(driver, Keys.ARROW_RIGHT, Keys.ARROW_DOWN)
    assert on.accessible_name == "layer 2, head 2"
    assert driver.find_element(By.ID, "layer-label").text == "layer 2 · head 2"
    assert driver.execute_script(pressed) == ["layer 2, head 2"]
    assert not _tab(driver, Keys.TAB).get_attribute("data-head")  # one stop: out of the grid
    assert driver.execute_script(ring, on) != focused  # the ring left with the keyboard
    ActionChains(driver).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT).perform()
    assert driver.switch_to.active_element.accessible_name == "layer 2, head 2"
    driver.find_element(By.ID, "average-heads").click()  # every head of the layer is shown
    assert driver.execute_script(pressed) == ["layer 2, head 1", "layer 2, head 2"]


def test_the_groups_are_tabs_that_arrows_move_between(page, translation):
    """On a group's tab, → changed the head instead of the group, and each of the three tabs
    was a tab stop of its own. As the WAI-ARIA tabs pattern has it, the shown group's tab is
    the one stop and ← → Home End move between the groups, each one said selected."""
    _, data = translation
    driver = page(data)
    ready(driver)
    on = _tab(driver, Keys.TAB)
    assert (on.aria_role, on.accessible_name) == ("tab", "encoder self-attention")
    on = _tab(driver, Keys.ARROW_RIGHT)
    assert on.accessible_name == "decoder self-attention"
    assert on.get_attribute("aria-selected") == "true"
    assert driver.find_element(By.ID, "layer-label").text == \
        "decoder self-attention · layer 1 · head 1"
    assert _tab(driver, Keys.END).accessible_name == "cross-attention"
    on = _tab(driver, Keys.ARROW_RIGHT)
    assert on.accessible_name == "encoder self-attention"  # round to the first
    panel = driver.find_element(By.CSS_SELECTOR, "[role=tabpanel]")
    assert panel.get_attribute("aria-labelledby") == on.get_attribute("id")
    assert _tab(driver, Keys.TAB).get_attribute("id") == "average-heads"  # past the other tabs


def test_g_from_a_source_token_past_the_decoders_last_keeps_the_keyboard_on_a_token(page,
                                                                                    translation):
    """`g` on the source's key 4 showed the decoder's self-attention, whose input has 4 tokens:
    the keyboard fell to the page (the next Tab began again at the group tabs) and the weights
    read "Hover a token". It now lands on the decoder's last key and reads it out."""
    _, data = translation
    driver = page(data)
    ready(driver)
    on = _tab_to(driver, '.ktok[data-index="4"]')
    assert on.get_attribute("title") == "key 4: </s>"
    on = _tab(driver, "g")
    assert driver.find_element(By.ID, "layer-label").text == \
        "decoder self-attention · layer 1 · head 1"
    assert "ktok" in on.get_attribute("class").split(), on.tag_name  # not the page's body
    assert on.get_attribute("data-index") == "3"
    about = driver.find_element(By.CSS_SELECTOR, "#readout .about").text
    assert about.startswith("key 3 “x” receives from")


def test_a_screen_reader_hears_each_token_and_whether_it_is_pinned(page):
    """A token's name was its shown label: thinned characters were read as the run they
    stand for ("the␣q" for "t"), a hidden label's token by its tooltip, and pinning one was
    seen but not said. Each token is now named by itself and says when it is pinned."""
    text = "the quick brown fox jumps over the lazy dog; attention is all you need"
    driver = page(attention_data([Layer("causal", "causal", _causal(len(text)))], list(text)))
    ready(driver)
    tokens = driver.find_elements(By.CSS_SELECTOR, ".qtok")
    names = [t.accessible_name for t in tokens[:6]]
    assert names == [f"query {i}: {c}" for i, c in enumerate("the␣qu")]
    assert driver.find_element(By.CSS_SELECTOR, '.ktok[data-index="4"]').accessible_name \
        == "key 4: q"
    on = _tab_to(driver, '.qtok[data-index="0"]', tries=len(text) + 8)
    on = _tab(driver, Keys.TAB, Keys.TAB, Keys.ENTER)
    assert (on.get_attribute("data-index"), on.get_attribute("aria-pressed")) == ("2", "true")
    pressed = driver.find_elements(By.CSS_SELECTOR, ':is(.qtok, .ktok)[aria-pressed="true"]')
    assert pressed == [on]
    _tab(driver, Keys.ESCAPE)
    assert on.get_attribute("aria-pressed") == "false"


def test_the_large_map_says_what_it_shows_and_the_weight_under_the_pointer(page, course_model):
    """The large map was an unnamed canvas, silent to a screen reader. It is an image named
    by the map it shows, and by the query, key and weight of the cell under the pointer; the
    cell's row of the weights is marked by more than its colour."""
    maps, data = course_model
    driver = page(data)
    ready(driver)
    main = driver.find_element(By.ID, "main-map")
    assert main.aria_role == "image"
    assert main.accessible_name == "attention map, layer 1 · head 1: 6 queries × 6 keys"
    driver.find_element(By.CSS_SELECTOR, 'canvas.thumb[data-layer="2"][data-head="1"]').click()
    cell = main.size["width"] / 6
    x, y = -main.size["width"] / 2 + 3.5 * cell, -main.size["height"] / 2 + 2.5 * cell
    ActionChains(driver).move_to_element_with_offset(main, int(x), int(y)).perform()  # (2, 3)
    assert main.accessible_name == ("attention map, layer 3 · head 2: 6 queries × 6 keys; "
                                    f"query 2 “4”, key 3 “1”: weight {shown(maps[2][1, 2, 3])}")
    here = driver.find_element(By.CSS_SELECTOR, "#readout li.here")
    assert here.get_attribute("aria-current") == "true"
    assert here.value_of_css_property("font-weight") == "600"


@pytest.mark.parametrize("width", [1280, 400])
def test_sixteen_heads_keep_their_labels_apart(page, width):
    """With 16 heads the grid's head labels ran together ("h10h11h12h13"): a learner could not
    tell which column was which head. Each column's number now stands a space or more clear of
    the next, on a laptop's width and a phone's."""
    rng = np.random.default_rng(0)
    w = rng.random((16, 6, 6))
    data = attention_data([Layer(f"layers.{i}", "self", w / w.sum(-1, keepdims=True))
                           for i in range(2)], list("abcdef"))
    driver = page(data)
    with _width(driver, width):
        ready(driver)
        boxes = _boxes(driver, "#grid .head-label")
        labels = driver.find_elements(By.CSS_SELECTOR, "#grid .head-label")
        assert [int(label.text.lstrip("h")) for label in labels] == list(range(1, 17))
        gaps = [b[0] - a[2] for a, b in zip(boxes, boxes[1:])]  # "h10h11": gaps of 0
        assert min(gaps) >= 3, gaps  # a space's width, at least
        assert max(right for _, _, right, _ in boxes) <= width


def test_a_masked_key_says_so_in_the_weights_not_only_in_grey(page):
    """A key a query cannot see (a causal map's later tokens) was told apart from a weight of
    0 by its grey alone: a screen reader read out "0.000", and so did a reader who cannot tell
    the grey. Its row of the weights now says "masked"; a key it sees keeps its bar."""
    driver = page(attention_data([Layer("causal", "causal", _causal(4))], list("abcd")))
    ready(driver)
    hover(driver, '.qtok[data-index="1"]')
    rows = driver.find_elements(By.CSS_SELECTOR, "#readout ol.weights li")
    assert ["masked" in row.text for row in rows] == [False, False, True, True]
    assert [len(row.find_elements(By.CSS_SELECTOR, ".bar")) for row in rows] == [1, 1, 0, 0]


def test_a_title_with_a_word_longer_than_a_phone_stays_on_the_page(page):
    """`attnlab view RUN --input` with a word of 60 letters put it in the title, which ran
    past a 390 px phone's edge: the page scrolled sideways and the title was cut. A deep run
    directory in the line under it did the same."""
    word = "a" * 30 + "b" * 30
    data = attention_data([Layer("attn", "self", np.full((1, 3, 3), 1 / 3))],
                          ["the", word, "film"], title=f"classify: attention on 'the {word} film'",
                          task="classify", run="/home/reader/" + "x" * 60 + "/runs/classify")
    driver = page(data)
    with _width(driver, 390):
        ready(driver)
        got = driver.execute_script("""
            const h = document.querySelector('header').getBoundingClientRect();
            return {page: document.documentElement.scrollWidth,
                    view: document.documentElement.clientWidth, header: h.right,
                    title: document.querySelector('header h1').textContent};""")
        assert got["page"] <= got["view"] and got["header"] <= got["view"], got
        assert word in got["title"]  # broken across lines, not shortened


def test_a_runs_page_shows_its_weights_step_and_every_metric_as_metrics_json_holds_it(page,
                                                                                      tmp_path):
    """A reader comparing runs opened each run's page and saw its attention but not what the
    run reached nor which step's weights these were. The page now shows both, each number as
    metrics.json holds it, a null (a NaN loss) said so; a run without metrics.json says it has
    none. On a phone the line wraps inside the page."""
    from attnlab.explorer.record import run_record

    run = tmp_path / "run"  # a run directory of metrics.json alone
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({
        "best_metric": "val_loss", "best_step": 20, "best_value": 2.65887, "steps": 40,
        "test_token_accuracy": 0.0957031, "val_loss": 2.65887, "val_perplexity": None}))
    layers = [Layer("attn", "self", np.full((1, 3, 3), 1 / 3))]
    driver = page(attention_data(layers, list("abc"), task="lm", run=str(run),
                                 record=run_record(run)))
    with _width(driver, 390):
        ready(driver)
        got = driver.execute_script("""
            return {weights: document.querySelector('header .run-weights').textContent,
                    metrics: [...document.querySelectorAll('header .run-metrics .metric')].map(
                        (m) => [m.querySelector('dt').textContent,
                                m.querySelector('dd').textContent,
                                m.classList.contains('not-finite')]),
                    page: document.documentElement.scrollWidth,
                    view: document.documentElement.clientWidth};""")
        assert got["weights"] == ("weights model.safetensors: step 20 of 40, the best val_loss "
                                  "(2.65887)")
        assert got["metrics"] == [
            ["test_token_accuracy", "0.0957031", False], ["val_loss", "2.65887", False],
            ["val_perplexity", "not finite (null)", True], ["best_metric", "val_loss", False],
            ["best_step", "20", False], ["best_value", "2.65887", False],
            ["steps", "40", False]]
        assert got["page"] <= got["view"], got
    (run / "metrics.json").unlink()
    driver = page(attention_data(layers, list("abc"), record=run_record(run)))
    ready(driver)
    note = driver.find_element(By.CSS_SELECTOR, "header .run-metrics.none").text
    assert note.startswith(f"no metrics yet: {run}/metrics.json is not written")
    assert not console_errors(driver)


def test_a_checkpoints_page_says_the_metrics_are_of_other_weights(page, tmp_path):
    """`view --checkpoint last` of a --keep-best run showed step 30's weights over step 18's
    scores, as if they were theirs. The page now says whose they are, over the numbers."""
    from attnlab.explorer.record import run_record

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({
        "best_metric": "val_acc", "best_step": 18, "best_value": 0.13, "steps": 30,
        "test_token_accuracy": 0.100569}))
    layers = [Layer("attn", "self", np.full((1, 3, 3), 1 / 3))]
    driver = page(attention_data(layers, list("abc"), task="reverse", run=str(run),
                                 record=run_record(run, step=30,
                                                   checkpoint="checkpoints/last.ckpt")))
    ready(driver)
    got = driver.execute_script("""
        const of = document.querySelector('header .run-metrics-of');
        return {of: of.textContent, next: of.nextElementSibling.className,
                weights: document.querySelector('header .run-weights').textContent};""")
    assert got == {"of": "metrics.json: of model.safetensors, step 18, not these weights",
                   "next": "run-metrics",
                   "weights": "weights checkpoints/last.ckpt: step 30 of 30, the last saved step"}
    assert not console_errors(driver)
