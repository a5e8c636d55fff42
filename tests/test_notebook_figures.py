"""The figures the notebooks draw in their own cells: each cell that draws one is run here as
committed, on small stand-in data, and its figure is read as a reader sees it (axis labels,
tick labels, the legend's place)."""
from __future__ import annotations

import ast
import csv
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import nbformat
import numpy as np
import pytest
import torch

from attnlab import viz

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def draw(notebook: str, marker: str, namespace: dict, monkeypatch):
    """Run the one code cell of ``notebook`` whose source holds ``marker``, after the imports
    of the cells above it that it uses, with the names in ``namespace`` standing in for what
    those cells computed; return the figure it drew (``plt.show`` shows nothing here)."""
    nb = nbformat.read(EXAMPLES / f"{notebook}.ipynb", as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    at = [i for i, source in enumerate(code) if marker in source]
    assert len(at) == 1, f"{notebook}: {len(at)} code cells hold {marker!r}"
    used = set(re.findall(r"\w+", code[at[0]]))
    imports = [node for source in code[:at[0]] for node in ast.parse(source).body
               if isinstance(node, (ast.Import, ast.ImportFrom))
               and any((a.asname or a.name).split(".")[0] in used for a in node.names)]
    plt = viz._pyplot()  # Agg, unless this process chose a backend already
    scope = dict(namespace)
    exec(compile(ast.Module(body=imports, type_ignores=[]), notebook, "exec"), scope)
    plt.close("all")
    monkeypatch.setattr(plt, "show", lambda *args, **kwargs: None)
    exec(compile(code[at[0]], notebook, "exec"), scope)
    fig = plt.gcf()
    fig.canvas.draw()  # tick labels and the legend's place are set when drawn
    return fig


def shown(labels) -> list[str]:
    return [t.get_text() for t in labels]


def test_the_reversal_map_labels_each_axis_with_what_its_ticks_show(monkeypatch):
    """Rows are query positions, columns the input's digits: a row's tick is its position."""
    T = 16
    x = torch.tensor([4, 2, 9, 6, 6, 6, 5, 0, 9, 6, 0, 9, 6, 8, 4, 8])
    mirror = torch.eye(T).flip(1)[None, None]  # query t attends to key T-1-t
    model = SimpleNamespace(eval=lambda: None, get_attention_maps=lambda seq: [mirror],
                            predict=lambda seq: seq.flip(1))
    loader = SimpleNamespace(dataset=[(x, x.flip(0))])
    fig = draw("02_reversal_and_sets", "get_attention_maps(x)",
               {"model": model, "test_loader": loader, "SEQ_LEN": T, "FULL_SIZE": False},
               monkeypatch)
    (ax,) = fig.axes
    assert "position" in ax.get_ylabel()
    assert shown(ax.get_yticklabels()) == [str(t) for t in range(T)]
    assert "digit" in ax.get_xlabel()
    assert shown(ax.get_xticklabels()) == [str(d) for d in x.tolist()]


def write_lm_run(run: Path) -> None:
    """A run directory of `attnlab train lm` as the notebook's curve cell reads it: the
    training loss every 45 steps and the validation loss every 100, falling as a real run's."""
    (run / "logs").mkdir(parents=True)
    with open(run / "logs" / "metrics.csv", "w", newline="") as f:
        rows = csv.writer(f)
        rows.writerow(["step", "train_loss", "val_loss"])
        for step in range(900):  # 0-based, as the log writes it
            if (step + 1) % 45 == 0:
                rows.writerow([step, f"{0.7 + 1.9 * math.exp(-step / 250):.4f}", ""])
            if (step + 1) % 100 == 0:
                rows.writerow([step, "", f"{0.75 + 1.6 * math.exp(-step / 250):.4f}"])
    (run / "metrics.json").write_text(json.dumps({
        "val_loss": 1.09, "val_perplexity": 2.98, "parameters": 358176, "steps": 900,
        "train_seconds": 191.0}))


def test_the_language_models_legend_has_a_frame_and_no_line_through_it(monkeypatch, tmp_path):
    write_lm_run(tmp_path / "run")
    baselines = {"uniform": 6.73, "unigram": 4.70, "bigram": 3.35}
    fig = draw("04_language_model", "train (one batch)",
               {"RUN": str(tmp_path / "run"), "baselines": baselines, "FULL_SIZE": False},
               monkeypatch)
    (ax,) = fig.axes
    legend = ax.get_legend()
    assert legend.get_frame_on(), "a legend without a frame reads as part of the plot"
    assert_no_line_through_legend(ax)
    for text in ax.texts:  # the baselines' names
        assert not text.get_window_extent().overlaps(legend.get_window_extent()), text.get_text()


def assert_no_line_through_legend(ax) -> None:
    """No line of ``ax`` (curves, and axhline/axvline marks, named by where they stand) runs
    through its legend's box."""
    box = ax.get_legend().get_window_extent()
    for line in ax.lines:
        path = line.get_transform().transform_path(line.get_path())
        x, y = line.get_data()  # an axhline or axvline: no label of its own
        mark = f"at x = {x[0]:g}" if x[0] == x[-1] else f"at y = {y[0]:g}"
        name = mark if line.get_label().startswith("_") else repr(line.get_label())
        assert not path.intersects_bbox(box, filled=False), \
            f"the line {name} runs through the legend"


def test_the_warm_up_legend_is_clear_of_both_schedules(monkeypatch):
    """Notebook 01's learning-rate figure: the cosine schedule's peak and the Noam curve are
    not under the legend (it sat over the cosine curve just after the peak)."""
    fig = draw("01_attention_from_scratch", "CosineWarmupScheduler(o, WARMUP",
               {"WARMUP": 100, "SCHEDULE_STEPS": 2_000}, monkeypatch)
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.lines if not line.get_label().startswith("_")] \
        == ["cosine warm-up (the course)", "Noam (the paper), scaled to the same peak"]
    assert_no_line_through_legend(ax)
    assert fig.bbox.contains(*ax.get_legend().get_window_extent().p0)


def tick_value(text: str) -> float | None:
    """The number a tick label reads, or None if it is not one number in digits (mathtext)."""
    number = re.fullmatch(r"[−-]?\d+(\.\d+)?(e[−+-]?\d+)?", text)
    return float(text.replace("−", "-")) if number else None


def test_the_time_to_loss_log_axis_reads_as_plain_decimals(monkeypatch):
    """The held-out loss axis of notebook 04's last figure, from the committed record:
    every labelled tick is a plain number equal to its place on the axis (0.3, not 3×10⁻¹)."""
    fig = draw("04_language_model", "time_to_loss.csv", {}, monkeypatch)
    (ax,) = fig.axes
    low, high = ax.get_ylim()
    labelled = []
    for locs, labels in ((ax.yaxis.get_majorticklocs(), ax.yaxis.get_majorticklabels()),
                         (ax.yaxis.get_minorticklocs(), ax.yaxis.get_minorticklabels())):
        labelled += [(v, t.get_text()) for v, t in zip(locs, labels)
                     if low <= v <= high and t.get_text()]
    assert len(labelled) >= 3, labelled
    for value, text in labelled:
        assert re.fullmatch(r"\d+(\.\d+)?", text), f"the tick at {value:g} reads {text!r}"
        assert float(text) == pytest.approx(value, rel=1e-9), (value, text)


@pytest.mark.parametrize("difference", [0.0, 3.7e-8], ids=["identical", "rounding"])
def test_the_attention_difference_colour_bar_reads_its_values(monkeypatch, difference):
    """Notebook 07's attnlab − GPT-2 panel: each tick of its colour bar reads the value it
    stands at (not 8e-13 at 7.5e-13), whether the difference is 0 or a rounding error."""
    L, H, T = 1, 2, 5
    generator = torch.Generator().manual_seed(0)
    theirs = torch.softmax(torch.randn(L, H, T, T, generator=generator), -1)
    ours = theirs.clone()
    ours[..., 0, 0] += difference  # in every head: the one drawn too
    fig = draw("07_pretrained", "attnlab − GPT-2",
               {"our_attn": ours, "hf_attn": theirs, "tokens": list("abcde"), "N_HEADS": H},
               monkeypatch)
    panel = next(ax for ax in fig.axes if ax.get_title().startswith("attnlab − GPT-2"))
    bar = panel.images[0].colorbar.ax
    low, high = bar.get_ylim()
    labelled = [(v, t.get_text()) for v, t in zip(bar.get_yticks(), bar.get_yticklabels())
                if low <= v <= high]
    assert len(labelled) >= 3, labelled
    assert len({text for _, text in labelled}) == len(labelled), labelled
    for value, text in labelled:
        assert tick_value(text) == pytest.approx(value, rel=1e-9, abs=1e-30), \
            f"the tick at {value:g} reads {text!r}"


def seen_near(fig, xy, colour, radius: int) -> bool:
    """Whether pixels of ``colour`` (near enough: within 0.1 of each RGB channel) are drawn
    within ``radius`` px of the display point ``xy`` of ``fig``, as rendered."""
    import matplotlib.colors

    image = np.asarray(fig.canvas.buffer_rgba())[..., :3] / 255.0
    height = image.shape[0]
    x, y = int(round(xy[0])), int(round(height - xy[1]))  # display y runs up, rows down
    patch = image[max(y - radius, 0):y + radius + 1, max(x - radius, 0):x + radius + 1]
    want = np.asarray(matplotlib.colors.to_rgb(colour))
    return bool((np.abs(patch - want) < 0.1).all(-1).any())


def test_the_teacher_forced_curve_is_seen_where_free_running_equals_it(monkeypatch):
    """Notebook 03's accuracy by target position: where the trained model is right in both
    modes at every position, the two curves coincide; the teacher-forced one still shows at
    each of its points (it was drawn under the free-running one, the same size: hidden)."""
    weak = [([True, True, False, True], [True, False, False, False]),
            ([True, False, True], [True, False, False])]
    trained = [([True] * 4, [True] * 4), ([True] * 3, [True] * 3)]
    fig = draw("03_translation", "target position t (tokens after <sos>)",
               {"modes": {"weak (160 steps)": weak, "trained (600 steps)": trained},
                "EARLY_STEPS": 160, "STEPS": 600, "FULL_SIZE": False}, monkeypatch)
    assert [ax.get_title() for ax in fig.axes] == ["weak (160 steps)", "trained (600 steps)"]
    for ax in fig.axes:
        forced = next(line for line in ax.lines if line.get_label() == "teacher forced")
        free = next(line for line in ax.lines if line.get_label() == "free running (greedy)")
        assert forced.get_color() != free.get_color()
        points = forced.get_transform().transform(np.column_stack(forced.get_data()))
        hidden = [i + 1 for i, xy in enumerate(points)
                  if not seen_near(fig, xy, forced.get_color(), radius=5)]
        assert not hidden, f"{ax.get_title()}: teacher forced hidden at t = {hidden}"


def stand_in_jets(n: int = 40, particles: int = 30) -> tuple:
    """Four-momenta (E, px, py, pz) of ``n`` jets along the x axis, massless particles spread
    about it, the last third of each jet's rows zero (padding); labels half 1, half 0."""
    generator = torch.Generator().manual_seed(0)
    p = torch.randn(n, particles, 3, generator=generator).abs() * torch.tensor([40.0, 4, 4])
    p4 = torch.cat([p.norm(dim=-1, keepdim=True), p], -1)
    p4[:, particles * 2 // 3:] = 0
    return p4, np.arange(n) % 2


def test_each_jet_histogram_says_what_its_y_axis_counts_and_has_room(monkeypatch):
    """Notebook 05's histograms of mass, τ3/τ2 and particle count: every panel has a y label
    (only the first had one) and no panel's labels come within 0.1 inch of its neighbour."""
    from attnlab.models.jet_physics import constituent_mask

    p4, labels = stand_in_jets()
    fig = draw("05_jets", 'histtype="step"',
               {"p4": p4, "mask": constituent_mask(p4), "labels": labels, "FULL_SIZE": False},
               monkeypatch)
    assert len(fig.axes) == 3
    for ax in fig.axes:
        assert "density" in ax.get_ylabel(), f"{ax.get_xlabel()!r}: no y label"
    renderer = fig.canvas.get_renderer()
    boxes = [ax.get_tightbbox(renderer) for ax in fig.axes]
    for left, right, ax in zip(boxes, boxes[1:], fig.axes[1:]):
        gap = (right.x0 - left.x1) / fig.dpi
        assert gap >= 0.1, f"{ax.get_xlabel()!r}: {gap:.2f} inch from the panel on its left"
