"""`attnlab train jets` end to end on a tiny file in the reference layout (train → evaluate →
predict → plot attention, and --baselines), and its input errors: exit 2, one line naming the
flag, file, column or row, and no run directory written."""
import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from attnlab.cli import main
from attnlab.tasks.jets.data import jet_columns, write_jets
from attnlab.runs import read_yaml


def synthetic_jets(n_per_class: int, *, seed: int = 0, most: int = 30):
    """Toy jets at pT = 600 GeV (not physics: fast and separable): "top" jets spread their
    constituents over three prongs 0.2-0.5 apart, "QCD" jets over one; shuffled, pT-ordered,
    zero-padded to ``most`` constituents. Returns (p4 (2n, most, 4), labels (2n,))."""
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.repeat([1, 0], n_per_class))
    p4 = np.zeros((len(labels), most, 4), np.float32)
    for j, top in enumerate(labels):
        k = int(rng.integers(4, most + 1))
        prongs = rng.normal(0, 0.25, (3, 2)) if top else np.zeros((1, 2))
        centre = prongs[rng.integers(len(prongs), size=k)]
        eta = 0.2 + centre[:, 0] + rng.normal(0, 0.04, k)
        phi = 1.0 + centre[:, 1] + rng.normal(0, 0.04, k)
        pt = np.sort(rng.exponential(1.0, k))[::-1]
        pt = 600 * pt / pt.sum()
        px, py, pz = pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta)
        p4[j, :k] = np.stack([np.sqrt(px ** 2 + py ** 2 + pz ** 2), px, py, pz], -1)
    return p4, labels


TINY = ["--max-steps", "16", "--batch-size", "16", "--model-dim", "16", "--num-heads", "2",
        "--dim-feedforward", "32", "--max-constituents", "30", "--warmup", "2",
        "--val-every", "8", "--lr", "3e-3", "--seed", "1"]


@pytest.fixture(scope="module")
def jets_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("jets") / "jets.h5"
    write_jets(path, *synthetic_jets(120))
    return path


@pytest.fixture(scope="module")
def jets_run(jets_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "run"
    code = main(["train", "jets", "--data", str(jets_file), "--out", str(out), *TINY,
                 "--class-token", "--pair-bias", "--baselines"])
    assert code == 0
    return out


@pytest.mark.slow
def test_a_tiny_run_writes_the_run_directory_and_the_metrics(jets_run, jets_file):
    metrics = json.loads((jets_run / "metrics.json").read_text())
    keys = {"test_accuracy", "test_auc", "test_rejection_30", "test_rejection_50", "steps",
            "train_seconds", "parameters"}
    assert keys <= set(metrics) and metrics["steps"] == 16
    assert 0 <= metrics["test_auc"] <= 1
    for name in ("config.yaml", "model.safetensors", "roc.png", "scores.png", "attention.png",
                 "baselines.json"):
        assert (jets_run / name).is_file(), name
    assert (jets_run / "checkpoints" / "last.ckpt").is_file()
    cfg = read_yaml(jets_run / "config.yaml")
    assert cfg["class_token"] and cfg["pair_bias"] and cfg["max_constituents"] == 30
    assert cfg["jets"] == {"train": 168, "val": 24, "test": 48}  # index ranges of 240 jets
    baselines = json.loads((jets_run / "baselines.json").read_text())
    assert set(baselines) == {"test_jets", "mass", "tau32", "likelihood", "pfn"}
    assert baselines["test_jets"] == 48
    assert all(0 <= b["test_auc"] <= 1 for k, b in baselines.items() if k != "test_jets")


@pytest.mark.slow
def test_evaluate_gives_the_metrics_of_the_run_and_of_another_file(jets_run, capsys, tmp_path):
    assert main(["evaluate", str(jets_run)]) == 0
    again = json.loads(capsys.readouterr().out)
    saved = json.loads((jets_run / "metrics.json").read_text())
    assert again["test_auc"] == pytest.approx(saved["test_auc"], abs=1e-6)
    other = tmp_path / "other.h5"
    write_jets(other, *synthetic_jets(20, seed=5))
    assert main(["evaluate", str(jets_run), "--data", str(other)]) == 0
    assert set(json.loads(capsys.readouterr().out)) == {
        "test_accuracy", "test_auc", "test_rejection_30", "test_rejection_50"}


@pytest.mark.slow
def test_evaluate_on_a_file_of_training_jets_says_so(jets_run, jets_file, capsys, tmp_path):
    """`evaluate DIR --data FILE` on the file the run trained on (as docs/jets.md's own example
    does) printed metrics of jets the model had learned, 168 of the 240, with no word: train
    says it of a --test file, and evaluate --data of classify does. Said now, as train says it;
    a file of other jets gets no warning."""
    assert main(["evaluate", str(jets_run), "--data", str(jets_file)]) == 0
    err = capsys.readouterr().err
    assert (f"warning: --data {jets_file}: 168 of its 240 rows have an input that a training "
            f"row has too (first: row 0), so its scores are partly of inputs the model trained "
            f"on") in err, err
    other = tmp_path / "other.h5"
    write_jets(other, *synthetic_jets(20, seed=5))
    assert main(["evaluate", str(jets_run), "--data", str(other)]) == 0
    assert "warning" not in capsys.readouterr().err
    # the training file replaced by other jets (review): they are not the ones trained on,
    # though its first 70% are the range the run trained on, so nothing is said of them
    moved = tmp_path / "run"
    shutil.copytree(jets_run, moved)
    fresh = tmp_path / "fresh.h5"
    write_jets(fresh, *synthetic_jets(120, seed=7))
    config = moved / "config.yaml"
    config.write_text(config.read_text().replace(str(jets_file), str(fresh)))
    assert main(["evaluate", str(moved), "--data", str(fresh)]) == 0
    assert "warning" not in capsys.readouterr().err


@pytest.mark.slow
def test_predict_prints_the_label_and_its_probability(jets_run, jets_file, capsys):
    assert main(["predict", str(jets_run), "--input", f"{jets_file}:3"]) == 0
    assert re.fullmatch(r"(top|QCD) (0\.[5-9]\d{3}|1\.0000)",
                        capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.slow
def test_plot_attention_draws_the_jet(jets_run, jets_file, tmp_path, capsys):
    out = tmp_path / "a.png"
    assert main(["plot", "attention", str(jets_run), "--input", f"{jets_file}:0",
                 "--out", str(out)]) == 0
    assert out.is_file() and capsys.readouterr().out.strip() == str(out)


@pytest.mark.slow
@pytest.mark.parametrize("text, message", [
    ("{file}:999", r"--input .*:999: row 999 is past the end of .* \(240 jets: rows 0\.\.239\)"),
    ("{file}", r"--input must be FILE:ROW"),
    ("nope.h5:1", r"--input: file not found: nope.h5"),
])
def test_predict_refuses_a_bad_input_with_exit_2(jets_run, jets_file, capsys, text, message):
    assert main(["predict", str(jets_run), "--input", text.format(file=jets_file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(message, err), err


@pytest.mark.slow
def test_predict_refuses_a_jet_with_no_constituents(jets_run, jets_file, tmp_path, capsys):
    """An all-zero row is all padding: predict once gave it a confident-looking label, and
    plot attention crashed on it."""
    import pandas as pd

    df = pd.read_hdf(jets_file, "table")
    df.loc[df.index[7], [c for c in df.columns if c != "is_signal_new"]] = 0.0
    empty = tmp_path / "empty.h5"
    df.to_hdf(empty, key="table", format="table")
    for command in (["predict"], ["plot", "attention"]):
        assert main([*command, str(jets_run), "--input", f"{empty}:7"]) == 2
        err = capsys.readouterr().err
        assert err == (f"attnlab: error: --input {empty}: row 7 has no constituents (every "
                       f"energy E_0..E_29 is 0)\n")
    assert main(["predict", str(jets_run), "--input", f"{empty}:6"]) == 0


@pytest.mark.slow
def test_predict_reads_only_its_row_of_the_file(jets_run, jets_file, tmp_path, capsys):
    """A NaN or a negative energy in row 9 once refused `--input FILE:3` (the whole file was
    checked); row 3 is answered as in the clean file, and row 9 is refused, naming
    the column, row and value."""
    assert main(["predict", str(jets_run), "--input", f"{jets_file}:3"]) == 0
    clean = capsys.readouterr().out.strip().splitlines()[-1]
    import pandas as pd

    df = pd.read_hdf(jets_file, "table")
    for column, value, says in (("PX_2", float("nan"), "is NaN"),
                                ("E_1", -4.5, "is -4.5 (an energy must be >= 0; a zero row is "
                                              "padding)")):
        bad = tmp_path / f"bad_{column}.h5"
        broken = df.copy()
        broken.loc[broken.index[9], column] = value
        broken.to_hdf(bad, key="table", format="table")
        assert main(["predict", str(jets_run), "--input", f"{bad}:3"]) == 0
        assert capsys.readouterr().out.strip().splitlines()[-1] == clean
        assert main(["predict", str(jets_run), "--input", f"{bad}:9"]) == 2
        assert capsys.readouterr().err == (
            f"attnlab: error: --input {bad}: column {column} row 9 {says}\n")


@pytest.mark.slow
def test_a_negative_energy_is_refused_where_the_jets_enter(jets_file, tmp_path, capsys):
    """E < 0 was once taken as padding (the mask is E > 0), silently dropping the
    constituent; train, evaluate and predict now refuse the file before a run directory."""
    import pandas as pd

    df = pd.read_hdf(jets_file, "table")
    df.loc[df.index[17], "E_0"] = -120.0
    bad = tmp_path / "negative.h5"
    df.to_hdf(bad, key="table", format="table")
    out = tmp_path / "run"
    assert main(["train", "jets", "--data", str(bad), "--out", str(out), *TINY]) == 2
    assert capsys.readouterr().err == (
        f"attnlab: error: --data {bad}: column E_0 row 17 is -120 (an energy must be >= 0; a "
        f"zero row is padding)\n")
    assert not out.exists()


@pytest.mark.slow
def test_val_every_longer_than_an_epoch_is_honoured(jets_file, tmp_path):
    """--val-every N above the batches of an epoch was once cut to one epoch without a word."""
    import csv

    out = tmp_path / "run"
    assert main(["train", "jets", "--data", str(jets_file), "--out", str(out), *TINY,
                 "--val-every", "14", "--max-steps", "28"]) == 0
    epoch = -(-read_yaml(out / "config.yaml")["jets"]["train"] // 16)
    assert epoch < 14  # the case: an epoch is shorter than --val-every
    rows = list(csv.DictReader(open(out / "logs" / "metrics.csv")))
    assert [int(r["step"]) for r in rows if r.get("val_loss")] == [14, 28]


@pytest.mark.slow
def test_the_real_process_trains_with_the_flags_of_the_docs(tmp_path):
    data = tmp_path / "jets.h5"
    write_jets(data, *synthetic_jets(40))
    done = subprocess.run([sys.executable, "-m", "attnlab", "train", "jets", "--data", str(data),
                           "--out", str(tmp_path / "run"), *TINY], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "test_auc" in done.stdout
    assert read_yaml(tmp_path / "run" / "config.yaml")["pair_bias"]  # ParT's bias by default


@pytest.mark.slow
def test_no_pair_bias_trains_the_courses_plain_set_classifier(jets_file, tmp_path):
    out = tmp_path / "course"
    assert main(["train", "jets", "--data", str(jets_file), "--out", str(out), *TINY,
                 "--no-pair-bias", "--max-steps", "2"]) == 0
    cfg = read_yaml(out / "config.yaml")
    assert cfg["pair_bias"] is False and cfg["class_token"] is False
    weights = load_file(out / "model.safetensors")
    assert weights and not any("pair" in name for name in weights)  # no per-pair net


# ---- input errors: exit 2 before anything is written ------------------------------------------

def frame(p4, labels):
    """A DataFrame in the reference layout (pandas writes what write_jets refuses: NaN)."""
    padded = np.zeros((len(p4), 200, 4), np.float32)
    padded[:, :p4.shape[1]] = p4
    import pandas as pd

    df = pd.DataFrame(padded.reshape(len(p4), -1), columns=jet_columns())
    df["is_signal_new"] = labels
    return df


@pytest.fixture(scope="module")
def bad_dir(tmp_path_factory):
    """Jets files with one problem each (and a good one)."""
    tmp_path = tmp_path_factory.mktemp("bad")
    p4, labels = synthetic_jets(30)
    (tmp_path / "text.h5").write_text("not a jets file\n")
    frame(p4, labels).drop(columns=["PX_3", "PY_3"]).to_hdf(tmp_path / "columns.h5", key="table")
    nan = frame(p4, labels)
    nan.loc[17, "PX_3"] = np.nan
    nan.to_hdf(tmp_path / "nan.h5", key="table")
    write_jets(tmp_path / "tops.h5", p4, np.ones_like(labels))
    order = np.argsort(-labels, kind="stable")  # every top jet first: the test range is QCD
    write_jets(tmp_path / "sorted.h5", p4[order], labels[order])
    write_jets(tmp_path / "good.h5", p4, labels)
    frame(p4, labels).to_hdf(tmp_path / "otherkey.h5", key="jets")
    text_labels = frame(p4, labels)
    text_labels["is_signal_new"] = text_labels["is_signal_new"].astype(str)
    text_labels.to_hdf(tmp_path / "strlabel.h5", key="table")
    frame(p4, labels)[[*jet_columns(20), "is_signal_new"]].to_hdf(tmp_path / "c20.h5",
                                                                  key="table")
    return tmp_path


ERRORS = {
    "missing file": (["--data", "{tmp}/nope.h5"], r"--data: file not found: .*nope.h5\n"),
    # once "--data -: not found", as if a file named "-" were meant: --data is never stdin
    "stdin": (["--data", "-"], r"--data: file not found: - \('-' is not standard input here: "
                               r"name the file\)\n"),
    "not HDF5": (["--data", "{tmp}/text.h5"], r"--data .*text.h5: not an HDF5 file"),
    "no key table": (["--data", "{tmp}/otherkey.h5"], r"--data .*otherkey.h5: no key 'table'"),
    "missing columns": (["--data", "{tmp}/columns.h5"],
                        r"--data .*columns.h5: missing columns PX_3, PY_3"),
    "NaN": (["--data", "{tmp}/nan.h5"], r"--data .*nan.h5: column PX_3 row 17 is NaN"),
    "one class": (["--data", "{tmp}/tops.h5"], r"--data .*tops.h5: only one class"),
    "bad test file": (["--data", "{tmp}/good.h5", "--test", "{tmp}/nan.h5"],
                      r"--test .*nan.h5: column PX_3 row 17 is NaN"),
    "one class in a range": (["--data", "{tmp}/sorted.h5"],
                             r"--data .*sorted.h5: its val range \(jets 42\.\.47 of 60\) does "
                             r"not hold jets of both classes; .* give --val FILE"),
    "no --data": ([], r"--data FILE is required"),
    # once a traceback: labels read as text ('1'), not numbers
    "text labels": (["--data", "{tmp}/strlabel.h5"],
                    r"--data .*strlabel.h5: column is_signal_new row 0 is '.' \(expected 0 or 1\)"),
    # every test jet would have been a training jet, without a word
    "test is data": (["--data", "{tmp}/good.h5", "--test", "{tmp}/good.h5"],
                     r"--test .*good.h5 is the --data file: its jets would be trained on and "
                     r"tested on"),
    "fractions": (["--data", "{tmp}/good.h5", "--val-fraction", "0.5", "--test-fraction", "0.5"],
                  r"--val-fraction \(0.5\) \+ --test-fraction \(0.5\) must be < 1"),
    # a file of fewer constituents than --max-constituents: say so and what to do
    "fewer constituents": (["--data", "{tmp}/c20.h5", "--max-constituents", "30"],
                           r"^attnlab: error: --data .*c20.h5: holds 20 constituents per jet "
                           r"\(columns E_0\.\.PZ_19\), fewer than the 30 read "
                           r"\(--max-constituents 30\); train with --max-constituents 20 or "
                           r"fewer, or add zero columns \(padding\) up to PZ_29\n$"),
    "too many constituents": (["--data", "{tmp}/good.h5", "--max-constituents", "300"],
                              r"--max-constituents must be in 1\.\.200, got 300"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_input_errors_exit_2_with_one_line_and_no_run_directory(bad_dir, tmp_path, capsys,
                                                                  case):
    argv, message = ERRORS[case]
    out = tmp_path / "run"
    code = main(["train", "jets", "--out", str(out), *[a.format(tmp=bad_dir) for a in argv]])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("attnlab: error: "), err
    assert re.search(message, err), err
    assert not out.exists()


def test_held_out_files_with_training_jets_are_named_on_stderr(tmp_path, capsys):
    """A copy of --data under another name as --test (or a file cut from the same sample twice)
    once scored the model on the jets it trained on without a word; a warning says how many
    and the first row, as classify and tag do, and is not said again on --resume."""
    from attnlab.tasks.jets.checks import check_files

    p4, labels = synthetic_jets(30, seed=4)
    write_jets(tmp_path / "data.h5", p4, labels)
    write_jets(tmp_path / "copy.h5", p4, labels)  # all 60: 42 of them in --data's train range
    other, other_labels = synthetic_jets(10, seed=5)
    write_jets(tmp_path / "val.h5", np.r_[other, p4[[50, 3]]], np.r_[other_labels,
                                                                     labels[[50, 3]]])
    cfg = {"data": str(tmp_path / "data.h5"), "test": str(tmp_path / "copy.h5"),
           "val": str(tmp_path / "val.h5"), "max_constituents": 30, "val_fraction": 0.1,
           "test_fraction": 0.2, "chunk_size": 16}
    check_files(cfg)  # --data trains on all 60 (both held-out parts have their own file)
    assert capsys.readouterr().err.splitlines() == [
        f"warning: --val {cfg['val']}: 2 of its 22 rows have an input that a training row has "
        f"too (first: row 20), so its scores are partly of inputs the model trained on",
        f"warning: --test {cfg['test']}: 60 of its 60 rows have an input that a training row "
        f"has too (first: row 0), so its scores are partly of inputs the model trained on"]
    check_files({**cfg, "val": None})  # the last 6 of --data validate: 54 train
    assert capsys.readouterr().err.startswith(f"warning: --test {cfg['test']}: 54 of its 60 ")
    check_files({**cfg, "resume": True})
    write_jets(tmp_path / "fresh.h5", other, other_labels)
    check_files({**cfg, "val": None, "test": str(tmp_path / "fresh.h5")})
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_a_file_of_fewer_constituents_trains_and_predicts_with_as_many(bad_dir, tmp_path,
                                                                      capsys):
    """A file with the columns of 20 constituents passed the check with --max-constituents 20,
    then the run stopped after its directory was made: the training split counted the jets
    with 200 constituents' columns (and predict refused the file the same way)."""
    out, c20 = tmp_path / "run", bad_dir / "c20.h5"
    argv = ["train", "jets", "--data", str(c20), "--out", str(out), *TINY,
            "--max-constituents", "20", "--max-steps", "2"]
    assert main(argv) == 0, capsys.readouterr().err
    assert json.loads((out / "metrics.json").read_text())["steps"] == 2
    capsys.readouterr()
    assert main(["predict", str(out), "--input", f"{c20}:0"]) == 0
    assert capsys.readouterr().out.split()[0] in ("QCD", "top")


def test_a_data_file_holding_its_jets_twice_is_named_on_stderr(tmp_path, capsys):
    """A --data file that holds some jets twice (two files joined) once had copies of
    training jets in its own test range, scored without a word; the warning names the range."""
    from attnlab.tasks.jets.checks import check_files

    p4, labels = synthetic_jets(30, seed=6)
    write_jets(tmp_path / "twice.h5", np.r_[p4, p4[:3]], np.r_[labels, labels[:3]])  # 63 jets
    cfg = {"data": str(tmp_path / "twice.h5"), "max_constituents": 30, "val_fraction": 0.1,
           "test_fraction": 0.2, "chunk_size": 16}
    check_files(cfg)  # test range: rows 50..62 (13 jets); rows 60..62 are rows 0..2 again
    assert capsys.readouterr().err == (
        f"warning: --data {cfg['data']} (its test range, rows 50..62): 3 of its 13 rows have "
        f"an input that a training row has too (first: row 60), so its scores are partly of "
        f"inputs the model trained on\n")


@pytest.mark.slow
def test_the_spec_imports_no_torch():
    code = "import sys, attnlab.tasks.jets; assert 'torch' not in sys.modules, 'torch'"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# ---- the training stream ---------------------------------------------------------------------

@pytest.mark.slow
def test_an_epoch_of_batches_holds_every_training_jet_once_and_resumes_midway(jets_file):
    from attnlab.tasks import get_task
    from attnlab.tasks.jets.runtime import JetBatches, Split

    cfg = get_task("jets").config(batch_size=16, seed=3, max_constituents=30, chunk_size=50)
    train = Split(str(jets_file), 0, 168)
    batches = list(JetBatches(train, cfg).epoch_batches(0, 0))
    # chunks of 48 jets (whole batches): 48 + 48 + 48 + 24 -> 3 + 3 + 3 + 2 batches
    assert len(batches) == len(JetBatches(train, cfg)) == 11
    assert [len(y) for _, y in batches].count(16) == 10
    energies = np.sort(np.concatenate([p4[:, 0, 0].numpy() for p4, _ in batches]))
    from attnlab.tasks.jets.data import read_jets

    p4, _ = read_jets(jets_file, 0, 168, max_constituents=30)
    np.testing.assert_array_equal(energies, np.sort(p4[:, 0, 0]))  # each jet once
    later = list(JetBatches(train, cfg).epoch_batches(0, 5))  # what --resume at batch 5 reads
    assert len(later) == len(batches) - 5
    for (a, ya), (b, yb) in zip(later, batches[5:]):
        assert torch.equal(a, b) and torch.equal(ya, yb)
    again = list(JetBatches(train, cfg).epoch_batches(1, 0))  # the next epoch: a new order
    assert not torch.equal(again[0][1], batches[0][1]) or not torch.equal(again[0][0], batches[0][0])


def test_a_batch_is_cut_to_its_longest_jet():
    from attnlab.tasks.jets.runtime import trim

    p4 = np.zeros((3, 200, 4), np.float32)
    p4[0, :7] = p4[1, :12] = p4[2, :3] = 1.0
    assert trim(p4).shape == (3, 12, 4)


@pytest.mark.slow
def test_every_rank_has_as_many_batches_an_epoch(jets_file, monkeypatch):
    """11 batches over 2 ranks gave rank 0 six and rank 1 five: with --accumulate, whose steps
    end with the epoch, the ranks' last steps took different numbers of batches (review)."""
    from attnlab.data import resumable
    from attnlab.tasks import get_task
    from attnlab.tasks.jets import runtime

    cfg = get_task("jets").config(batch_size=16, seed=3, max_constituents=30, chunk_size=50)
    train = runtime.Split(str(jets_file), 0, 168)
    counts = []
    for rank in (0, 1):
        monkeypatch.setattr(runtime, "shard", lambda rank=rank: (rank, 2))
        monkeypatch.setattr(resumable, "shard", lambda rank=rank: (rank, 2))
        batches = runtime.JetBatches(train, cfg)
        counts.append((len(list(batches.epoch_batches(0, 0))), len(batches)))
    assert counts == [(5, 5), (5, 5)]


@pytest.mark.slow
def test_a_zero_row_inside_a_jet_changes_no_answer(jets_run, jets_file, tmp_path, capsys):
    """A zero row is padding wherever it is; a batch was cut to as many columns as its
    longest jet has constituents, so a jet with a zero row before its last constituent lost
    that constituent, and predict and evaluate gave it another score."""
    p4, labels = synthetic_jets(120)
    short = np.flatnonzero((p4[..., 0] > 0).sum(1) < 30)[:8]  # room for one more row
    gapped = np.zeros_like(p4)
    gapped[:, 0], gapped[:, 2:] = p4[:, 0], p4[:, 1:-1]  # a zero row at position 1
    write_jets(tmp_path / "gapped.h5", gapped, labels)
    answers = []
    for path in (jets_file, tmp_path / "gapped.h5"):
        (tmp_path / "inputs.txt").write_text("".join(f"{path}:{row}\n" for row in short))
        assert main(["predict", str(jets_run), "--json", "--input-file",
                     str(tmp_path / "inputs.txt")]) == 0
        answers.append([json.loads(line)["probabilities"]
                        for line in capsys.readouterr().out.splitlines()])
    # the same probabilities within float32 noise: a batch padded otherwise sums in another order
    for plain_jet, gapped_jet in zip(*answers, strict=True):
        assert gapped_jet == pytest.approx(plain_jet, abs=1e-6)
    # plot attention and view: the jet's constituents, not a padding row in place of its last
    from attnlab.tasks import get_task

    task = get_task("jets")
    cfg = task.typed(read_yaml(jets_run / "config.yaml"), jets_run)
    row = int(short[0])
    plain, gap = (task.runtime().attention_maps(task, jets_run, cfg, f"{path}:{row}", most=30)
                  for path in (jets_file, tmp_path / "gapped.h5"))
    assert plain[1] == gap[1]  # "rank:pT" of each constituent
    for a, b in zip(plain[0], gap[0]):
        torch.testing.assert_close(a, b)


class _Sure(torch.nn.Module):
    """A tagger sure of every jet: the top logit leads by 24 to 26, more the more energy the
    jet holds (so it ranks every pair of jets)."""

    def forward(self, p4):  # (B, N, 4)
        lead = 18 + p4[..., 0].sum(-1) / 100  # (B,): the energies are 600-700 GeV
        return torch.stack([torch.zeros_like(lead), lead], -1)  # (B, 2)

    def probabilities(self, p4):  # as JetTagger's
        return self(p4).float().softmax(-1)


def test_a_tagger_sure_of_every_jet_is_scored_by_its_own_ranking(tmp_path):
    """P(top) in float32 was exactly 1.0 for every jet here (a lead above ~17): test_auc 0.5
    and rejections of ties, whatever the tagger's ranking. Now they are scikit-learn's AUC
    and the rejections of the logits' lead, which ranks the jets as P(top) does."""
    from types import SimpleNamespace

    from sklearn.metrics import roc_auc_score

    from attnlab.tasks.jets.metrics import rejection, tagging_metrics
    from attnlab.tasks.jets.runtime import Split, score_split, validation_auc

    p4, truth = synthetic_jets(60, seed=3)
    write_jets(tmp_path / "j.h5", p4, truth)
    model = _Sure()
    leads = model(torch.as_tensor(p4))[:, 1].double().numpy()  # (120,)
    assert len(np.unique(leads)) == 120  # the tagger ranks every pair of jets
    cfg = SimpleNamespace(chunk_size=50, max_constituents=30)
    scores, labels = score_split(model, Split(str(tmp_path / "j.h5"), 0, 120), cfg)
    got = tagging_metrics(scores, labels)
    assert got["test_auc"] == pytest.approx(roc_auc_score(truth, leads), abs=1e-12)
    assert got["test_auc"] != pytest.approx(0.5)
    for eff in (30, 50):
        assert got[f"test_rejection_{eff}"] == pytest.approx(rejection(leads, truth, eff / 100))
    # val_auc, from a validation's logits
    logits = model(torch.as_tensor(p4))  # (120, 2)
    assert validation_auc(logits, torch.as_tensor(truth))["auc"] == pytest.approx(
        roc_auc_score(truth, leads), abs=1e-12)


@pytest.mark.slow  # trains a run
def test_attention_labels_round_a_half_gev_up_as_the_legend(jets_run, tmp_path):
    """The labels of plot attention and view wrote a constituent of 12.5 GeV as "12" (Python
    rounds a half to even) and one of 0.4 GeV as "0", where attention.png's legend writes
    "13" and "0.4", as a reader rounds the number."""
    from attnlab.tasks import get_task

    pt = [(300.0, 400.0), (7.5, 10.0), (0.4, 0.0)]  # pT 500, 12.5 (exact in float32), 0.4
    p4 = np.zeros((2, 30, 4), np.float32)
    for i, (px, py) in enumerate(pt):
        p4[:, i] = [np.hypot(px, py), px, py, 0.0]
    path = tmp_path / "one.h5"
    write_jets(path, p4, np.array([1, 0]))
    task = get_task("jets")
    cfg = task.typed(read_yaml(jets_run / "config.yaml"), jets_run)
    _, keys, queries = task.runtime().attention_maps(task, jets_run, cfg, f"{path}:0")
    assert keys == queries == ["0:500", "1:13", "2:0.4"]


@pytest.mark.slow
def test_the_notebooks_reading_of_the_rejections_is_the_runs(jets_run, jets_file):
    """Notebook 05 reads a run's rejections itself: the run's test jets as the file holds them
    (padded to --max-constituents), in batches of 500, P(top) in float64 (``top_probability``)
    and ``rejection`` (tests/jets/test_notebook_readings.py checks that its code does). That
    reading gives metrics.json's numbers, within one QCD test jet of ε_B (the notebook's own
    check: its batches are padded otherwise than the run's, which may reorder a near tie)."""
    import attnlab
    from attnlab.tasks.jets.data import read_jets
    from attnlab.tasks.jets.metrics import rejection
    from attnlab.tasks.jets.runtime import top_probability

    p4, labels = read_jets(str(jets_file), 192, 240, max_constituents=30)  # the run's test jets
    model = attnlab.load(jets_run).eval()
    with torch.no_grad():
        scores = torch.cat([top_probability(model(batch))
                            for batch in torch.from_numpy(p4).split(500)]).numpy()
    metrics = json.loads((jets_run / "metrics.json").read_text())
    qcd = np.count_nonzero(labels == 0)
    for efficiency, key in ((0.3, "test_rejection_30"), (0.5, "test_rejection_50")):
        assert abs(1 / rejection(scores, labels, efficiency) - 1 / metrics[key]) <= 1 / qcd, key
