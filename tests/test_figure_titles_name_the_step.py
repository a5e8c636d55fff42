"""A run's attention.png and confusion.png name the step whose weights they draw (the saved
weights: the last step's, or with --keep-best the best validation's), so that two runs'
pictures, or a run's before and after --resume, are told apart."""
import json

import pytest

import attnlab.viz
from attnlab.cli import main
from attnlab.training.engine import FitResult
from tests.tasks.test_classify import write_csv


def test_the_weights_step_is_the_last_or_the_kept_best():
    last = FitResult(steps=300, train_seconds=1.0, resumed_from=None, is_global_zero=True)
    best = FitResult(steps=300, train_seconds=1.0, resumed_from=None, is_global_zero=True,
                     best={"best_step": 200, "best_metric": "val_loss", "best_value": 0.5})
    assert last.weights_step == "weights of step 300"
    assert best.weights_step == "weights of step 200 (--keep-best's; trained to 300)"


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
    assert titles["attention.png"] == "reverse: attention of a test sequence, weights of step 3"


@pytest.mark.slow  # trains a run
def test_classify_confusion_png_names_the_kept_best_step(tmp_path, titles):
    out = tmp_path / "run"
    assert main(["train", "classify", "--data", str(write_csv(tmp_path / "r.csv", n=60)),
                 "--text-column", "review", "--label-column", "sentiment", "--out", str(out),
                 "--max-steps", "4", "--val-every", "2", "--keep-best", "--batch-size", "8",
                 "--warmup", "1", "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
                 "--dim-feedforward", "32", "--threads", "1"]) == 0
    best = json.loads((out / "metrics.json").read_text())["best_step"]
    assert titles["confusion.png"] == (f"confusion matrix, test split\nweights of step {best}"
                                      " (--keep-best's; trained to 4)")
