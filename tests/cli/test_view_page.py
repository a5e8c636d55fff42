"""The attention page a teacher shows in class, in headless Chromium: the heads' mean stays
chosen across a layer of one head, and so on (Debian's chromium and chromium-driver, as
tests/explorer/conftest.py drives them)."""
import numpy as np
import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from attnlab.explorer import Layer, attention_data
from tests.explorer.conftest import browser, page  # noqa: F401 (fixtures)

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
