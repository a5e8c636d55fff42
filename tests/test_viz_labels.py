"""The PNG attention figures: tick labels that never overlap, whatever the length of the input
or of its tokens, and colour bars that say what they measure."""
import warnings

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


@pytest.mark.slow
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


@pytest.mark.slow
def test_every_key_is_labelled_when_there_is_room(drawn):
    viz.plot_attention([torch.rand(1, 5, 9)], WORDS, list("abcde"), "unused.png")
    (ax,) = panels(drawn[0])
    assert [t.get_text() for t in ax.get_xticklabels()] == WORDS
    assert [t.get_text() for t in ax.get_yticklabels()] == list("abcde")


@pytest.mark.slow
def test_colour_bars_are_labelled(drawn):
    viz.plot_attention([torch.rand(2, 3, 3)], list("abc"), list("abc"), "unused.png")
    labels = [bar.get_ylabel() for bar in bars(drawn[0])]
    assert labels == ["attention weight"] * 2


@pytest.mark.slow
def test_the_jet_figure_says_what_its_arrows_and_discs_mean(drawn):
    """A reader of the jet figure is told on it which way an arrow points (query
    to key), the weights the thickest and thinnest arrows stand for, and the pT of a disc."""
    import numpy as np

    eta, phi = np.array([0.0, 0.3, -0.3, 0.1]), np.array([0.0, 0.2, 0.1, -0.4])
    pt = np.array([200.0, 20.0, 10.0, 50.0])
    w = np.full((4, 4), 0.02)
    w[1:, 0] = [0.9, 0.6, 0.3]          # three soft particles look at the hard one: a star
    viz.plot_jet_attention(eta, phi, pt, w, "unused.png", lines=3)
    (ax,) = drawn[0].axes
    arrows = [a for a in ax.texts if a.arrow_patch is not None]
    assert len(arrows) == 3
    assert {tuple(a.xy) for a in arrows} == {(0.0, 0.0)}        # every head on the key
    drawn[0].canvas.draw()
    centre = ax.transData.transform((0.0, 0.0))
    radius = np.sqrt(404) / 2 * drawn[0].dpi / 72            # the hard disc, in pixels
    for arrow in arrows:                                     # each head shows beside the disc
        tip = arrow.arrow_patch.get_path().vertices
        assert np.hypot(*(tip - centre).T).min() > radius
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["query → key, weight 0.90", "query → key, weight 0.30",
                      "pT 200 GeV (disc area ∝ pT)", "pT 50 GeV"]


@pytest.mark.slow
def test_the_jet_legend_never_shows_two_entries_that_read_the_same(drawn):
    """A freshly trained tagger attends almost uniformly: its strongest and weakest arrows
    (0.0345 and 0.0338) were both written "weight 0.03", two legend entries that read alike
    for arrows of different widths. They are written until they differ; arrows of one weight
    are one entry; a constituent's weight on itself is no arrow, counted or in the legend."""
    import numpy as np

    eta, phi = np.array([0.0, 0.3, -0.3]), np.array([0.0, 0.2, 0.1])
    pt = np.array([1.6, 0.8, 0.4])  # soft constituents: a quarter of 1.6 GeV is not "0 GeV"
    w = np.full((3, 3), 0.034)
    w[1, 0], w[2, 1] = 0.0345, 0.0338
    viz.plot_jet_attention(eta, phi, pt, w, "unused.png", lines=2)
    legend = [t.get_text() for t in drawn[0].axes[0].get_legend().get_texts()]
    assert legend == ["query → key, weight 0.035", "query → key, weight 0.034",
                      "pT 1.60 GeV (disc area ∝ pT)", "pT 0.40 GeV"]
    # more lines asked than a jet of 3 has pairs (6): its self-weights are no arrows, and
    # were counted ("the 9 strongest") as arrows of "weight 0.00"
    viz.plot_jet_attention(eta, phi, pt, np.full((3, 3), 0.25), "unused.png", lines=40)
    (ax,) = drawn[1].axes
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["query → key, weight 0.25", "pT 1.60 GeV (disc area ∝ pT)",
                      "pT 0.40 GeV"]
    assert ax.get_title() == "3 constituents; the 6 strongest attention weights"
    assert len([a for a in ax.texts if a.arrow_patch is not None]) == 6


@pytest.mark.slow
def test_a_jet_without_arrows_has_no_arrow_in_its_legend_and_a_half_gev_rounds_up(drawn):
    """A jet of one constituent draws no arrow, but its legend showed "query → key, weight
    0.00"; and a quarter of 50 GeV, 12.5, was written "12" (the format's round-half-even)
    where a reader rounds it to 13."""
    import numpy as np

    viz.plot_jet_attention([0.1], [-0.2], [50.0], np.ones((1, 1)), "unused.png")
    (ax,) = drawn[0].axes
    assert [a for a in ax.texts if a.arrow_patch is not None] == []
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["pT 50 GeV (disc area ∝ pT)", "pT 13 GeV"]
    assert ax.get_title() == "1 constituent; no pair to draw"


def test_the_pe_heatmap_counts_positions_and_dimensions_from_0_as_its_curves_and_pe_do(drawn):
    """The heatmap once put position 0 at x = 1 and dimension 0 at y = 1, while the curves
    below it (and PE(pos, i)) count from 0: read at position 2, dimension 1, it showed
    PE(1, 0) = sin 1 = 0.84 instead of PE(2, 1) = cos 2 = -0.42."""
    import math

    viz.plot_positional_encoding(8, 10, "unused.png")
    (fig,) = drawn
    (heatmap,) = [ax for ax in fig.axes if ax.get_images()]
    image = heatmap.get_images()[0]
    left, right, bottom, top = image.get_extent()
    table = image.get_array()  # (d_model, max_len), row 0 at the bottom (origin "lower")
    rows, columns = table.shape

    def shown_at(position: float, dimension: float) -> float:
        column = math.floor((position - left) / (right - left) * columns)
        row = math.floor((dimension - bottom) / (top - bottom) * rows)
        return float(table[row, column])
    assert shown_at(2, 1) == pytest.approx(math.cos(2), abs=1e-6)
    assert shown_at(3, 0) == pytest.approx(math.sin(3), abs=1e-6)
    assert shown_at(0, 7) == pytest.approx(1.0)  # cos 0, in the last dimension
    curve = next(ax for ax in fig.axes if ax.get_title() == "dimension 1 (cos)")
    x, y = curve.get_lines()[0].get_data()
    assert x[2] == 2 and y[2] == pytest.approx(math.cos(2), abs=1e-6)


def test_the_pe_colour_bar_spans_minus_1_to_1_with_whole_position_ticks(drawn):
    """Over three positions the heatmap's colours ran from the table's own minimum (-0.42) to
    1, so its diverging map drew PE = 0 red and 0.3 white, and the position axis was ticked
    at -0.5, 0.0, 0.5, ... though there is no position 0.5."""
    viz.plot_positional_encoding(16, 3, "unused.png")
    (fig,) = drawn
    (heatmap,) = [ax for ax in fig.axes if ax.get_images()]
    assert heatmap.get_images()[0].get_clim() == (-1, 1)  # white is 0, as the bar reads
    fig.canvas.draw()
    for ax in fig.axes[:1] + [ax for ax in fig.axes if ax.get_title().startswith("dimension")]:
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks == [0, 1, 2], (ax.get_title(), ticks)


def test_characters_no_font_draws_are_named_once(tmp_path, capsys):
    """matplotlib warned once per missing character, a screen of warnings for a Chinese
    sentence, and the figure showed boxes without saying so. Yi syllables are in none of the
    fonts attnlab falls back on: one note names each once."""
    yi = ["\ua000", "\ua001", "\ua000"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # each warning shown, as matplotlib's were
        path = viz.plot_attention(torch.rand(1, 2, 3, 3), yi, yi, tmp_path / "yi.png")
    assert not caught  # no warning left over
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"note: {path}: the fonts matplotlib uses "
                                                   f"here cannot draw 2 characters of its "
                                                   f"labels (\ua000\ua001)")
    assert path.stat().st_size > 0


def test_fallback_fonts_are_added_only_where_installed_and_only_for_attnlabs_figures(
        tmp_path):
    """A family matplotlib cannot find is a log line per figure: only installed ones are
    added, after the user's own; and only while attnlab draws (review: they stayed in the
    user's rcParams)."""
    import matplotlib
    from matplotlib import font_manager

    before = list(matplotlib.rcParams["font.family"])
    family = viz._with_fallback_fonts()
    installed = {font.name for font in font_manager.fontManager.ttflist}
    assert family[:len(before)] == before
    assert family[len(before):] == [n for n in viz.FALLBACK_FONTS if n in installed]
    viz.plot_attention(torch.rand(1, 2, 2, 2), ["a", "b"], ["a", "b"], tmp_path / "a.png")
    assert list(matplotlib.rcParams["font.family"]) == before


def test_other_warnings_keep_the_users_filters(tmp_path, monkeypatch):
    """Only the missing-glyph warnings are taken: another warning raised while a figure is
    drawn still meets the user's "error" filter, where it is raised."""
    import matplotlib.figure

    def warn(*args, **kwargs):
        warnings.warn("something else", UserWarning)

    monkeypatch.setattr(matplotlib.figure.Figure, "draw_without_rendering", warn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="something else"):
            viz.plot_attention(torch.rand(1, 2, 2, 2), ["a", "b"], ["a", "b"],
                               tmp_path / "a.png")
