"""`attnlab train graph`: node classification with graph attention, mean aggregation or an MLP
on the karate club and a stochastic block model — the edges matter (attention and mean beat the
edge-blind MLP), a trained run predicts, evaluates and shows its attention, and bad settings
exit 2 before anything is written."""
import json

import pytest

from attnlab.cli import main
from attnlab.explorer import read_data
from attnlab.runs import read_yaml

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def karate_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("graph")
    runs = {}
    for kind in ("gat", "mean", "mlp"):
        runs[kind] = tmp / kind
        assert main(["train", "graph", "--kind", kind, "--out", str(runs[kind])]) == 0
    return runs


def accuracy(run):
    return json.loads((run / "metrics.json").read_text())["test_accuracy"]


def test_the_edges_matter_on_the_karate_club(karate_runs):
    # one-hot identities: a test node's own features say nothing; its friends say its club
    assert accuracy(karate_runs["gat"]) >= 0.9
    assert accuracy(karate_runs["mean"]) >= 0.9
    assert accuracy(karate_runs["mlp"]) <= 0.7


def test_a_trained_run_predicts_evaluates_and_shows_its_attention(karate_runs, tmp_path, capsys):
    run = karate_runs["gat"]
    capsys.readouterr()
    assert main(["predict", str(run), "--input", "33"]) == 0
    assert capsys.readouterr().out.strip() in ("Mr. Hi", "Officer")
    assert main(["evaluate", str(run)]) == 0
    assert json.loads(capsys.readouterr().out)["test_accuracy"] == pytest.approx(accuracy(run))
    page = tmp_path / "karate.html"
    assert main(["view", str(run), "--input", "0", "--out", str(page)]) == 0
    data = read_data(page.read_text())
    assert [len(layer["weights"]) for layer in data["layers"]] == [8, 1]  # 8 heads, then 1
    assert len(data["query_tokens"]) == 34 and data["query_tokens"][0] == "0:Mr. Hi"
    first = data["layers"][0]["weights"][0][0]  # node 0's weights over the club
    assert abs(sum(first) - 1) < 1e-3 and first[33] == 0  # 0 and 33 are not friends


def test_runs_without_attention_load_from_their_config(karate_runs, capsys):
    """mean and mlp refuse --num-heads, but their config.yaml keeps the model's field."""
    for kind in ("mean", "mlp"):
        assert "num_heads" in read_yaml(karate_runs[kind] / "config.yaml")
        capsys.readouterr()
        assert main(["predict", str(karate_runs[kind]), "--input", "33"]) == 0
        assert capsys.readouterr().out.strip() in ("Mr. Hi", "Officer")


@pytest.mark.parametrize("argv, named", [
    (["predict", "{gat}", "--input", "34"], "--input"),
    (["plot", "attention", "{mlp}", "--input", "0", "--out", "{tmp}/x.png"], "--kind mlp"),
    (["evaluate", "{gat}", "--data", "x.csv"], "--data"),
])
def test_errors_of_a_trained_run_exit_2(karate_runs, tmp_path, argv, named, capsys):
    argv = [a.format(gat=karate_runs["gat"], mlp=karate_runs["mlp"], tmp=tmp_path) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert named in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("args, named", [
    (["--epochs", "3"], "--epochs"),
    (["--train-per-class", "10", "--val-per-class", "7"],
     "at most 16 (on the karate club, whose two clubs have 17 members each)"),
    (["--graph", "sbm", "--nodes", "30", "--communities", "3", "--train-per-class", "8"],
     "--train-per-class"),
    (["--kind", "gcn"], "--kind"),
    # only graph attention has heads: this was taken, unused, and recorded in config.yaml
    (["--kind", "mean", "--num-heads", "4"], "--num-heads: for --kind gat only"),
    (["--p-in", "1.5", "--graph", "sbm"], "--p-in"),
])
def test_bad_settings_exit_2_before_a_run_directory(tmp_path, args, named, capsys):
    out = tmp_path / "run"
    assert main(["train", "graph", *args, "--out", str(out)]) == 2
    assert named in capsys.readouterr().err and not out.exists()


def test_a_link_probability_of_one_is_a_graph_too(tmp_path):
    """p = 1 (every pair in a group linked) was refused as outside [0, 1)."""
    out = tmp_path / "sbm"
    assert main(["train", "graph", "--graph", "sbm", "--nodes", "30", "--p-in", "1",
                 "--max-steps", "2", "--out", str(out)]) == 0
    assert read_yaml(out / "config.yaml")["p_in"] == 1


def test_block_model_gat_learns(tmp_path):
    out = tmp_path / "sbm"
    assert main(["train", "graph", "--graph", "sbm", "--nodes", "90", "--out", str(out)]) == 0
    assert accuracy(out) >= 0.8  # 3 groups: chance is 1/3


def test_model_dim_is_each_heads_width_and_karate_refuses_the_sbms_settings(tmp_path, capsys):
    """--model-dim 12 with 8 heads is 8 heads of 12 here, not a width to split (it was refused
    as not divisible by 8); --nodes and the like set nothing on the fixed karate graph (they
    were taken, and recorded in config.yaml)."""
    assert main(["train", "graph", "--out", str(tmp_path / "g"), "--model-dim", "12",
                 "--max-steps", "2"]) == 0
    assert main(["train", "graph", "--out", str(tmp_path / "k"), "--nodes", "50",
                 "--p-in", "0.9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == ("attnlab: error: --nodes, --p-in: for --graph sbm only; --graph karate is a "
                   "fixed graph")
    assert not (tmp_path / "k").exists()


def test_a_karate_run_records_only_the_settings_it_uses(tmp_path):
    """A karate-club run's config.yaml does not hold the block model's --nodes, --p-in, ...
    (it once did); a block-model run keeps them (it is rebuilt from them)."""
    from attnlab.runs import read_yaml

    sbm = {"nodes", "communities", "p_in", "p_out", "feature_noise"}
    assert main(["train", "graph", "--out", str(tmp_path / "k"), "--max-steps", "2"]) == 0
    recorded = read_yaml(tmp_path / "k" / "config.yaml")
    assert recorded["graph"] == "karate" and not sbm & set(recorded)
    assert main(["predict", str(tmp_path / "k"), "--input", "33"]) == 0
    assert main(["train", "graph", "--graph", "sbm", "--nodes", "30", "--out",
                 str(tmp_path / "s"), "--max-steps", "2"]) == 0
    assert sbm <= set(read_yaml(tmp_path / "s" / "config.yaml"))


def test_a_graph_too_large_for_memory_is_refused_before_anything_runs(tmp_path, capsys):
    """Dense N x N attention: --nodes 10^8 once ran the machine out of memory."""
    out = tmp_path / "big"
    assert main(["train", "graph", "--graph", "sbm", "--nodes", "100000000", "--out",
                 str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnlab: error: these settings need about ") and "100,000,000" in err
    assert len(err.splitlines()) == 1 and not out.exists()
