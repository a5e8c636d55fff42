"""Set classification on the user's feature file (`train classify --set-column`): a tiny
end-to-end run, order invariance, padding, predict / evaluate, and data errors."""
import csv
import json
import random
import re
import subprocess
import sys

import pytest
import torch
from torch.testing import assert_close

import attnlab
from attnlab.cli import main
from attnlab.data.feature_sets import parse_set, read_feature_sets
from attnlab.errors import UsageError
from attnlab.runs import read_yaml
from attnlab.tasks.classify.runtime import make_batches


def write_sets(path, n=160, seed=0):
    """Sets of 3-8 points (x, y) in scrambled row order; label: is the set's mean x positive?
    y is noise on another scale, and a column 'note' is text (so it must be left out)."""
    rng = random.Random(seed)
    rows = []
    for s in range(n):
        shift = rng.choice((-1.5, 1.5))
        rows += [[f"s{s}", "right" if shift > 0 else "left", f"{rng.gauss(shift, 1):.4f}",
                  f"{rng.gauss(0, 50):.3f}", "n/a"] for _ in range(rng.randint(3, 8))]
    rng.shuffle(rows)  # a set's rows need not be next to each other
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["cloud", "side", "x", "y", "note"])
        w.writerows(rows)
    return path


SET_ARGS = ["--set-column", "cloud", "--label-column", "side", "--feature-columns", "x,y"]


@pytest.fixture(scope="module")
def sets_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sets")
    data = write_sets(tmp / "clouds.csv")
    out = tmp / "run"
    code = main(["train", "classify", "--data", str(data), "--out", str(out), *SET_ARGS,
                 "--max-steps", "60", "--batch-size", "16", "--model-dim", "16", "--num-heads", "2",
                 "--num-layers", "1", "--dim-feedforward", "32", "--lr", "3e-3", "--warmup", "5",
                 "--dropout", "0", "--seed", "1"])
    assert code == 0
    return out


@pytest.mark.slow
def test_tiny_set_run_learns_and_writes_the_run_directory(sets_run):
    metrics = json.loads((sets_run / "metrics.json").read_text())
    assert set(metrics) >= {"test_accuracy", "test_macro_f1", "steps", "train_seconds", "parameters"}
    assert metrics["test_accuracy"] >= 0.8  # chance: 1/2
    assert not (sets_run / "tokenizer.json").exists() and (sets_run / "model.safetensors").is_file()
    cfg = read_yaml(sets_run / "config.yaml")
    assert cfg["labels"] == ["left", "right"] and cfg["feature_names"] == ["x", "y"]
    assert cfg["positional"] == "none" and cfg["pooling"] == "mean"
    assert not {"text_column", "tokenizer", "vocab_size"} & set(cfg)  # no text settings
    assert cfg["feature_std"][1] > 10 * cfg["feature_std"][0]  # y is on another scale


@pytest.mark.slow
def test_predictions_do_not_depend_on_the_order_of_a_sets_rows(sets_run, capsys):
    points = ["1.2,30", "-0.4,-80", "2.0,5", "0.7,12"]
    labels = []
    for order in (points, points[::-1], points[1:] + points[:1]):  # 2nd and 3rd start with "-"
        assert main(["predict", str(sets_run), "--input", ";".join(order)]) == 0
        labels.append(capsys.readouterr().out.strip().splitlines()[-1])
    assert labels == ["right"] * 3
    model = attnlab.load(sets_run)  # the model alone: a set run has no tokenizer
    x = torch.randn(1, 6, 2)
    assert_close(model(x[:, torch.randperm(6)]), model(x), atol=1e-5, rtol=1e-4)


@pytest.mark.slow
def test_a_padded_batch_of_sets_gives_each_sets_logits_alone(sets_run):
    model = attnlab.load(sets_run)
    sets = [torch.randn(n, 2) for n in (5, 2, 7)]
    x, mask, _ = make_batches(sets, [0, 0, 0], 3)[0]  # (3, 7, 2), rows ordered by size
    assert x.shape == (3, 7, 2) and mask.sum(1).tolist() == [2, 5, 7]
    alone = torch.cat([model(s[None]) for s in sorted(sets, key=len)])
    assert_close(model(x, mask), alone, atol=1e-5, rtol=1e-4)


@pytest.mark.slow
def test_evaluate_reproduces_the_metrics_and_neither_command_imports_lightning(sets_run, tmp_path):
    run, other = str(sets_run), str(write_sets(tmp_path / "other.csv", n=20, seed=5))
    script = f"""
import sys
from attnlab.cli import main
for argv in (["evaluate", {run!r}], ["evaluate", {run!r}, "--data", {other!r}],
             ["predict", {run!r}, "--input=-2,1;-1,3"]):
    assert main(argv) == 0, argv
print(sorted(m for m in sys.modules if m.split(".")[0] in ("lightning", "pytorch_lightning")))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    *_, label, loaded = proc.stdout.strip().splitlines()
    assert (label, loaded) == ("left", "[]")
    first, _ = json.JSONDecoder().raw_decode(proc.stdout)  # evaluate on the test split
    metrics = json.loads((sets_run / "metrics.json").read_text())
    for key in ("test_accuracy", "test_macro_f1"):
        assert first[key] == pytest.approx(metrics[key], abs=1e-6)


def test_rows_group_into_sets_in_file_order_with_every_other_column_as_features(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"g": "b", "y": "p", "u": 1, "v": 2}\n{"g": "a", "y": "q", "u": 3, "v": 4}\n'
                    '{"g": "b", "y": "p", "u": 5, "v": 6.5}\n')
    sets = read_feature_sets(path, set_column="g", label_column="y")
    assert sets.features == ["u", "v"] and sets.ids == ["b", "a"] and sets.lines == [1, 2]
    assert sets[0][0].tolist() == [[1, 2], [5, 6.5]] and [lab for _, lab in sets] == ["p", "q"]


GOOD = "cloud,side,x,y\n" + "".join(f"s{i // 3},{'ab'[i // 3 % 2]},{i},1\n" for i in range(60))
ERRORS = {
    "missing set column": (GOOD, ["--set-column", "group"], r"d.csv: no column 'group'"),
    "missing label column": (GOOD, ["--label-column", "kind"], r"d.csv: no column 'kind'"),
    "missing feature column": (GOOD, ["--feature-columns", "x,z"], r"d.csv: no column 'z'"),
    "non-numeric feature": (GOOD + "s99,a,1.5,abc\n", [],
                            r"d.csv line 62: column 'y': value 'abc' is not a finite number"),
    "a set with two labels": (GOOD + "s0,b,1,1\n", [],
                              r"d.csv line 62: set 's0' has label 'b' here but 'a' on line 2"),
    "empty file": ("", [], r"d.csv: the file is empty"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_data_errors_exit_2_with_one_line_and_no_run_directory(tmp_path, capsys, case):
    content, extra, message = ERRORS[case]
    (tmp_path / "d.csv").write_text(content)
    args = dict(zip(SET_ARGS[::2], SET_ARGS[1::2])) | dict(zip(extra[::2], extra[1::2]))
    out = tmp_path / "run"
    code = main(["train", "classify", "--data", str(tmp_path / "d.csv"), "--out", str(out),
                 *[a for kv in args.items() for a in kv]])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("attnlab: error: --data ") and "Traceback" not in err
    assert re.search(message, err), err
    assert not out.exists()


@pytest.mark.slow
def test_predict_refuses_a_wrong_number_of_features(sets_run, capsys):
    assert main(["predict", str(sets_run), "--input", "1,2;3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "element 2 ('3') has 1 values, expected 2 (x, y)" in err


def test_set_batches_resume_mid_epoch_where_they_stopped():
    from attnlab.tasks.classify.runtime import _Batches

    sets = [torch.randn(n % 5 + 1, 2) for n in range(20)]
    targets = [n % 2 for n in range(20)]
    full = list(_Batches(sets, targets, 4, seed=7))
    first = _Batches(sets, targets, 4, seed=7)
    it = iter(first)
    next(it), next(it)
    again = _Batches(sets, targets, 4, seed=7)
    again.load_state_dict(first.state_dict())
    rest = list(again)
    assert len(rest) == len(full) - 2
    for (x, m, y), (x2, m2, y2) in zip(rest, full[2:]):
        assert torch.equal(x, x2) and torch.equal(m, m2) and torch.equal(y, y2)


@pytest.mark.slow
def test_predict_standardises_with_the_training_mean_and_std(sets_run, capsys):
    cfg = read_yaml(sets_run / "config.yaml")
    model = attnlab.load(sets_run)
    mean, std = torch.tensor(cfg["feature_mean"]), torch.tensor(cfg["feature_std"])
    g = torch.Generator().manual_seed(0)
    for _ in range(6):  # x near the boundary, y far out: raw features would mislead the model
        x = torch.randn(4, 2, generator=g) * torch.tensor([0.3, 1.0]) + torch.tensor([0.0, 60.0])
        assert main(["predict", str(sets_run), "--input=" + ";".join(f"{a:.4f},{b:.4f}" for a, b in x.tolist())]) == 0
        label = capsys.readouterr().out.strip().splitlines()[-1]
        x = torch.tensor([[float(f"{v:.4f}") for v in row] for row in x.tolist()])
        assert label == cfg["labels"][int(model(((x - mean) / std)[None]).argmax())]


@pytest.mark.parametrize("flags, named", [
    (["--pooling", "cls"], "--pooling"),
    (["--positional", "learned"], "--positional"),
    (["--pooling", "cls", "--positional", "sinusoidal"], "--pooling, --positional"),
])
def test_set_column_refuses_pooling_and_positions_it_would_not_use(tmp_path, capsys, flags,
                                                                  named):
    # a set is pooled by its mean and has no positions: a given --pooling cls or --positional
    # would otherwise be dropped without a word; refused before a run directory exists
    out = tmp_path / "run"
    code = main(["train", "classify", "--data", str(write_sets(tmp_path / "c.csv")),
                 "--out", str(out), *SET_ARGS, *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists()
    assert err == (f"attnlab: error: {named}: not with --set-column: a set has no order and no "
                   f"[CLS] position, so it is pooled by its mean and has no positional encoding")


@pytest.mark.parametrize("flags, named, why", [
    (["--tokenizer", "bpe", "--vocab-size", "300"], "--tokenizer, --vocab-size",
     "not with --set-column: a set of feature rows has no text to tokenise"),
    (["--text-column", "nosuch"], "--text-column", "not with --set-column"),
])
def test_set_column_refuses_the_settings_of_texts(tmp_path, capsys, flags, named, why):
    # once taken and dropped without a word (--text-column even naming no column of the file)
    out = tmp_path / "run"
    code = main(["train", "classify", "--data", str(write_sets(tmp_path / "c.csv")),
                 "--out", str(out), *SET_ARGS, *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists()
    assert err.startswith(f"attnlab: error: {named}: {why}") and len(err.splitlines()) == 1


def test_feature_columns_without_set_column_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", "classify", "--data", str(write_sets(tmp_path / "c.csv")),
                 "--out", str(out), "--feature-columns", "x,y"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists()
    assert err.startswith("attnlab: error: --feature-columns: only with --set-column")


def test_set_column_accepts_what_it_uses_and_a_config_file_is_checked_too(tmp_path, capsys):
    data = write_sets(tmp_path / "c.csv")
    assert main(["train", "classify", "--data", str(data), "--out", str(tmp_path / "ok"),
                 *SET_ARGS, "--pooling", "mean", "--positional", "none", "--max-steps", "2",
                 "--model-dim", "16", "--num-heads", "2", "--dim-feedforward", "32"]) == 0
    config = tmp_path / "c.yaml"
    config.write_text("pooling: cls\n")
    capsys.readouterr()
    assert main(["train", "classify", "--data", str(data), "--out", str(tmp_path / "no"),
                 *SET_ARGS, "--config", str(config)]) == 2
    assert capsys.readouterr().err.startswith("attnlab: error: --pooling: not with --set-column")


def test_a_config_files_list_of_feature_columns_is_the_flags_names(tmp_path, capsys):
    """`feature_columns: [x, y]` in a --config file was refused as "must be text", though the
    docs say a file may list them; it trains as --feature-columns x,y, recorded so."""
    data = write_sets(tmp_path / "c.csv", n=24)
    config = tmp_path / "c.yaml"
    config.write_text("set_column: cloud\nlabel_column: side\nfeature_columns: [y, x]\n")
    out = tmp_path / "run"
    assert main(["train", "classify", "--data", str(data), "--out", str(out), "--config",
                 str(config), "--max-steps", "1", "--model-dim", "16", "--num-heads", "2",
                 "--dim-feedforward", "32"]) == 0
    assert read_yaml(out / "config.yaml")["feature_columns"] == "y,x"
    config.write_text("set_column: cloud\nlabel_column: side\nfeature_columns: [x, 'a,b']\n")
    capsys.readouterr()
    assert main(["train", "classify", "--data", str(data), "--out", str(tmp_path / "no"),
                 "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "feature_columns must be a list of names" in err
    assert "'a,b'" in err and not (tmp_path / "no").exists()


@pytest.mark.slow
def test_evaluate_names_the_set_column_of_another_file(sets_run, tmp_path, capsys):
    own = write_sets(tmp_path / "own.csv", n=12, seed=5)
    other = tmp_path / "other.csv"
    other.write_text(own.read_text().replace("cloud,", "group,", 1))
    assert main(["evaluate", str(sets_run), "--data", str(own)]) == 0
    expected = json.loads(capsys.readouterr().out)
    assert main(["evaluate", str(sets_run), "--data", str(other), "--set-column", "group"]) == 0
    assert json.loads(capsys.readouterr().out) == expected
    # a set run reads no text column: naming one is refused, not ignored
    assert main(["evaluate", str(sets_run), "--data", str(other), "--text-column", "x"]) == 2
    assert "--text-column: not with --set-column" in capsys.readouterr().err


@pytest.mark.parametrize("text, message", [
    # an element left out between two ';' was dropped, and the set answered without it
    ("1.5,7;;-2,7", "--input: element 2 is empty (nothing between two ';'); give each element "
                    "its 2 values (x, y)"),
    (";1,2", "--input: element 1 is empty"),
    (" ; ", "--input: no elements"),
])
def test_an_empty_element_of_a_set_is_refused_not_dropped(text, message):
    with pytest.raises(UsageError) as e:
        parse_set(text, ["x", "y"])
    assert str(e.value).startswith(message)


def test_one_separator_after_the_last_element_is_allowed():
    assert parse_set("1.5,7;-2,7;", ["x", "y"]).tolist() == [[1.5, 7.0], [-2.0, 7.0]]


def test_a_jsonl_decimal_set_label_is_the_class_as_written_and_an_old_run_reads_it_as_before(
        tmp_path):
    """As for texts: a set labelled 1e2 in a JSON Lines file was the class '100.0'."""
    from attnlab.tasks.classify import TASKS
    from attnlab.tasks.classify.data import load_splits, read_and_pin

    task = TASKS["classify"]
    data = tmp_path / "sets.jsonl"
    data.write_text("".join(f'{{"set": "s{i // 2}", "label": {["1e2", "2.50"][i // 2 % 2]}, '
                            f'"x": {i}}}\n' for i in range(80)))
    cfg = {**task.defaults, "task": "classify", "data": str(data), "set_column": "set"}
    splits = read_and_pin(cfg, task.config_class().from_values, said=[])
    assert {lab for _, lab in splits["train"]} == {"1e2", "2.50"}
    old = {k: v for k, v in cfg.items() if k != "json_decimals_as_written"}
    before = load_splits(task.config_class().from_values(old))
    assert {lab for _, lab in before["train"]} == {"100.0", "2.5"}
