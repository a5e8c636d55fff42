"""`attnlab plot attention` of a run of every task: a figure that fits a screen at
100 % (about 2,000 px a side), one panel per map and no empty axes, a translation's panels
named "cross"; a graph's figure and page single out the node --input names."""
import numpy as np
import pytest

from attnlab import viz
from attnlab.cli import main
from attnlab.explorer import read_data
from attnlab.runs import read_yaml
from attnlab.tasks import get_task

pytestmark = pytest.mark.slow


def panels(fig):
    return [ax for ax in fig.axes if ax.get_images() and "layer" in ax.get_title()]


@pytest.fixture
def drawn(monkeypatch):
    """What the figures plot_attention writes show, noted before each is written (and closed):
    {"axes": how many, "panels": their titles, "title", "boxes": each panel's outlined rows,
    "bold": each panel's bold query labels}."""
    figures, save = [], viz._save

    def note(fig, path):
        figures.append({
            "axes": len(fig.axes), "panels": [ax.get_title() for ax in panels(fig)],
            "title": fig._suptitle.get_text() if fig._suptitle else "",
            # False: "$...$" in the title is drawn as written, not read as matplotlib's math
            "math": fig._suptitle.get_parse_math() if fig._suptitle else None,
            "first_axes_title": fig.axes[0].get_title(),  # jets: the jet's own figure's title
            "boxes": [[(p.get_y(), p.get_height()) for p in ax.patches] for ax in panels(fig)],
            "bold": [[t.get_text() for t in ax.get_yticklabels() if t.get_fontweight() == "bold"]
                     for ax in panels(fig)],
            "grey": [np.ma.getmaskarray(ax.get_images()[0].get_array()) for ax in panels(fig)]})
        return save(fig, path)
    monkeypatch.setattr(viz, "_save", note)
    return figures


def plot(run, text, out, capsys):
    code = main(["plot", "attention", str(run), "--input", text, "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    from PIL import Image

    return Image.open(out).size


def fits_a_screen_and_draws_no_empty_axes(run, text, size, fig):
    """``fig`` (what ``drawn`` noted) of ``plot`` on ``run`` and ``text``, ``size`` its PNG's."""
    width, height = size
    assert width <= 2000 and height <= 2000, (width, height)
    cfg = read_yaml(run / "config.yaml")
    task = get_task(cfg["task"])
    maps = task.runtime().attention_maps(task, run, task.typed(cfg, run), text)[0]
    heads = sum(m.shape[-3] if m.ndim >= 3 else 1 for m in maps)
    assert len(fig["panels"]) == (heads if heads <= viz.MAX_PANELS else len(maps))
    assert fig["axes"] == 2 * len(fig["panels"])  # a map and its colour bar each: none empty


# graph's figure, the slowest to draw, is checked so in the test of its nodes' figures below
@pytest.mark.parametrize("name", ["reverse", "anomaly", "classify", "sets", "translate", "lm",
                                  "jets"])
def test_every_tasks_figure_fits_a_screen_and_draws_no_empty_axes(runs, name, drawn, tmp_path,
                                                                   capsys):
    run, text = runs[name]
    size = plot(run, text, tmp_path / "figure.png", capsys)
    if name == "jets":  # its own figure: the jet in the (Δη, Δφ) plane
        assert size[0] <= 2000 and size[1] <= 2000, size
        return
    (fig,) = drawn
    fits_a_screen_and_draws_no_empty_axes(run, text, size, fig)
    if name == "translate":  # only the decoder's attention over the source, and it says so
        assert all(title.startswith("cross · ") for title in fig["panels"])
        assert "cross-attention" in fig["title"]
    if name == "lm":  # the keys after each query, blocked by the mask, grey, and said so
        assert all(title.startswith("causal · ") for title in fig["panels"])
        assert "grey: a key after its query (the causal mask)" in " ".join(fig["title"].split())
        T = len(fig["grey"][0])
        assert all((grey == np.triu(np.ones((T, T), dtype=bool), 1)).all()
                   for grey in fig["grey"])
    else:
        assert not any(grey.any() for grey in fig["grey"])


def test_the_figure_says_which_run_weights_and_scores_it_shows(run_copy, drawn, tmp_path,
                                                               capsys):
    """Two runs' figures could not be told apart: neither said which run, which step's
    weights, or what the run reached. The title's second line now says so, each score as
    metrics.json holds it (the test split's; an lm's validation), or that there are none."""
    import json

    for name in ("reverse", "lm"):
        run, text = run_copy(name)
        metrics = json.loads((run / "metrics.json").read_text())
        plot(run, text, tmp_path / f"{name}.png", capsys)
        steps = metrics["steps"]
        scores = ", ".join(f"{k} {json.dumps(v)}" for k, v in metrics.items()
                           if k.startswith("test_" if name == "reverse" else "val_"))
        assert unwrapped(drawn[-1]["title"]).endswith(unwrapped(
            f"run {run} · model.safetensors: step {steps} of {steps}, the last step · "
            f"{scores}"))
    (run / "metrics.json").unlink()
    plot(run, text, tmp_path / "none.png", capsys)
    assert unwrapped(drawn[-1]["title"]).endswith(unwrapped(
        f"step not recorded · no metrics yet: {run}/metrics.json is not written (training "
        f"stopped before its end, or is still running)"))


def test_the_jet_figure_says_which_run_weights_and_scores_it_shows_too(run_copy, drawn,
                                                                      tmp_path, capsys):
    """Every figure of `plot attention` names the run, its weights and scores, as the docs
    say: the jets figure (the jet itself) said none of them."""
    import json

    run, text = run_copy("jets")
    metrics = json.loads((run / "metrics.json").read_text())
    plot(run, text, tmp_path / "jet.png", capsys)
    steps = metrics["steps"]
    scores = ", ".join(f"{k} {json.dumps(v)}" for k, v in metrics.items() if k.startswith("test_"))
    assert scores  # the run's held-out scores, each as metrics.json holds it
    assert unwrapped(drawn[-1]["first_axes_title"]).endswith(unwrapped(
        f"run {run} · model.safetensors: step {steps} of {steps}, the last step · {scores}"))


def test_a_run_named_with_dollar_signs_is_drawn_with_its_name_as_written(run_copy, drawn,
                                                                        tmp_path, capsys):
    """`plot attention` of a run in a directory named 'm$\\q$' stopped on matplotlib's
    ParseFatalException (the title's "$...$" read as math text), exit 1; one named 'a$x$'
    was titled with an italic x. The title now holds the name as written."""
    import shutil

    run, text = run_copy("reverse")
    for name in ("m$\\q$", "a$x$ b"):
        named = shutil.copytree(run, tmp_path / name)
        plot(named, text, tmp_path / "figure.png", capsys)  # exit 0
        assert unwrapped(f"run {named} · ") in unwrapped(drawn[-1]["title"])
        assert drawn[-1]["math"] is False
        (tmp_path / "figure.png").unlink()


def unwrapped(title: str) -> str:
    """A title's text without the spaces and line ends the figure wraps it at."""
    return "".join(title.split())


def test_a_graph_figure_and_page_single_out_the_node_named(runs, drawn, tmp_path, capsys):
    run, _ = runs["graph"]
    for node in ("0", "33"):
        size = plot(run, node, tmp_path / f"node{node}.png", capsys)
        fig = drawn[-1]
        fits_a_screen_and_draws_no_empty_axes(run, node, size, fig)
        assert f"query row {node} outlined" in fig["title"] and fig["panels"]
        assert fig["boxes"] == [[(int(node) - 0.5, 1)]] * len(fig["panels"])
        assert all([label.split(":")[0] for label in bold] == [node] for bold in fig["bold"])
        page = tmp_path / f"node{node}.html"
        assert main(["view", str(run), "--input", node, "--out", str(page)]) == 0
        data = read_data(page.read_text(encoding="utf-8"))
        assert data["focus"] == {"axis": "q", "index": int(node)}
    assert (tmp_path / "node0.png").read_bytes() != (tmp_path / "node33.png").read_bytes()


def test_a_text_past_max_len_is_said_to_be_cut(runs, tmp_path, capsys):
    """A classify text longer than --max-len (256) was drawn as its first 256 tokens under a
    title that shows the whole input, without a word: the figure passed for the whole text's.
    A note now says how many tokens the maps cover."""
    run, _ = runs["classify"]
    # " the" after a word is one the run never read (its texts start with "the"): named too
    unknown = "note: --input holds pieces unknown to this model, each read as unk: 'the'"
    for words, said in ((280, [unknown, "note: --input has 280 tokens; the model reads the "
                                        "first 256 (--max-len 256): the attention maps are of "
                                        "those"]),
                        (256, [unknown])):
        text = " ".join(["the film was great"] * (words // 4))
        code = main(["plot", "attention", str(run), "--input", text, "--out",
                     str(tmp_path / f"{words}.png")])
        err = capsys.readouterr().err
        assert code == 0 and err.splitlines() == said, err


def test_plot_attention_draws_the_layer_and_head_chosen(runs, drawn, tmp_path, capsys):
    """`plot attention` had no --layer or --head: a graph's 9 maps were all drawn, each small.
    Now they choose, the panels keep their numbers, and a layer or head the run does not have
    is refused in one line naming the flag, before anything is written."""
    run, _ = runs["graph"]  # layer 1: 8 heads, layer 2: 1
    for flags, titles in [(["--layer", "1", "--head", "3"], ["layer 1, head 3"]),
                          (["--head", "1"], ["layer 1, head 1", "layer 2, head 1"]),
                          (["--layer", "2"], ["layer 2, head 1"])]:
        assert main(["plot", "attention", str(run), "--input", "5", *flags,
                     "--out", str(tmp_path / "chosen.png")]) == 0
        assert drawn[-1]["panels"] == titles, flags
    capsys.readouterr()
    jets, jet = runs["jets"]
    for where, text, flags, said in [
            (run, "5", ["--layer", "3"], "--layer 3: this run has 2 attention layers"),
            (run, "5", ["--head", "2"], "--head 2: layer 2 has 1 head (--head 1 to 1), or "
                                        "--layer for a layer with more"),
            (run, "5", ["--head", "9"], "--head 9: layer 2 has 1 head (--head 1 to 1)\n"),
            (run, "5", ["--layer", "1", "--head", "9"], "--head 9: layer 1 has 8 heads"),
            (run, "5", ["--layer", "0"], "--layer"),
            (jets, jet, ["--head", "1"], "--head 1: a jets run's figure is its own picture")]:
        out = tmp_path / "refused.png"
        assert main(["plot", "attention", str(where), "--input", text, *flags,
                     "--out", str(out)]) == 2, flags
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and said in err, err
        assert not out.exists()
