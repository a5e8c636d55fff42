"""Figures with matplotlib (Agg backend, PNG files): attention maps, positional encodings and
learning-rate schedules.

Shapes: L layers, H heads, T_q queries (rows), T_k keys (columns).

matplotlib is imported inside each function, so ``import attnlab.viz`` stays light and nothing
here opens a window. ``attention_view`` and ``attention_view_of`` (from ``attnlab.explorer``)
make the interactive page instead: every layer and head, in a browser or inline in Jupyter.

Examples:
    >>> from attnlab.viz import plot_attention
    >>> plot_attention(torch.rand(2, 4, 4), list("abcd"), list("abcd"), "attention.png")
    PosixPath('attention.png')
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Sequence

import torch

from .explorer.data import masked_cells, underflows_early
from .explorer.view import attention_view, attention_view_of  # the interactive page

__all__ = ["plot_attention", "plot_positional_encoding", "plot_lr_schedule", "lr_curve",
           "curve_steps", "attention_view", "attention_view_of", "plot_confusion"]


def _pyplot():
    """matplotlib.pyplot, on the file-only Agg backend (no display is needed or opened) unless
    a backend is chosen already: in Jupyter, whose kernel sets MPLBACKEND to its inline one, or
    after the caller imported pyplot, attnlab leaves it alone so the user's own figures still
    show. Figures made here are closed once written, so none of them is shown."""
    import os
    import sys

    import matplotlib

    if "matplotlib.pyplot" not in sys.modules and not os.environ.get("MPLBACKEND"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _with_fallback_fonts() -> list[str]:
    """``font.family`` with the fonts for the characters matplotlib's own lack after it, where
    installed: a glyph the first family lacks is drawn from the next one that has it
    (matplotlib's font fallback), so Chinese labels are not boxes. Only installed ones are
    added: matplotlib logs a warning for each family it cannot find."""
    import matplotlib
    from matplotlib import font_manager

    family = list(matplotlib.rcParams["font.family"])
    installed = {font.name for font in font_manager.fontManager.ttflist}
    return family + [name for name in FALLBACK_FONTS if name in installed and name not in family]


# Chinese, Japanese and Korean fonts found on Linux, macOS and Windows
FALLBACK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans CJK KR",
                  "Source Han Sans SC", "WenQuanYi Zen Hei", "Droid Sans Fallback",
                  "PingFang SC", "Hiragino Sans", "Microsoft YaHei", "Malgun Gothic",
                  "Arial Unicode MS")


def _save(fig, path: str | Path) -> Path:
    """Write ``fig`` to exactly ``path`` (PNG unless its suffix names another format that
    matplotlib writes, e.g. .svg or .pdf), atomically and with the umask's permissions."""
    import io

    from .runs import atomic_write

    path = Path(path)
    buffer = io.BytesIO()
    try:
        # format= always: given a bare name (or a directory) savefig would append ".png" itself
        # and write another file than the one returned.
        fig.savefig(buffer, format=path.suffix[1:].lower() or "png", dpi=100)
    finally:
        fig.clf()
        _pyplot().close(fig)
    atomic_write(path, buffer.getvalue())
    return path


_GLYPH = re.compile(r"Glyph (\d+) .*missing from font")


def _note_glyphs(missing: list[str], path: Path) -> None:
    """One note naming the characters no font could draw (matplotlib warns once per
    character: a screen of warnings for a Chinese sentence, and boxes in the figure)."""
    import sys

    if missing:
        shown = "".join(missing[:12]) + ("..." if len(missing) > 12 else "")
        print(f"note: {path}: the fonts matplotlib uses here cannot draw {len(missing)} "
              f"characters of its labels ({shown}): they show as boxes; install a font that "
              f"has them (for Chinese, Japanese and Korean attnlab falls back on Noto Sans CJK "
              f"or the others docs/cli.md names)", file=sys.stderr, flush=True)


def _glyphs_noted(draw: Callable[..., Path]) -> Callable[..., Path]:
    """``draw`` (a function that writes a figure and returns its path) drawn with the fallback
    fonts (``_with_fallback_fonts``, for its own figure only: the user's rcParams are left as
    they are), the missing-glyph warnings it shows made one note (``_note_glyphs``) and its
    font lookup's log lines (a fallback font of another weight) not shown. The warnings filters
    are not touched (a ``catch_warnings`` would reset Python's once-per-place memory): every
    warning meets the user's filters as it would have; only how a glyph warning is shown
    changes."""
    import functools
    import logging
    import warnings

    @functools.wraps(draw)
    def drawn(*args, **kwargs) -> Path:
        import matplotlib

        missing: list[str] = []
        show = warnings.showwarning

        def shown(message, category, filename, lineno, file=None, line=None):
            if (found := _GLYPH.search(str(message))) is None:
                show(message, category, filename, lineno, file, line)
            elif (char := chr(int(found.group(1)))) not in missing:
                missing.append(char)

        log = logging.getLogger("matplotlib.font_manager")
        level = log.level
        log.setLevel(logging.ERROR)
        warnings.showwarning = shown
        try:
            with matplotlib.rc_context({"font.family": _with_fallback_fonts()}):
                path = draw(*args, **kwargs)
        finally:
            warnings.showwarning = show
            log.setLevel(level)
        _note_glyphs(missing, path)
        return path

    return drawn


def _as_layers(maps) -> list[torch.Tensor]:
    """A (H, T_q, T_k) map, a (1, H, T_q, T_k) batch of one, or a list of them -> L × (H, T_q, T_k)."""
    if isinstance(maps, torch.Tensor) or hasattr(maps, "shape"):
        maps = [maps]
    layers = []
    for m in maps:
        m = torch.as_tensor(m).detach().float().cpu()
        if m.ndim == 4 and m.shape[0] == 1:
            m = m[0]  # (H, T_q, T_k)
        if m.ndim == 2:
            m = m[None]  # one head
        if m.ndim != 3:
            raise ValueError(f"an attention map must be (H, T_q, T_k), got shape {tuple(m.shape)}")
        layers.append(m)
    if not layers:
        raise ValueError("no attention maps to plot")
    return layers


# A figure fits a screen at 100 %: at most MAX_INCHES × MAX_INCHES at 100 dpi (2,000 px a
# side; without the bound a 40-character lm input would take 5,800 px, a graph 10,018 px). Beyond
# MAX_PANELS maps each layer is drawn once, as the mean of its heads, so every map stays large
# enough to read its labels.
MAX_INCHES, MAX_PANELS, MAX_COLUMNS = 20.0, 16, 4
_MAP_INCHES = (1.8, 7.0)  # a map's side, in inches: at least, at most
_TITLE_POINTS = 12


def heads_per_layer(maps) -> list[int]:
    """The number of heads of each layer of ``maps`` (any form ``plot_attention`` takes)."""
    return [layer.shape[0] for layer in _as_layers(maps)]


def _panels(layers: list[torch.Tensor], layer: int | None = None, head: int | None = None):
    """[(layer index, head index or None for the mean of the heads)] in reading order, and the
    columns of the grid: every head while there are at most MAX_PANELS, else one mean per
    layer. A layer starts a new row, so a row never mixes layers. ``layer``: that layer's
    alone; ``head``: that head of each layer shown, the layers side by side."""
    shown = range(len(layers)) if layer is None else [layer]
    if head is not None:
        panels = [(l, head) for l in shown]
        columns = min(len(panels), MAX_COLUMNS)
        return [panels[i:i + columns] for i in range(0, len(panels), columns)], columns
    if layer is not None:
        rows, columns = _panels([layers[layer]])
        return [[(layer, h) for _, h in row] for row in rows], columns
    heads = [m.shape[0] for m in layers]
    if sum(heads) <= MAX_PANELS:
        columns = min(max(heads), MAX_COLUMNS)
        rows = []
        for l, H in enumerate(heads):
            for start in range(0, H, columns):
                rows.append([(l, h) for h in range(start, min(H, start + columns))])
        return rows, columns
    columns = min(len(layers), MAX_COLUMNS)
    means = [(l, None) for l in range(len(layers))]
    return [means[i:i + columns] for i in range(0, len(means), columns)], columns


@_glyphs_noted
def plot_attention(maps, x_labels: Sequence[str], y_labels: Sequence[str], path: str | Path, *,
                   title: str | None = None, cmap: str = "viridis", kind: str | None = None,
                   mark_row: int | None = None, layer: int | None = None,
                   head: int | None = None) -> Path:
    """Heatmaps of attention weights, one panel per layer and head, at most about 2,000 px a
    side: each layer starts a row of at most four heads; with more than 16 maps, each layer's
    heads are averaged into one panel (its title says so). No empty panel is drawn.

    Args:
        maps: a (H, T_q, T_k) tensor, or a list of them (one per layer; a leading batch of one
            is dropped; layers may have different numbers of heads). Row i is the attention of
            query i over the keys.
        x_labels: the T_k key tokens (columns).
        y_labels: the T_q query tokens (rows).
        path: the PNG file to write.
        title: a title over the figure (each of its lines wrapped to the figure's width).
        cmap: matplotlib colour map.
        kind: what every map is, named in each panel's title ("cross": a decoder's over the
            source). "causal" (square maps): keys after their query are grey, as the title
            says; and any kind's cells of weight 0 in every head of a layer (a mask's, as a
            graph's non-edge; ``explorer.data.masked_cells``; not of float16 maps).
        mark_row: a query row to outline in every panel, its label always shown (a node's).
        layer: draw only this layer (an index into ``maps``); panels keep their numbers.
        head: draw only this head (an index) of each layer drawn.

    Returns:
        The path written.

    Raises:
        ValueError: a map not 3-D, labels not of its size, a ``layer`` or ``head`` not its.

    Examples:
        >>> from attnlab.models import ElementPredictor
        >>> model = ElementPredictor(10, 32, 10, num_heads=2, num_layers=2)
        >>> x = torch.randint(10, (8, 6)); tokens = [str(t) for t in x[0].tolist()]
        >>> maps = model.get_attention_maps(x[:1])          # L × (1, H, T, T)
        >>> plot_attention(maps, tokens, tokens, "attention.png", title="reverse")
        PosixPath('attention.png')
    """
    layers = _as_layers(maps)
    T_q, T_k = _check_sizes(layers, x_labels, y_labels, mark_row)
    _check_choice([m.shape[0] for m in layers], layer, head)
    rows, columns = _panels(layers, layer, head)
    fontsize = 7 if max(T_q, T_k) > 16 else 9
    x_text, y_text = _short(x_labels), _short(y_labels)
    half = underflows_early(maps)  # float16 zeros need not be a mask's: none is greyed
    title = _with_grey(title, kind, [layers[l] for l in {l for row in rows for l, _ in row}],
                       half)
    (width, height), wrapped = _figure_size(rows, columns, max(T_q, T_k), x_text, y_text,
                                            fontsize, title)
    fig = _pyplot().figure(figsize=(width, height), layout="constrained")
    axes = _draw_panels(fig, fig.add_gridspec(len(rows), columns), rows, layers, kind, cmap,
                        mark_row, half)
    if wrapped:
        fig.suptitle(wrapped, fontsize=_TITLE_POINTS, parse_math=False)  # "$..$": text, not math
    fig.draw_without_rendering()  # the layout, so that labels are measured where they are drawn
    for ax in axes:
        _label_axis(fig, ax.xaxis, x_text, fontsize)
        _label_axis(fig, ax.yaxis, y_text, fontsize, keep=mark_row)
    return _save(fig, path)


def _check_sizes(layers, x_labels, y_labels, mark_row) -> tuple[int, int]:
    """(T_q, T_k) of every layer's maps, or ValueError naming what does not match them."""
    _, T_q, T_k = layers[0].shape
    if any(layer.shape[1:] != (T_q, T_k) for layer in layers):
        raise ValueError(f"every layer's map must be T_q x T_k = {T_q} x {T_k}, got "
                         f"{[tuple(layer.shape[1:]) for layer in layers]}")
    if len(x_labels) != T_k or len(y_labels) != T_q:
        raise ValueError(f"labels ({len(y_labels)} rows, {len(x_labels)} columns) do not match "
                         f"the maps' (T_q={T_q}, T_k={T_k})")
    if mark_row is not None and not 0 <= mark_row < T_q:
        raise ValueError(f"mark_row must be a query row, 0 to {T_q - 1}, got {mark_row}")
    return T_q, T_k


def _with_grey(title: str | None, kind: str | None, shown: list[torch.Tensor],
               half: bool = False) -> str | None:
    """``title`` with what the grey cells of the ``shown`` layers are, where there are any, at
    the end of its first line (the lines after it say other things: the run's metrics)."""
    first, *rest = (title or "").split("\n")
    if kind == "causal":
        first = f"{first + '; ' if first else ''}grey: a key after its query (the causal mask)"
    if any(masked_cells(layer.numpy(), kind or "self", half=half).any() for layer in shown):
        first = f"{first + '; ' if first else ''}grey: {MASKED_NOTE}"
    return "\n".join([first, *rest]) if title or first else title


def fewest_heads(heads: list[int], layer: int | None) -> int:
    """Of the layers drawn (``layer``, an index, or every one), the index of the one with the
    fewest heads (``heads``: per layer): a head must be one of its."""
    return layer if layer is not None else min(range(len(heads)), key=lambda l: heads[l])


def _check_choice(heads: list[int], layer: int | None, head: int | None) -> None:
    """ValueError unless ``layer`` indexes a layer and ``head`` a head of each layer drawn."""
    if layer is not None and not 0 <= layer < len(heads):
        raise ValueError(f"layer must be 0 to {len(heads) - 1}, got {layer}")
    fewest = heads[fewest_heads(heads, layer)]
    if head is not None and not 0 <= head < fewest:
        raise ValueError(f"head must be 0 to {fewest - 1} (each layer drawn has {fewest} or "
                         f"more heads), got {head}")


def _draw_panels(fig, grid, rows, layers, kind: str | None, cmap: str, mark_row: int | None,
                 half: bool = False):
    """Every panel of ``rows`` (``_panels``) in ``grid``, titled by layer and head (and
    ``kind``); returns their axes."""
    axes = []
    for r, panels in enumerate(rows):
        for c, (l, h) in enumerate(panels):
            which = f"mean of {layers[l].shape[0]} heads" if h is None else f"head {h + 1}"
            axes.append(_panel(fig, grid[r, c], layers[l].mean(0) if h is None else layers[l][h],
                               f"{kind + ' · ' if kind else ''}layer {l + 1}, {which}", cmap,
                               mark_row, causal=kind == "causal",
                               masked=masked_cells(layers[l].numpy(), kind or "self",
                                                   half=half)))
    return axes


BLOCKED = "#c8c8c8"  # the colour of a weight a mask blocked (causal, a graph's non-edge)
MASKED_NOTE = "masked, a weight of exactly 0 in every head (a graph's non-edge, a padded key)"


def _panel(fig, where, weights: torch.Tensor, title: str, cmap: str, mark_row: int | None, *,
           causal: bool = False, masked=None):
    """One (T_q, T_k) map in the grid cell ``where``, scaled 0 to its largest weight, with its
    colour bar (and ``mark_row`` outlined); ``causal``: keys after their query in ``BLOCKED``
    grey where their weight is 0, as the mask makes it (one that is not, a leak of the future,
    is drawn as it is); ``masked`` (T_q, T_k bool, ``masked_cells``): also drawn grey. Returns
    its axes."""
    import numpy as np
    from matplotlib import colormaps

    ax = fig.add_subplot(where)
    values = weights.numpy()
    hidden = np.zeros(values.shape, dtype=bool) if masked is None else masked
    if causal:
        future = np.triu(np.ones(values.shape, dtype=bool), 1)  # (T_q, T_k): key j > query i
        hidden = hidden | (future & (values == 0))
    if hidden.any():
        values = np.ma.masked_where(hidden, values)
    image = ax.imshow(values, vmin=0, vmax=max(1e-9, float(weights.max())),
                      cmap=colormaps[cmap].with_extremes(bad=BLOCKED), aspect="auto",
                      interpolation="nearest")
    ax.set_xlabel("key", fontsize=8)
    ax.set_ylabel("query", fontsize=8)
    ax.set_title(title, fontsize=9)
    if mark_row is not None:
        ax.add_patch(_row_box(mark_row, weights.shape[1]))
    _colour_bar(fig, image, ax, "attention weight")
    return ax


def _figure_size(rows, columns: int, T: int, x_text, y_text, fontsize: float,
                 title: str | None):
    """((width, height) in inches, the title wrapped to that width or None): each map as large
    as its T tokens need (0.16 in a token) within _MAP_INCHES, all within MAX_INCHES."""
    side = _text_inches(y_text, fontsize) + 0.55  # the query labels and "query" beside a map
    bar = 0.75  # its colour bar
    below = min(_text_inches(x_text, fontsize), 1.2) + 0.55  # key labels, upright at worst
    head = 0.35  # the panel's title
    cell = min(_MAP_INCHES[1], max(_MAP_INCHES[0], 0.16 * T + 0.6))
    cell = max(_MAP_INCHES[0] * 0.75, min(cell, MAX_INCHES / columns - side - bar,
                                          (MAX_INCHES - 0.8) / len(rows) - below - head))
    width = columns * (cell + side + bar)
    wrapped, top = None, 0.0
    if title:
        wrapped = _wrap_title(title, width, _TITLE_POINTS)
        top = 0.3 + 0.25 * wrapped.count("\n")
    return (width, len(rows) * (cell + below + head) + top + 0.2), wrapped


def _wrap_title(title: str, inches: float, points: float) -> str:
    """``title`` wrapped to a line ``inches`` wide in a font of ``points``, each of its lines
    on its own: a run's weights and metrics keep a line of their own."""
    import textwrap

    chars = max(20, int(inches * 72 / (points * 0.62)) - 4)  # characters of the font in a line
    return "\n".join(textwrap.fill(line, chars) for line in title.split("\n"))


def _row_box(row: int, T_k: int):
    from matplotlib.patches import Rectangle

    return Rectangle((-0.5, row - 0.5), T_k, 1, fill=False, edgecolor="#ff3b30", linewidth=1.6)


def _colour_bar(fig, image, ax, label: str) -> None:
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    bar.set_label(label, fontsize=7)
    bar.ax.tick_params(labelsize=7)


def overlapping_ticks(fig, axis) -> bool:
    """Whether two of ``axis``' tick labels overlap as drawn in ``fig`` (measured by an Agg
    renderer, the one the PNG is drawn with, whatever backend the figure has)."""
    if not hasattr(fig.canvas, "get_renderer"):  # e.g. a user's svg or pdf backend
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)  # the figure's canvas from now on
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in axis.get_ticklabels() if t.get_text()]
    return any(a.overlaps(b) for a, b in zip(boxes, boxes[1:]))


_CHAR_INCHES = 0.62 / 72  # a character's width in inches, per point of font size (DejaVu Sans)
_LONGEST = 14  # characters kept of a tick label; longer ones end in "…"


def _short(labels: Sequence[str]) -> list[str]:
    """Tick labels as text: at most ``_LONGEST`` characters, whitespace made visible."""
    out = []
    for label in labels:
        text = str(label).replace("\n", "⏎")
        text = "".join(c if c.isprintable() else "�" for c in text)  # no font draws \x1b
        text = text if text.strip() else text.replace(" ", "␣") or "·"
        out.append(text if len(text) <= _LONGEST else text[: _LONGEST - 1] + "…")
    return out


def _text_inches(labels: Sequence[str], fontsize: float) -> float:
    return max((len(t) for t in labels), default=1) * fontsize * _CHAR_INCHES


def thinned_labels(labels: Sequence[str], every: int, keep: int | None = None):
    """(positions, texts) of every ``every``-th label, starting so that ``keep`` is one of them.
    Single characters of a text (an lm's tokens, spaces among them) are labelled by the run of
    characters from there to the next label ("the q", "uick ", ...), which reads as the text;
    every other label (a reversal's one-digit symbols too) as itself."""
    start = 0 if keep is None else keep % every
    positions = list(range(start, len(labels), every))
    if every > 1 and all(len(t) == 1 for t in labels) and "␣" in labels:  # text, not symbols
        return positions, ["".join(labels[i:i + every])[:_LONGEST] for i in positions]
    return positions, [labels[i] for i in positions]


def _label_axis(fig, axis, labels: list[str], fontsize: float, keep: int | None = None) -> None:
    """Label ``axis`` so that no two labels overlap, measured as drawn: keys lie flat while the
    longest fits in its column, else stand upright; when a row (or column) is thinner than a
    line of text, only every k-th token is labelled (``keep`` always), k doubling until none
    overlaps. A kept label is drawn bold."""
    ax = axis.axes
    box = ax.get_window_extent()
    along = (box.width if axis.axis_name == "x" else box.height) / fig.dpi  # inches
    step = along / max(1, len(labels))
    line = fontsize * 1.25 / 72
    upright = axis.axis_name == "x" and _text_inches(labels, fontsize) > 0.9 * step
    every = 1 if step >= line else int(-(-line // step))
    while True:
        positions, texts = thinned_labels(labels, every, keep)
        axis.set_ticks(positions, texts, fontsize=fontsize, rotation=90 if upright else 0)
        if every >= len(labels) or not overlapping_ticks(fig, axis):
            break
        every *= 2
    if keep is not None:
        for position, tick in zip(positions, axis.get_ticklabels()):
            if position == keep:
                tick.set_color("#ff3b30")
                tick.set_fontweight("bold")


@_glyphs_noted
def plot_positional_encoding(d_model: int = 48, max_len: int = 96, path: str | Path = "pe.png", *,
                             dims: Sequence[int] = (0, 1, 2, 3)) -> Path:
    """The sinusoidal encoding as a heatmap over positions × hidden dimensions, and the curves
    of a few dimensions over the positions (even dimensions are sines, odd ones cosines).

    Examples:
        >>> plot_positional_encoding(48, 96, "pe.png")
        PosixPath('pe.png')
    """
    from .nn.positional import check_table, sinusoidal_table

    check_table("d_model", d_model, max_len)
    dims = [d for d in dims if d < d_model]
    pe = sinusoidal_table(max_len, d_model)  # (max_len, D)
    plt = _pyplot()
    fig = plt.figure(figsize=(10, 7))
    grid = fig.add_gridspec(2, max(1, len(dims)), height_ratios=(1.3, 1))
    ax = fig.add_subplot(grid[0, :])
    # cells centred on 0, 1, 2, ...: positions and dimensions count from 0, as in PE(pos, 2i)
    # and the curves below (the course's figure counted both from 1)
    # every value lies in [-1, 1]: a fixed range keeps 0 at the diverging map's white centre
    # (scaled to a few positions' own range, 0 was drawn red and 0.3 white); whole ticks only
    image = ax.imshow(pe.T.numpy(), cmap="RdGy", aspect="auto", origin="lower", vmin=-1, vmax=1,
                      extent=(-0.5, max_len - 0.5, -0.5, d_model - 0.5))
    fig.colorbar(image, ax=ax)
    _whole_ticks(ax)
    ax.set_xlabel("position in sequence")
    ax.set_ylabel("hidden dimension")
    ax.set_title(f"sinusoidal positional encoding (d_model={d_model})")
    positions = torch.arange(max_len).numpy()
    for i, d in enumerate(dims):
        sub = fig.add_subplot(grid[1, i])
        sub.plot(positions, pe[:, d].numpy(), color=f"C{i}", marker="o", markersize=2, linewidth=1)
        sub.set_title(f"dimension {d} ({'sin' if d % 2 == 0 else 'cos'})", fontsize=9)
        sub.set_xlabel("position")
        sub.set_ylim(-1.1, 1.1)
        _whole_ticks(sub, y=False)
    fig.tight_layout()
    return _save(fig, path)


def _whole_ticks(ax, *, y: bool = True) -> None:
    """Ticks at whole numbers only on ``ax``'s x axis (and y): positions and dimensions have
    no 0.5 (matplotlib put ticks at -0.5, 0.0, 0.5, ... for a few positions)."""
    from matplotlib.ticker import MaxNLocator

    for axis in (ax.xaxis, ax.yaxis) if y else (ax.xaxis,):
        axis.set_major_locator(MaxNLocator(integer=True))


def lr_curve(schedule: str, *, warmup: int, max_iters: int, d_model: int = 512,
             lr: float = 1.0, steps: Sequence[int] | None = None, min_lr: float | None = None,
             cooldown: float | None = None) -> list[float]:
    """The learning rate at steps 0..max_iters (or at ``steps``) as ``attnlab train`` uses it
    (``attnlab.schedulers.schedule_lr``): ``lr`` times the schedule's factor, or the Noam
    rate with ``lr`` as its factor; ``min_lr`` and ``cooldown`` as --min-lr and --cooldown."""
    from .schedulers import schedule_lr

    steps = range(max_iters + 1) if steps is None else steps
    return [schedule_lr(schedule, e, lr=lr, warmup=warmup, max_iters=max_iters, min_lr=min_lr,
                        cooldown=cooldown, d_model=d_model) for e in steps]


def curve_steps(max_iters: int, *, points: int = 20_000, keep: Sequence[int] = ()) -> list[int]:
    """At most about ``points`` steps spread over 0..max_iters (every step when there are
    fewer), plus the steps in ``keep`` (e.g. the end of warm-up, where a curve peaks): a
    figure cannot show more, and a million-step schedule would take long to compute and draw.
    """
    stride = max(1, -(-max_iters // points))  # ceil
    picked = set(range(0, max_iters + 1, stride)) | {max_iters}
    return sorted(picked | {s for s in keep if 0 <= s <= max_iters})


@_glyphs_noted
def plot_lr_schedule(curves: dict[str, Sequence[float]], path: str | Path, *,
                     title: str = "learning-rate schedule", ylabel: str = "learning rate",
                     mark_step: int | None = None,
                     steps: dict[str, Sequence[int]] | None = None) -> Path:
    """Learning rate against optimiser step, one panel per named curve.

    Args:
        curves: name -> values at steps 0, 1, 2, ...
        path: the PNG file to write.
        title: figure title.
        ylabel: y-axis label ("learning-rate factor" for unit-lr curves).
        mark_step: draw a dashed vertical line there (e.g. where training stopped).
        steps: name -> the steps of that curve's values (default 0, 1, 2, ...).

    Examples:
        >>> plot_lr_schedule({"cosine": lr_curve("cosine", warmup=100, max_iters=2000)}, "lr.png")
        PosixPath('lr.png')
    """
    plt = _pyplot()
    fig, axes = plt.subplots(len(curves), 1, figsize=(8, 3.2 * len(curves)), squeeze=False)
    # one panel per curve: schedules differ by orders of magnitude (a Noam rate vs a factor)
    for ax, (name, values) in zip(axes[:, 0], curves.items()):
        x = (steps or {}).get(name, range(len(values)))
        ax.plot(list(x), list(values), label=name)
        if mark_step is not None:
            ax.axvline(mark_step, color="grey", linestyle="--", linewidth=1,
                       label=f"stopped at step {mark_step}")
        ax.set_xlabel("optimiser step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0, 0].set_title(title)
    fig.tight_layout()
    return _save(fig, path)


# ---- jets: ROC as background rejection, score distributions, a jet's attention ----

@_glyphs_noted
def plot_by_length(curves: dict[str, Sequence[float]], buckets: Sequence[str],
                   path: str | Path, *, title: str = "score by source length",
                   ylabel: str = "score") -> Path:
    """Curves over source-length buckets (one point per bucket, in order): a translation's
    exact match and chrF, or several models' scores (Bahdanau et al., 2015, figure 2).

    Examples:
        >>> plot_by_length({"rnn": [0.9, 0.5], "rnn-additive": [0.9, 0.85]}, ["1-5", "6-10"],
        ...                "by_length.png")
        PosixPath('by_length.png')
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.2, 4.2))
    styles = [("o", "-"), ("s", "--"), ("^", "-."), ("D", ":")]  # curves that coincide stay visible
    for i, (label, values) in enumerate(curves.items()):
        marker, line = styles[i % len(styles)]
        ax.plot(range(len(values)), values, marker=marker, linestyle=line, markersize=6 - i % 3,
                label=label)
    ax.set_xticks(range(len(buckets)), list(buckets))
    ax.set_xlabel("source length (tokens)")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    # Beside the axes, not in them: the curves can pass anywhere between 0 and 1, and a legend
    # inside hid whole buckets of one (06_history's bilinear RNN at 0.53).
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title(title)
    fig.tight_layout()
    return _save(fig, path)


@_glyphs_noted
def plot_jet_roc(curves: dict, path: str | Path, *, title: str = "top tagging") -> Path:
    """Background rejection 1/ε_B against signal efficiency ε_S (log scale), as the field
    draws a tagger's ROC curve; one line per tagger, with its AUC in the legend.

    Args:
        curves: name -> (signal_efficiency, background_efficiency, auc), arrays of one ROC
            curve (``attnlab.tasks.jets.metrics.roc``) and the area under it.
        path: the PNG file to write.

    Examples:
        >>> import numpy as np
        >>> eff = np.linspace(0.01, 1, 50)
        >>> plot_jet_roc({"toy": (eff, eff ** 3, 0.75)}, "roc.png")
        PosixPath('roc.png')
    """
    import numpy as np

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    for i, (name, (eff_s, eff_b, auc)) in enumerate(curves.items()):
        eff_s, eff_b = np.asarray(eff_s, float), np.asarray(eff_b, float)
        keep = (eff_b > 0) & (eff_s > 0)  # 1/ε_B is infinite where no background passes
        ax.plot(eff_s[keep], 1.0 / eff_b[keep], color=f"C{i}", lw=2 if i == 0 else 1.2,
                label=f"{name} (AUC {auc:.4f})")
    for efficiency in (0.3, 0.5):
        ax.axvline(efficiency, color="grey", ls=":", lw=1)
    ax.set_yscale("log")
    ax.set_xlim(0, 1)
    ax.set_xlabel("signal efficiency ε_S (top jets kept)")
    ax.set_ylabel("background rejection 1/ε_B (QCD)")
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


@_glyphs_noted
def plot_jet_scores(scores, labels, path: str | Path, *, title: str = "tagger scores",
                    names: Sequence[str] = ("QCD", "top")) -> Path:
    """Histograms of the score P(top) for each true class (normalised, log scale): a good
    tagger pushes QCD jets to 0 and top jets to 1.

    Examples:
        >>> import numpy as np
        >>> plot_jet_scores(np.random.rand(100), np.arange(100) % 2, "scores.png")
        PosixPath('scores.png')
    """
    import numpy as np

    scores, labels = np.asarray(scores, float), np.asarray(labels)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    bins = np.linspace(0, 1, 41)
    for label, name in enumerate(names):
        chosen = scores[labels == label]
        if len(chosen):
            ax.hist(chosen, bins=bins, histtype="step", lw=1.8, density=True, color=f"C{label}",
                    label=f"{name} jets ({len(chosen):,})")
    ax.set_yscale("log")
    ax.set_xlabel("score P(top)")
    ax.set_ylabel("density")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return _save(fig, path)


@_glyphs_noted
def plot_jet_attention(eta, phi, pt, weights, path: str | Path, *, lines: int = 40,
                       title: str | None = None, token_weights=None) -> Path:
    """One jet in the (Δη, Δφ) plane: a disc per constituent, its area proportional to pT,
    and the ``lines`` strongest attention weights between two different constituents drawn
    as arrows from the query to the key, darker and thicker for larger weights; a legend
    under the plane gives the weights of the strongest and weakest arrow and the pT of two
    disc sizes.

    Args:
        eta: (N,) the real constituents' Δη from the jet axis.
        phi: (N,) their Δφ from the jet axis.
        pt: (N,) their transverse momenta (GeV).
        weights: (N, N) attention (query rows, key columns), e.g. one layer's, heads averaged.
        lines: how many of the strongest off-diagonal weights to draw.
        token_weights: (N,) optional, e.g. the class token's attention: colours the discs.

    Examples:
        >>> import numpy as np
        >>> r = np.random.default_rng(0); w = r.random((5, 5))
        >>> plot_jet_attention(r.normal(0, .3, 5), r.normal(0, .3, 5), r.random(5) * 50,
        ...                    w / w.sum(1, keepdims=True), "jet.png")
        PosixPath('jet.png')
    """
    import numpy as np

    eta, phi, pt = (np.asarray(a, float) for a in (eta, phi, pt))
    w = np.array(weights, float)
    np.fill_diagonal(w, 0.0)  # attention to itself is not a line
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.2, 5.6))
    # among the pairs of two constituents: a jet of 6 has 30, and its 6 self-weights of 0
    # were counted ("the 36 strongest") and set the legend's weakest arrow at "weight 0.00"
    pairs = np.flatnonzero(~np.eye(len(w), dtype=bool))
    strongest = pairs[np.argsort(w.flat[pairs], kind="stable")[::-1]][:lines]
    top = w.flat[strongest[0]] if len(strongest) and w.flat[strongest[0]] > 0 else 1.0
    biggest = max(pt.max(), 1e-9)
    area = 400 * pt / biggest + 4  # a disc's area in points², proportional to pT
    for flat in strongest[::-1]:  # weakest first, so the strongest are drawn on top
        q, k = np.unravel_index(flat, w.shape)
        _jet_arrow(ax, (eta[q], phi[q]), (eta[k], phi[k]), w[q, k] / top, float(area[k]))
    colour = {"color": "C0"} if token_weights is None else {
        "c": np.asarray(token_weights, float), "cmap": "viridis"}
    dots = ax.scatter(eta, phi, s=area, edgecolors="k",
                      linewidths=0.4, alpha=0.85, zorder=2, **colour)
    _jet_legend(ax, w.flat[strongest] if len(strongest) else None, top, biggest)
    if token_weights is not None:
        fig.colorbar(dots, ax=ax, label="class token's attention")
    ax.set_xlabel("Δη from the jet axis")
    ax.set_ylabel("Δφ from the jet axis")
    ax.set_aspect("equal")
    reach = max(0.9, float(np.abs(np.concatenate([eta, phi])).max()) + 0.1)
    ax.set_xlim(-reach, reach), ax.set_ylim(-reach, reach)
    title = title or (f"{len(pt)} constituent{'s' if len(pt) != 1 else ''}; the "
                      f"{len(strongest)} strongest attention weights" if len(strongest) else
                      f"{len(pt)} constituent{'s' if len(pt) != 1 else ''}; no pair to draw")
    # wrapped to the figure's width (a run's record line is longer); a file's "$": as written
    ax.set_title(_wrap_title(title, 6.2, 9), fontsize=9, parse_math=False)
    fig.tight_layout()
    return _save(fig, path)


def _arrow_width(share: float) -> float:
    """The line width of a jet figure's arrow whose weight is ``share`` of the largest."""
    return 0.5 + 2.5 * share


def _jet_arrow(ax, query, key, share: float, key_area: float) -> None:
    """An arrow from the query to the key it attends to: a star of arrows is many particles
    looking at one, which an undirected line cannot tell from the reverse. Its head stops at
    the key's disc (radius √area / 2 points), so it stays visible."""
    ax.annotate("", xy=key, xytext=query, zorder=1,
                arrowprops={"arrowstyle": "-|>", "color": "C3", "lw": _arrow_width(share),
                            "alpha": 0.15 + 0.75 * share, "shrinkA": 0,
                            "shrinkB": key_area ** 0.5 / 2 + 1})


def _jet_legend(ax, drawn, top: float, biggest: float) -> None:
    """What plot_jet_attention's arrows and discs mean, on the figure itself: the weights of
    the strongest and weakest arrow drawn (``drawn``; None: no arrow, no entry), and two discs
    with their pT."""
    from matplotlib.lines import Line2D

    handles = []
    if drawn is not None:  # a jet of one constituent has no pair to draw
        strongest, weakest = float(drawn.max()), float(drawn.min())
        texts = _distinct_numbers(strongest, weakest)
        handles.append(Line2D([], [], color="C3", lw=_arrow_width(1.0), alpha=0.9,
                              label=f"query → key, weight {texts[0]}"))
        if len(texts) > 1:  # arrows of one weight are one entry, not two that read the same
            handles.append(Line2D([], [], color="C3", lw=_arrow_width(weakest / top),
                                  alpha=0.15 + 0.75 * weakest / top,
                                  label=f"query → key, weight {texts[1]}"))
    sizes = _distinct_numbers(biggest, biggest / 4)
    handles += [ax.scatter([], [], s=404, color="C0", edgecolors="k", linewidths=0.4,
                           label=f"pT {sizes[0]} GeV (disc area ∝ pT)"),
                ax.scatter([], [], s=104, color="C0", edgecolors="k", linewidths=0.4,
                           label=f"pT {sizes[-1]} GeV")]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2,
              fontsize=8, labelspacing=1.2, borderpad=0.8, columnspacing=2.0, frameon=False)


def _distinct_numbers(large: float, small: float) -> list[str]:
    """``large`` and ``small`` as a legend writes them: two decimals (no decimals from 10 on),
    more where two decimals would write both alike (a near-uniform attention's 0.0345 and
    0.0338, both "0.03"), until they differ (at most 12 decimals); one text where the two
    are equal. A small positive number is never written 0.

    Examples:
        >>> _distinct_numbers(0.9, 0.3), _distinct_numbers(0.0345, 0.0338)
        (['0.90', '0.30'], ['0.035', '0.034'])
        >>> _distinct_numbers(97.2, 24.3), _distinct_numbers(0.05, 0.05)
        (['97', '24'], ['0.05'])
    """
    if large == small:
        return [decimals_half_up(large, 2 if abs(large) < 10 else 0)]
    decimals = 2 if abs(large) < 10 else 0
    while True:
        texts = [decimals_half_up(large, decimals), decimals_half_up(small, decimals)]
        if texts[0] != texts[1] or decimals >= 12:
            return texts
        decimals += 1


def decimals_half_up(value: float, decimals: int) -> str:
    """``value`` to ``decimals`` decimals, a half rounded up as a reader rounds the number
    written (12.5 GeV: "13", where Python's format rounds it to the even "12"), or to 2
    significant digits where that writes a positive number as 0 (a jet's 0.4 GeV at no
    decimals): the jets' legends and their attention maps' labels.

    Examples:
        >>> [decimals_half_up(v, d) for v, d in ((12.5, 0), (0.125, 2), (0.4, 0), (-2.5, 0))]
        ['13', '0.13', '0.4', '-3']
    """
    from decimal import ROUND_HALF_UP, Decimal

    value = float(value)  # (numpy's float64 writes its repr as "np.float64(...)")
    text = str(Decimal(repr(value)).quantize(Decimal(1).scaleb(-decimals), ROUND_HALF_UP))
    return f"{value:.2g}" if value > 0 and float(text) == 0 else text


_CLASS_CHARS = 24  # characters kept of a class name in plot_confusion (20 Newsgroups' fit)


@_glyphs_noted
def plot_confusion(matrix, labels: Sequence[str], path: str | Path, *,
                   title: str = "confusion matrix, test split") -> Path:
    """A confusion matrix as a grid: a row per true class, a column per predicted one, the
    count in each cell, and the colour the cell's share of its row (the true class's
    examples), so that a rare class's row is as visible as a common one's; the diagonal's
    colour is each class's recall. Column labels stand at 45° once any name is longer than a
    cell is wide; names longer than ``_CLASS_CHARS`` end in "…".

    Args:
        matrix: (K, K) counts, rows the true class (``attnlab.tasks.classify.metrics.confusion``).
        labels: the K class names, in the matrix's order.
        path: the PNG to write.

    Returns:
        ``path``.
    """
    plt = _pyplot()
    counts = torch.as_tensor(matrix).double()
    k = len(labels)
    share = counts / counts.sum(1, keepdim=True).clamp(min=1)  # (K, K) of each true class
    names = ["".join(c if c.isprintable() else "�" for c in str(x)) or "·" for x in labels]
    names = [t if len(t) <= _CLASS_CHARS else t[: _CLASS_CHARS - 1] + "…" for t in names]
    fontsize = 9 if k <= 10 else 7 if k <= 30 else 5
    # inches: room for a count of 4 digits, and a few classes' grid not smaller than 3 inches
    cell = max(0.45, fontsize * 3.2 / 72, 3.0 / k)
    margin = _text_inches(names, fontsize) + 0.6
    fig, ax = plt.subplots(figsize=(k * cell + margin + 1.4, k * cell + margin * 0.75 + 0.8))
    image = ax.imshow(share.numpy(), cmap="Blues", vmin=0, vmax=1)
    flat = all(len(n) * fontsize * _CHAR_INCHES <= cell for n in names)
    ax.set_xticks(range(k), names, fontsize=fontsize, rotation=0 if flat else 45,
                  ha="center" if flat else "right", rotation_mode="anchor")
    ax.set_yticks(range(k), names, fontsize=fontsize)
    for i in range(k):
        for j in range(k):
            ax.text(j, i, f"{int(counts[i, j])}", ha="center", va="center", fontsize=fontsize,
                    color="white" if share[i, j] > 0.5 else "black")
    ax.set_xlabel("predicted class", fontsize=fontsize + 1)
    ax.set_ylabel("true class", fontsize=fontsize + 1)
    ax.set_title(title, fontsize=fontsize + 1)
    _colour_bar(fig, image, ax, "share of the true class's examples")
    fig.tight_layout()
    return _save(fig, path)

