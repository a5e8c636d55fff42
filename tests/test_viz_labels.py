"""The PNG attention figures: tick labels that never overlap, whatever the length of the input
or of its tokens, and colour bars that say what they measure."""
import pytest
import torch

from attnlab import viz

WORDS = ["six", "hundred", "and", "thousand", "seventy", "two", "million", "nine", "<eos>"]


@pytest.fixture
def drawn(monkeypatch):
    """Figures plot_attention made, kept open instead of written."""
    figures = []
    monkeypatch.setattr(viz, "_save", lambda fig, path: figures.append(fig) or path)
    return figures


def panels(fig):
    return [ax for ax in fig.axes if ax.get_title().startswith("layer")]


def bars(fig):
    return [ax for ax in fig.axes if not ax.get_title()]


@pytest.mark.parametrize("keys, queries", [
    (WORDS, list("abcde")),                                   # the translation's source words
    ([f"token_{i}_long" for i in range(40)], [f"q{i}" for i in range(40)]),
    ([" the"] * 128, [f"w{i}" for i in range(128)]),          # a language model's context
    (["a-very-long-word-piece-indeed"] * 6, ["x"] * 3),       # cut to 14 characters
])
def test_no_two_tick_labels_overlap(drawn, keys, queries):
    maps = [torch.softmax(torch.randn(2, len(queries), len(keys)), -1)]
    viz.plot_attention(maps, keys, queries, "unused.png")
    (fig,) = drawn
    fig.canvas.draw()
    for ax in panels(fig):
        assert ax.get_xticklabels() and ax.get_yticklabels()
        assert not viz.overlapping_ticks(fig, ax.xaxis), [t.get_text() for t in ax.get_xticklabels()]
        assert not viz.overlapping_ticks(fig, ax.yaxis)
        assert all(len(t.get_text()) <= 14 for t in ax.get_xticklabels())


def test_every_key_is_labelled_when_there_is_room(drawn):
    viz.plot_attention([torch.rand(1, 5, 9)], WORDS, list("abcde"), "unused.png")
    (ax,) = panels(drawn[0])
    assert [t.get_text() for t in ax.get_xticklabels()] == WORDS
    assert [t.get_text() for t in ax.get_yticklabels()] == list("abcde")


def test_colour_bars_are_labelled(drawn):
    viz.plot_attention([torch.rand(2, 3, 3)], list("abc"), list("abc"), "unused.png")
    labels = [bar.get_ylabel() for bar in bars(drawn[0])]
    assert labels == ["attention weight"] * 2
