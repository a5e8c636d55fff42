"""Every run `attnlab train` writes can be loaded again: for each task and each
architecture, a tiny run trains, then ``attnlab.load`` rebuilds its model, ``predict`` answers,
``evaluate`` scores its test split and ``view`` writes its attention page. ``train`` and the loaders read one declaration of whether --model-dim is split among
--num-heads (``Task.heads_split_width``): graph attention and the recurrent translators
trained with a width of 12 under 8 heads (or 10 under 4), and every command then refused the run."""
import json

import pytest
import torch

import attnlab
from attnlab.cli import main
from attnlab.tasks.jets.data import write_jets
from tests.jets.test_task import synthetic_jets
from tests.tasks.test_classify_sets import SET_ARGS, write_sets

from .conftest import task_data


SMALL = ["--max-steps", "3", "--threads", "1", "--warmup", "1", "--val-every", "3"]
TRANSFORMER = ["--model-dim", "16", "--num-heads", "2", "--dim-feedforward", "32"]
# where --model-dim is not split among the heads, a width the default heads (4; graph: 8) do
# not divide
UNSPLIT = ["--model-dim", "10"]
GRAPH_UNSPLIT = ["--model-dim", "12"]  # graph's 8 heads: a run every command once refused
SEQUENCE = ["--seq-len", "6", "--num-categories", "5", "--train-size", "64", "--val-size", "16",
            "--test-size", "16", "--batch-size", "16"]
TRANSLATE = ["--max-number", "1000", "--test-size", "20", "--val-size", "8", "--num-layers", "1",
             "--batch-size", "16"]

# (task, extra flags, predict --input); {classify}, {lm}, {jets} are data files
CASES = {
    "reverse": ("reverse", [*SEQUENCE, *TRANSFORMER], "1 2 3"),
    "copy": ("copy", [*SEQUENCE, *TRANSFORMER], "1 2 3"),
    "sort": ("sort", [*SEQUENCE, *TRANSFORMER], "3 1 2"),
    "anomaly": ("anomaly", ["--train-sets", "64", "--val-sets", "16", "--test-sets", "16",
                            "--set-size", "5", "--batch-size", "16", *TRANSFORMER], "0 1 2 3 4"),
    "classify": ("classify", ["--data", "{classify}", "--batch-size", "16", *TRANSFORMER],
                 "the film was superb"),
    "tag": ("tag", ["--data", "{tag}", "--batch-size", "16", *TRANSFORMER], "John lives in Rome"),
    "classify-sets": ("classify", ["--data", "{sets}", *SET_ARGS, "--batch-size", "16",
                                   *TRANSFORMER], "-2,1;-1,3;0.5,2"),
    "translate-transformer": ("translate", ["--arch", "transformer", *TRANSLATE, *TRANSFORMER],
                              "seven"),
    "translate-rnn": ("translate", ["--arch", "rnn", *TRANSLATE, *UNSPLIT], "seven"),
    "translate-rnn-additive": ("translate", ["--arch", "rnn-additive", *TRANSLATE, *UNSPLIT],
                               "seven"),
    "translate-rnn-bilinear": ("translate", ["--arch", "rnn-bilinear", *TRANSLATE, *UNSPLIT],
                               "seven"),
    "lm": ("lm", ["--data", "{lm}", "--num-layers", "1", "--batch-size", "8", "--block-size",
                  "16", "--val-batches", "2", *TRANSFORMER], "the "),
    "jets": ("jets", ["--data", "{jets}", "--batch-size", "16", "--max-constituents", "30",
                      *TRANSFORMER], "{jets}:3"),
    "jets-no-pair-bias": ("jets", ["--data", "{jets}", "--batch-size", "16", "--max-constituents",
                                   "30", "--no-pair-bias", *TRANSFORMER], "{jets}:3"),
    "graph-gat": ("graph", ["--kind", "gat", *GRAPH_UNSPLIT], "33"),
    "graph-mean": ("graph", ["--kind", "mean", *GRAPH_UNSPLIT], "33"),
    "graph-mlp": ("graph", ["--kind", "mlp", *GRAPH_UNSPLIT], "33"),
}
NO_ATTENTION = {"graph-mean", "graph-mlp", "translate-rnn"}  # models with nothing to view


@pytest.fixture(scope="module")
def data_files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("data")
    files = {k: str(v) for k, v in task_data(tmp).items()}
    files["sets"] = str(write_sets(tmp / "clouds.csv"))
    files["jets"] = str(tmp / "jets.h5")
    write_jets(files["jets"], *synthetic_jets(40))
    return files


@pytest.mark.slow  # trains one run per case
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_trained_run_loads_predicts_evaluates_and_views(case, data_files, tmp_path, capsys):
    task, flags, text = CASES[case]
    out = tmp_path / case
    flags = [f.format(**data_files) for f in flags]
    text = text.format(**data_files)
    assert main(["train", task, "--out", str(out), *SMALL, *flags]) == 0
    loaded = attnlab.load(out)
    model = loaded[0] if isinstance(loaded, tuple) else loaded
    assert isinstance(model, torch.nn.Module) and not model.training
    capsys.readouterr()
    assert main(["predict", str(out), "--input", text]) == 0
    assert capsys.readouterr().out.strip()
    assert main(["evaluate", str(out)]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics and all(isinstance(k, str) for k in metrics)
    page = tmp_path / "view.html"
    if case in NO_ATTENTION:  # refused in one line, naming what has attention
        assert main(["view", str(out), "--input", text, "--out", str(page)]) == 2
        assert "no attention" in capsys.readouterr().err and not page.exists()
    else:
        assert main(["view", str(out), "--input", text, "--out", str(page)]) == 0
        assert page.stat().st_size > 1000


@pytest.mark.parametrize("task, extra, refused", [
    ("reverse", {}, True), ("translate", {"arch": "transformer"}, True),
    ("translate", {"arch": "rnn"}, False), ("graph", {}, False)])
def test_the_load_time_check_splits_the_width_where_training_does(task, extra, refused, tmp_path):
    """A hand-edited config.yaml whose width the heads do not divide is still refused, naming
    the file, for a model that splits it; graph and the recurrent translators load."""
    from attnlab.errors import UsageError
    from attnlab.loading import check_run_dir
    from attnlab.runs import write_yaml

    write_yaml(tmp_path / "config.yaml", {"task": task, "model_dim": 10, "num_heads": 4, **extra})
    (tmp_path / "model.safetensors").write_bytes(b"")
    if refused:
        with pytest.raises(UsageError, match=r"config.yaml: model_dim \(10\) must be divisible "
                                             r"by num_heads \(4\)"):
            check_run_dir(tmp_path)
    else:
        assert check_run_dir(tmp_path)[1]["model_dim"] == 10
