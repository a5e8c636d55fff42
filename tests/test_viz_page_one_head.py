"""The attention page of a one-head model (the course's first models, a one-head graph layer):
no "average the heads" checkbox that does nothing, and its hint names no key that has nothing
to move between (←/→ head, ↑/↓ layer on one layer, g on one group). It offered them all, and
`a` showed "mean of 1 heads"."""
import numpy as np
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from attnlab.explorer import Layer, attention_data


pytestmark = pytest.mark.slow  # a browser

TOKENS = "the cat sat on the mat".split()


def _page(page, heads, layers):
    w = np.random.default_rng(0).dirichlet(np.ones(len(TOKENS)), size=(heads, len(TOKENS)))
    driver = page(attention_data([Layer(f"layers.{i}", "self", w) for i in range(layers)],
                                 TOKENS))
    hint = driver.find_element(By.CSS_SELECTOR, ".hint").text
    offered = driver.find_element(By.ID, "average-heads").is_displayed()
    driver.find_element(By.TAG_NAME, "body").send_keys("a")
    return hint, offered, driver.find_element(By.ID, "layer-label").text


def test_a_one_head_page_offers_no_heads_to_move_between_or_average(page):
    hint, offered, label = _page(page, heads=1, layers=1)
    assert not offered and label == "layer 1 · head 1"
    assert "head" not in hint and "layer" not in hint and "next group" not in hint
    assert "Tab: token by token" in hint and "r: scale each row" in hint


def test_two_layers_of_one_head_offer_the_layers_only(page):
    hint, offered, label = _page(page, heads=1, layers=2)
    assert not offered and "↑/↓ layer" in hint and "←/→ head" not in hint


def test_two_heads_are_still_averaged(page):
    hint, offered, label = _page(page, heads=2, layers=1)
    assert offered and "←/→ head" in hint and "a: average the heads" in hint
    assert label == "layer 1 · mean of 2 heads"


def test_a_one_head_layer_after_two_head_layers_offers_no_average(page):
    """A GAT graph run with --num-heads 2 ends in a 1-head output layer: there the checkbox
    is hidden and `a` does nothing (it showed "mean of 1 heads"); its 2-head layer still
    averages."""
    rng = np.random.default_rng(0)
    T = len(TOKENS)
    driver = page(attention_data(
        [Layer("layers.0", "self", rng.dirichlet(np.ones(T), size=(2, T))),
         Layer("layers.1", "self", rng.dirichlet(np.ones(T), size=(1, T)))], TOKENS, task="graph"))
    body = driver.find_element(By.TAG_NAME, "body")
    label = lambda: driver.find_element(By.ID, "layer-label").text  # noqa: E731
    shown = lambda: driver.find_element(By.ID, "average-heads").is_displayed()  # noqa: E731
    assert shown()
    body.send_keys(Keys.ARROW_DOWN)
    assert not shown() and label() == "layer 2 · head 1"
    body.send_keys("a")
    assert label() == "layer 2 · head 1"
    body.send_keys(Keys.ARROW_UP)
    assert shown()
    body.send_keys("a")
    assert label() == "layer 1 · mean of 2 heads"
