"""The attention page's key labels: keys that fit across their column (a character-level
language model's letters, a reversal's digits) stand upright, side by side and apart, so a
class reads "t h e ␣ q u i c k" off a projector; they were turned on their side like long
words, which still are."""
import numpy as np
import pytest
from selenium.webdriver.common.by import By

from attnlab.explorer import Layer, attention_data


pytestmark = pytest.mark.slow  # a browser


def _labels(page, tokens):
    T = len(tokens)
    w = np.tril(np.random.default_rng(0).random((2, T, T)))
    driver = page(attention_data([Layer("attn", "causal", w / w.sum(-1, keepdims=True))],
                                 tokens))
    return driver.execute_script("""
        return [...document.querySelectorAll('.ktok .label')].map((e) => {
          const r = e.getBoundingClientRect();
          return [e.textContent, getComputedStyle(e).writingMode, r.left, r.right]; });""")


def test_single_characters_stand_upright_and_apart(page):
    labels = _labels(page, list("the quick fox"))
    assert [text for text, *_ in labels] == list("the␣quick␣fox")
    assert all(mode == "horizontal-tb" for _, mode, *_ in labels)
    assert all(a[3] <= b[2] for a, b in zip(labels, labels[1:]))  # left to right, apart


def test_words_stay_on_their_side(page):
    labels = _labels(page, ["three", "hundred", "and", "forty", "two"])
    assert all(mode == "vertical-rl" for _, mode, *_ in labels)
