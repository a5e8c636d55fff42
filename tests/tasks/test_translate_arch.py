"""`attnlab train translate --arch transformer|rnn|rnn-additive|rnn-bilinear`: every arch
trains, translates, evaluates and resumes from the command line; the recurrent ones with
attention draw their alignment (PNG and page), the one without says it has none."""
import json

import pytest

from attnlab import load
from attnlab.cli import main
from attnlab.explorer import read_data
from attnlab.models.rnn_seq2seq import RNNSeq2Seq

pytestmark = pytest.mark.slow

TINY = ["--max-number", "1000", "--test-size", "20", "--val-size", "8", "--num-layers", "1",
        "--batch-size", "16", "--model-dim", "16", "--max-steps", "4", "--checkpoint-every", "2",
        "--threads", "1"]
TRANSFORMER = ["--num-heads", "2", "--dim-feedforward", "32"]  # refused by the recurrent archs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("archs")
    out = {}
    for arch in ("transformer", "rnn", "rnn-additive", "rnn-bilinear"):
        out[arch] = tmp / arch
        extra = TRANSFORMER if arch == "transformer" else []
        assert main(["train", "translate", "--arch", arch, *TINY, *extra,
                     "--out", str(out[arch])]) == 0
    return out


@pytest.mark.parametrize("arch", ["transformer", "rnn", "rnn-additive", "rnn-bilinear"])
def test_every_arch_trains_translates_and_evaluates(runs, arch, capsys):
    run = runs[arch]
    model, _ = load(run)
    assert isinstance(model, RNNSeq2Seq) == (arch != "transformer")
    if arch != "transformer":
        assert model.attention_kind == (arch.split("-")[1] if "-" in arch else "none")
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["steps"] == 4 and {"test_exact_match", "test_chrf"} <= set(metrics)
    capsys.readouterr()
    assert main(["translate", str(run), "twelve", "three hundred"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2  # one line per text (may be empty)
    assert main(["evaluate", str(run)]) == 0
    assert (run / "cross_attention.png").exists() == (arch != "rnn")


def test_a_recurrent_run_resumes(runs, capsys):
    run = runs["rnn-additive"]
    assert main(["train", "translate", "--arch", "rnn-additive", *TINY, "--out", str(run),
                 "--resume", "--max-steps", "6"]) == 0
    assert json.loads((run / "metrics.json").read_text())["steps"] == 6


def test_alignment_of_an_attentive_rnn_and_none_without(runs, tmp_path, capsys):
    page = tmp_path / "a.html"
    assert main(["view", str(runs["rnn-bilinear"]), "--input", "three hundred and five",
                 "--out", str(page)]) == 0
    (layer,) = read_data(page.read_text())["layers"]
    assert layer["kind"] == "cross" and len(layer["weights"]) == 1  # one "head"
    assert len(layer["weights"][0][0]) == 4  # T x S: the four source words
    assert main(["plot", "attention", str(runs["rnn-additive"]), "--input", "twelve",
                 "--out", str(tmp_path / "a.png")]) == 0
    capsys.readouterr()
    for argv in (["view", str(runs["rnn"]), "--input", "twelve", "--out", str(tmp_path / "n.html")],
                 ["plot", "attention", str(runs["rnn"]), "--input", "twelve", "--out",
                  str(tmp_path / "n.png")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "--arch rnn" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "n.html").exists() and not (tmp_path / "n.png").exists()


def test_an_unknown_arch_is_refused_before_a_run_directory(tmp_path, capsys):
    assert main(["train", "translate", "--arch", "lstm", "--out", str(tmp_path / "x")]) == 2
    assert "--arch" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_evaluate_by_length_tables_every_test_pair_and_draws_the_figure(runs, capsys):
    run = runs["rnn-additive"]
    (run / "by_length.png").unlink(missing_ok=True)
    assert main(["evaluate", str(run), "--by-length"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    rows = result["by_length"]
    assert sum(r["pairs"] for r in rows) == 20  # --test-size
    assert [r["first"] for r in rows] == sorted(r["first"] for r in rows)
    assert all(0 <= r["exact_match"] <= 1 and 0 <= r["chrf"] <= 100 for r in rows)
    assert "source tokens" in err and (run / "by_length.png").read_bytes()[:4] == b"\x89PNG"
    exact = sum(r["exact_match"] * r["pairs"] for r in rows) / 20
    assert abs(exact - result["test_exact_match"]) < 1e-4  # the buckets split the same pairs


def test_by_length_is_refused_for_other_tasks(tmp_path, capsys):
    from attnlab.models import ElementPredictor
    from attnlab.runs import save_weights, write_yaml

    save_weights(ElementPredictor(6, 8, 6, 2, 1, dim_feedforward=16), tmp_path / "model.safetensors")
    write_yaml(tmp_path / "config.yaml", {"task": "reverse", "num_categories": 6, "seq_len": 5,
                                          "model_dim": 8, "num_heads": 2, "num_layers": 1,
                                          "dim_feedforward": 16, "dropout": 0.0, "seed": 0,
                                          "norm_first": False, "test_size": 10})
    assert main(["evaluate", str(tmp_path), "--by-length"]) == 2
    err = capsys.readouterr().err
    assert "--by-length is for translate runs" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("flags, named", [
    (["--num-heads", "8"], "--num-heads"),
    (["--dim-feedforward", "64", "--no-tie-embeddings"], "--dim-feedforward, --no-tie-embeddings"),
    (["--positional", "learned", "--norm-first"], "--norm-first, --positional"),
])
def test_a_recurrent_arch_refuses_the_transformers_settings(tmp_path, capsys, flags, named):
    # it would train without them and say nothing; refused before a run directory exists
    out = tmp_path / "rnn"
    assert main(["train", "translate", "--arch", "rnn-additive", *flags, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"attnlab: error: {named}: for --arch transformer only; --arch rnn-additive "
                   f"(a GRU encoder-decoder) uses --model-dim, --num-layers and --dropout")
    assert not out.exists()


def test_a_recurrent_arch_refuses_a_transformer_setting_even_at_its_default(tmp_path, capsys):
    # given is given: --num-heads 4 (the default) would be as unused as any other value
    assert main(["train", "translate", "--arch", "rnn", "--num-heads", "4",
                 "--out", str(tmp_path / "r")]) == 2
    assert capsys.readouterr().err.startswith("attnlab: error: --num-heads: for --arch "
                                              "transformer only")


@pytest.mark.parametrize("flags, named", [
    (["--src", "fr", "--max-number", "100"], "--src, --max-number: for the built-in data only"),
    (["--dataset", "dates"], "--dataset: for the built-in data only"),
])
def test_data_file_refuses_the_built_in_datas_settings(tmp_path, capsys, flags, named):
    """Taken and dropped without a word before, and recorded in config.yaml (dataset: dates of
    a run that trained on the file)."""
    data = tmp_path / "pairs.csv"
    data.write_text("source,target\n" + "".join(f"a{i},b{i}\n" for i in range(30)))
    out = tmp_path / "run"
    assert main(["train", "translate", "--data", str(data), "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"attnlab: error: {named}") and not out.exists()


def test_the_built_in_data_refuses_a_files_columns(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "translate", "--src-column", "en", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "attnlab: error: --src-column: for --data FILE only; the built-in data is --dataset"


def test_an_rnn_takes_a_model_dim_that_no_head_count_divides(tmp_path):
    """A GRU has no heads: --model-dim 30 was refused for the default 4 heads, and
    --num-heads for being a Transformer setting, so no 30-wide rnn could be trained."""
    assert main(["train", "translate", "--arch", "rnn-additive", "--out", str(tmp_path / "r"),
                 "--model-dim", "30", "--max-number", "200", "--test-size", "8", "--val-size",
                 "4", "--max-steps", "2"]) == 0


def test_evaluate_by_length_never_replaces_a_figure_and_its_title_names_the_data(
        runs, tmp_path, monkeypatch, capsys):
    """`evaluate RUN --data OTHER.csv --by-length` must not replace the run's by_length.png (it
    once did, with a figure whose title still named the run's data)."""
    from attnlab.tasks.translate import runtime as translate_runtime

    titles = []
    draw = translate_runtime.plot_by_length
    monkeypatch.setattr(translate_runtime, "plot_by_length",
                        lambda *a, **k: titles.append(k["title"]) or draw(*a, **k))
    run = runs["rnn-additive"]
    figure = run / "by_length.png"
    figure.unlink(missing_ok=True)
    assert main(["evaluate", str(run), "--by-length"]) == 0
    assert titles[-1].endswith("the run's test pairs (20 pairs)")
    before = figure.read_bytes()
    other = tmp_path / "other.csv"
    other.write_text("source,target\nseven,sieben\nforty-two,zweiundvierzig\n")
    capsys.readouterr()
    assert main(["evaluate", str(run), "--data", str(other), "--by-length"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(figure) in err and "--out" in err
    assert figure.read_bytes() == before and len(titles) == 1  # refused before decoding
    mine = tmp_path / "other.png"
    assert main(["evaluate", str(run), "--data", str(other), "--by-length", "--out",
                 str(mine)]) == 0
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"wrote {mine}"
    assert titles[-1].endswith("--data other.csv (2 pairs)") and mine.read_bytes()[:4] == b"\x89PNG"
    assert figure.read_bytes() == before
    assert main(["evaluate", str(run), "--out", str(mine)]) == 2  # a figure without --by-length
    assert "--by-length" in capsys.readouterr().err
