"""A run's attention.png, confusion.png and anomaly's sets.png name the step whose weights they draw (the saved
weights: the last step's, or with --keep-best the best validation's), so that two runs'
pictures, or a run's before and after --resume, are told apart."""
import json

import pytest

import attnlab.viz
from attnlab.cli import main
from attnlab.explorer.record import fit_weights_text, run_record, weights_text
from tests.tasks.test_classify import write_csv


def test_the_figures_words_are_those_of_plot_attention(tmp_path):
    """A figure drawn as a run ends names its weights as ``attnlab plot attention`` and the
    page do (``weights_text`` of the run's metrics.json): one wording, not two."""
    (tmp_path / "metrics.json").write_text(json.dumps(
        {"steps": 300, "best_step": 200, "best_metric": "val_loss", "best_value": 0.5}))
    best = {"best_step": 200, "best_metric": "val_loss", "best_value": 0.50000001}
    assert fit_weights_text(300, {}) == "model.safetensors: step 300 of 300, the last step"
    assert fit_weights_text(300, best) == weights_text(run_record(tmp_path)) == \
        "model.safetensors: step 200 of 300, the best val_loss (0.5)"


@pytest.fixture
def titles(monkeypatch):
    """The title of every attention map and confusion matrix drawn, by file name."""
    seen = {}
    for name in ("plot_attention", "plot_confusion"):
        def drawn(*args, _original=getattr(attnlab.viz, name), **kwargs):
            path = _original(*args, **kwargs)
            seen[path.name] = kwargs["title"]
            return path
        monkeypatch.setattr(attnlab.viz, name, drawn)
    return seen


@pytest.mark.slow  # trains a run
def test_reverse_attention_png_names_the_last_step(tmp_path, titles, monkeypatch):
    import attnlab.tasks.sequence.runtime as runtime

    monkeypatch.setattr(runtime, "plot_attention", attnlab.viz.plot_attention)
    assert main(["train", "reverse", "--out", str(tmp_path / "r"), "--max-steps", "3",
                 "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
                 "--dim-feedforward", "16", "--threads", "1"]) == 0
    assert titles["attention.png"] == ("reverse: attention of a test sequence\n"
                                       "model.safetensors: step 3 of 3, the last step")


@pytest.mark.slow  # trains a run
def test_classify_confusion_png_names_the_kept_best_step(tmp_path, titles):
    out = tmp_path / "run"
    assert main(["train", "classify", "--data", str(write_csv(tmp_path / "r.csv", n=60)),
                 "--text-column", "review", "--label-column", "sentiment", "--out", str(out),
                 "--max-steps", "4", "--val-every", "2", "--keep-best", "--batch-size", "8",
                 "--warmup", "1", "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
                 "--dim-feedforward", "32", "--threads", "1"]) == 0
    best = json.loads((out / "metrics.json").read_text())
    assert titles["confusion.png"] == (
        f"confusion matrix, test split\nmodel.safetensors: step {best['best_step']} of 4, the "
        f"best val_loss ({best['best_value']})")
    assert titles["confusion.png"].endswith(weights_text(run_record(out)))


@pytest.mark.slow  # trains a run
def test_anomaly_attention_and_sets_png_name_the_kept_best_step(tmp_path, titles, monkeypatch):
    import matplotlib.figure

    import attnlab.tasks.anomaly.runtime as runtime

    monkeypatch.setattr(runtime, "plot_attention", attnlab.viz.plot_attention)
    suptitles, suptitle = [], matplotlib.figure.Figure.suptitle

    def kept(self, text, **kwargs):
        suptitles.append(text)
        return suptitle(self, text, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "suptitle", kept)
    out = tmp_path / "run"
    assert main(["train", "anomaly", "--out", str(out), "--max-steps", "4", "--val-every", "2",
                 "--keep-best", "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
                 "--dim-feedforward", "16", "--threads", "1"]) == 0
    title = titles["attention.png"].splitlines()
    assert title[1] == weights_text(run_record(out))
    assert title[1].startswith("model.safetensors: step ") and " of 4, the best " in title[1]
    assert suptitles[-1] == title[1]  # sets.png, drawn after attention.png


@pytest.mark.slow  # trains a run
def test_jets_attention_png_names_the_last_step(tmp_path, monkeypatch):
    import attnlab.tasks.jets.runtime as runtime
    from attnlab.tasks.jets.data import write_jets

    from .jets.test_task import TINY, synthetic_jets

    seen = {}

    def drawn(*args, **kwargs):
        seen["title"] = kwargs["title"]
        return runtime_plot(*args, **kwargs)

    runtime_plot = runtime.plot_jet_attention
    monkeypatch.setattr(runtime, "plot_jet_attention", drawn)
    data, out = tmp_path / "jets.h5", tmp_path / "run"
    write_jets(data, *synthetic_jets(60))
    assert main(["train", "jets", "--data", str(data), "--out", str(out), *TINY]) == 0
    steps = json.loads((out / "metrics.json").read_text())["steps"]
    assert seen["title"].splitlines()[-1] == weights_text(run_record(out)) == \
        f"model.safetensors: step {steps} of {steps}, the last step"
