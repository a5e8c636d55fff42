"""The PNG figures fit a screen at 100 % (unbounded, a 40-character lm input made
5,800 × 2,900 px with its title struck through, a graph 10,018 × 2,504 px with 7 empty axes, a
long translation's title was cut at both edges): at most about 2,000 px a side, one panel per
map and no empty one, a title inside the figure and clear of the panels, a legend over no
curve."""
import numpy as np
import pytest
import torch

from attnlab import viz

DPI = 100  # viz._save's


@pytest.fixture
def drawn(monkeypatch):
    """Figures plot_attention made, kept open (laid out as when written) instead of written."""
    figures = []

    def keep(fig, path):
        fig.canvas.draw()
        figures.append(fig)
        return path
    monkeypatch.setattr(viz, "_save", keep)
    yield figures
    import matplotlib.pyplot as plt

    for fig in figures:  # (kept open for the test only: matplotlib warns past 20)
        plt.close(fig)


def maps_of(heads, T_q, T_k=None):
    return [torch.softmax(torch.randn(H, T_q, T_k or T_q), -1) for H in heads]


def panels(fig):
    return [ax for ax in fig.axes if ax.get_images() and "layer" in ax.get_title()]


def pixels(fig):
    w, h = fig.get_size_inches() * DPI
    return round(w), round(h)


@pytest.mark.slow
@pytest.mark.parametrize("heads, T, expected", [
    ([2, 2], 40, 4),             # an lm's 40 characters
    ([8, 1], 34, 9),             # the karate club's GAT: layer 2 has one head
    ([4] * 6, 64, 6),            # 24 maps: one mean per layer
    ([12] * 12, 128, 12),        # a 12 × 12 model: one mean per layer
    ([1], 3, 1),
])
def test_a_figure_fits_2000_px_with_a_panel_per_map_and_none_empty(drawn, heads, T, expected):
    tokens = list("the quick brown fox jumps over the lazy dog" * 3)[:T]
    viz.plot_attention(maps_of(heads, T), tokens, tokens, "unused.png", title="lm: attention")
    (fig,) = drawn
    width, height = pixels(fig)
    assert width <= 2000 and height <= 2000, (width, height)
    shown = panels(fig)
    assert len(shown) == expected
    # every axes of the figure is a drawn map or its colour bar: nothing empty
    assert len(fig.axes) == 2 * expected
    assert all(ax.get_images() or ax.get_ylabel() == "attention weight" for ax in fig.axes)
    if expected < sum(heads):
        assert all(f"mean of {heads[0]} heads" in ax.get_title() for ax in shown)
    for ax in shown:  # a map drawn at least 1.3 inches a side (130 px): readable, not a stamp
        box = ax.get_window_extent()
        assert min(box.width, box.height) >= 130


@pytest.mark.slow
def test_the_title_is_inside_the_figure_and_clear_of_every_panel(drawn):
    title = "cross-attention (decoder over source) on " + repr(
        "neunhundertneunundneunzigtausendneunhundertneunundneunzig " * 2)
    viz.plot_attention(maps_of([1], 12, 6), [f"w{i}" for i in range(6)],
                       [f"t{i}" for i in range(12)], "unused.png", title=title, kind="cross")
    (fig,) = drawn
    renderer = fig.canvas.get_renderer()
    box = fig._suptitle.get_window_extent(renderer)
    width, height = pixels(fig)
    assert 0 <= box.x0 and box.x1 <= width and box.y1 <= height  # not cut at either edge
    assert "".join(fig._suptitle.get_text().split()) == "".join(title.split())  # all of it
    for ax in panels(fig):
        assert not box.overlaps(ax.get_tightbbox(renderer))  # no panel border through it


@pytest.mark.slow
def test_cross_attention_panels_say_cross(drawn):
    viz.plot_attention(maps_of([2, 2], 5, 4), list("abcd"), list("vwxyz"), "unused.png",
                       kind="cross")
    assert [ax.get_title() for ax in panels(drawn[0])] == [
        f"cross · layer {l}, head {h}" for l in (1, 2) for h in (1, 2)]


def test_causal_panels_draw_the_masked_keys_grey_and_say_so(drawn):
    """An lm's map drew the keys after each query, which the causal mask blocks, in the same
    colour as a weight near 0 that the model chose: a reader could not tell them apart. They
    are grey now (the colour map's "bad" colour), the title says what grey is, and a weight
    above the diagonal that is not 0 (a leak of the future) is still drawn as a weight."""
    import numpy as np
    from matplotlib.colors import to_rgba

    from attnlab.nn import causal_mask, scaled_dot_product

    q = k = torch.randn(2, 5, 4)  # (H, T, d)
    _, weights = scaled_dot_product(q, k, k, causal_mask(5))  # (H, T, T)
    leaked = weights.clone()
    leaked[1, 0, 4] = 0.3  # head 2: query 0 reads key 4
    viz.plot_attention([weights, leaked], list("abcde"), list("abcde"), "unused.png",
                       kind="causal", title="lm")
    fig = drawn[0]
    assert "grey: a key after its query (the causal mask)" in fig._suptitle.get_text()
    above = np.triu(np.ones((5, 5), dtype=bool), 1)
    for i, (ax, shown) in enumerate(zip(panels(fig), [*weights, *leaked])):
        image = ax.get_images()[0]
        grey = np.ma.getmaskarray(image.get_array())
        expected = above.copy()
        expected[0, 4] = i != 3  # the leaked weight is drawn
        assert (grey == expected).all(), ax.get_title()
        assert tuple(image.get_cmap().get_bad()) == to_rgba(viz.BLOCKED)
        np.testing.assert_allclose(image.get_array().filled(0), shown.numpy(), atol=1e-7)


def test_a_graphs_non_edges_are_drawn_grey_not_as_weights_and_the_title_says_so(drawn):
    """A graph's attention map drew each non-edge, which the mask gives no weight, in the
    colour of a real weight of 0: a node's 30 non-neighbours looked like 30 keys the model had
    chosen to ignore. Cells with a weight of exactly 0 in every head are grey now, the title
    says what grey is, and a weight only one head made 0 is still drawn as a weight."""
    import numpy as np
    from matplotlib.colors import to_rgba

    from attnlab.nn import scaled_dot_product

    torch.manual_seed(0)
    edges = torch.rand(6, 6) < 0.4
    edges |= edges.T | torch.eye(6, dtype=torch.bool)  # (N, N): undirected, with self-loops
    q = k = torch.randn(2, 6, 4)  # (H, N, d)
    _, weights = scaled_dot_product(q, k, k, edges)  # (H, N, N)
    weights[1, 0, 0] = 0.0  # one head's weight of 0 where the other head has one
    viz.plot_attention([weights], list("abcdef"), list("abcdef"), "unused.png", title="graph")
    fig = drawn[0]
    assert f"grey: {viz.MASKED_NOTE}" in " ".join(fig._suptitle.get_text().split())
    for ax, shown in zip(panels(fig), weights):
        image = ax.get_images()[0]
        assert (np.ma.getmaskarray(image.get_array()) == ~edges.numpy()).all(), ax.get_title()
        assert tuple(image.get_cmap().get_bad()) == to_rgba(viz.BLOCKED)
        np.testing.assert_allclose(image.get_array().filled(0), shown.numpy(), atol=1e-7)


def test_float16_zeros_are_not_drawn_as_masked(drawn):
    """Weights of a float16 model that underflowed to 0 were greyed under a title saying a
    mask made them (review)."""
    import numpy as np

    logits = torch.tensor([[[0.0, 20.0, 0.0], [20.0, 0.0, 20.0], [0.0, 0.0, 20.0]]])
    half = logits.half().softmax(-1)
    assert (half == 0).any()
    viz.plot_attention([half], list("abc"), list("abc"), "unused.png", title="half")
    assert "grey" not in drawn[0]._suptitle.get_text()
    image = panels(drawn[0])[0].get_images()[0]
    assert not np.ma.getmaskarray(image.get_array()).any()


def test_a_map_without_masked_cells_says_nothing_of_grey(drawn):
    viz.plot_attention(maps_of([2], 3), list("abc"), list("abc"), "unused.png", title="reverse")
    assert "grey" not in drawn[0]._suptitle.get_text()


def test_a_chosen_layer_or_head_is_drawn_alone_under_its_own_numbers(drawn):
    """`plot attention` drew every layer and head (past 16 maps, only the means): a head of
    interest could not be drawn large or alone. layer= and head= choose; the panels keep the
    numbers they have among all the maps."""
    maps = maps_of([2, 3], 4)
    second = ["layer 2, head 1", "layer 2, head 2", "layer 2, head 3"]
    for chosen, titles in [({"layer": 1}, second),
                           ({"head": 1}, ["layer 1, head 2", "layer 2, head 2"]),
                           ({"layer": 1, "head": 2}, ["layer 2, head 3"])]:
        viz.plot_attention(maps, list("abcd"), list("abcd"), "unused.png", **chosen)
        assert [ax.get_title() for ax in panels(drawn[-1])] == titles, chosen
        shown = panels(drawn[-1])[-1].get_images()[0].get_array()
        torch.testing.assert_close(torch.as_tensor(shown), maps[chosen.get("layer", 1)][
            chosen.get("head", 2)])
    for wrong, said in [({"layer": 2}, "layer must be 0 to 1"),
                        ({"head": 2}, "head must be 0 to 1"),
                        ({"layer": 0, "head": 2}, "head must be 0 to 1")]:
        with pytest.raises(ValueError, match=said):
            viz.plot_attention(maps, list("abcd"), list("abcd"), "unused.png", **wrong)


def test_thinned_character_labels_read_as_runs_of_text():
    text = [c if c != " " else "␣" for c in "the quick brown"]  # as viz._short shows them
    positions, texts = viz.thinned_labels(text, 5)
    assert positions == [0, 5, 10] and texts == ["the␣q", "uick␣", "brown"]
    positions, texts = viz.thinned_labels(list("3141592653"), 2)  # symbols: not run together
    assert texts == list("3141592653")[::2]
    positions, texts = viz.thinned_labels([f"w{i}" for i in range(7)], 3, keep=4)
    assert positions == [1, 4] and texts == ["w1", "w4"]


@pytest.mark.slow
def test_a_marked_row_is_outlined_in_every_panel_and_labelled(drawn):
    tokens = [f"{i}:club" for i in range(34)]
    viz.plot_attention(maps_of([8, 1], 34), tokens, tokens, "unused.png", mark_row=33)
    (fig,) = drawn
    for ax in panels(fig):
        (box,) = [p for p in ax.patches if p.get_edgecolor()[:3] != (0, 0, 0)]
        assert box.get_y() == 32.5 and box.get_height() == 1
        labels = {t.get_text(): t for t in ax.get_yticklabels()}
        assert labels["33:club"].get_fontweight() == "bold"


# The legend of a figure of curves is not drawn over them. (06_history's exact match by source
# length had its legend, placed "center right", over the bilinear RNN's last two buckets: 0.534
# and 0.537 could not be seen.)
def points_under(box, line, steps: int = 50) -> list:
    """The data of ``line`` (its vertices and points along its segments, in pixels) that lie
    inside the display box ``box``."""
    xy = line.get_transform().transform(np.column_stack(line.get_data()).astype(float))
    along = [a + (b - a) * t for a, b in zip(xy[:-1], xy[1:]) for t in np.linspace(0, 1, steps)]
    return [p for p in (along or list(xy)) if box.contains(*p)]


# 06_history.ipynb's table, as it was printed beside the figure
HISTORY = {"rnn": [0.984, 0.888, 0.506, 0.447, 0.393, 0.341, 0.146],
           "rnn-additive": [1.0, 0.991, 1.0, 1.0, 1.0, 1.0, 1.0],
           "rnn-bilinear": [0.984, 0.907, 0.885, 0.632, 0.769, 0.534, 0.537],
           "transformer": [1.0, 0.972, 0.966, 0.842, 0.949, 0.966, 1.0]}
BUCKETS = ["1-2", "3-4", "5-6", "7-8", "9-10", "11-12", "13-14"]


@pytest.mark.parametrize("curves", [
    HISTORY,
    {name: values[::-1] for name, values in HISTORY.items()},     # the same, mirrored
    {"exact match": [0.5] * 7, "chrF": [0.55] * 7},              # flat through the middle
], ids=["history", "mirrored", "middle"])
def test_the_by_length_legend_hides_no_curve(drawn, curves):
    viz.plot_by_length(curves, BUCKETS, "unused.png", title="Exact match by source length",
                       ylabel="exact match")
    (fig,) = drawn
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    for line in ax.get_lines():
        hidden = points_under(legend, line)
        assert not hidden, f"the legend covers {line.get_label()!r} at {hidden[0]} px"
    assert fig.bbox.contains(legend.x0, legend.y0) and fig.bbox.contains(legend.x1, legend.y1)
