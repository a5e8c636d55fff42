"""``attnlab train classify --multi-label`` and ``--regression`` (#41): several labels per row
(a sigmoid each) and a number per row (mean squared error), end to end. The scores in
metrics.json are checked against scikit-learn and SciPy on the predictions `attnlab predict`
makes for the same test rows."""
import json
import random

import pytest
import torch

from attnlab.cli import main
from attnlab.runs import read_yaml
from attnlab.tasks.classify import TASKS
from attnlab.tasks.classify.data import classes_of, load_splits
from attnlab.tasks.classify.labels import parse_label
from attnlab.tasks.classify.metrics import f1_scores, multi_label_counts, regression_scores

TASK = TASKS["classify"]
TINY = ["--max-steps", "40", "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
        "--dim-feedforward", "32", "--lr", "3e-3", "--warmup", "5", "--pooling", "mean",
        "--val-every", "20"]
TOPICS = {"sport": ["goal", "match", "team"], "music": ["song", "band", "tune"],
          "food": ["pizza", "bread", "soup"]}


def write_multi(path, n=120, seed=0, sep="|"):
    """Texts naming one or two topics; the label column lists them (a JSON list in .jsonl)."""
    rng = random.Random(seed)
    lines = [] if path.suffix == ".jsonl" else ["text,label"]
    for _ in range(n):
        topics = rng.sample(sorted(TOPICS), rng.choice([1, 2]))
        text = " ".join(rng.choice(TOPICS[t]) for t in topics) + " " + rng.choice(["today", "now"])
        lines.append(json.dumps({"text": text, "label": topics}) if path.suffix == ".jsonl"
                     else f'{text},"{sep.join(topics)}"')
    path.write_text("\n".join(lines) + "\n")
    return path


def write_numbers(path, n=120, seed=0):
    """Texts whose count of 'good' sets the number (in the thousands: standardised in training)."""
    rng = random.Random(seed)
    rows = ["text,label"]
    for _ in range(n):
        k = rng.randint(0, 5)
        rows.append(f"{' '.join(['good'] * k + ['film'])},{1000 + 250 * k + rng.random():.4f}")
    path.write_text("\n".join(rows) + "\n")
    return path


def _predictions(run, texts):
    cfg = TASK.typed(read_yaml(run / "config.yaml"), run)
    return cfg, TASK.runtime().predict_many(TASK, run, cfg, texts, ["--input"] * len(texts))


def _train(tmp, flag, data):
    out = tmp / "run"
    assert main(["train", "classify", flag, "--data", str(data), "--out", str(out), *TINY]) == 0
    return out


@pytest.fixture(scope="module")
def multi_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("multi")
    return _train(tmp, "--multi-label", write_multi(tmp / "topics.csv"))


@pytest.fixture(scope="module")
def regression_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("regression")
    return _train(tmp, "--regression", write_numbers(tmp / "scores.csv"))


def test_a_label_set_is_split_stripped_and_sorted_and_a_jsonl_list_is_one():
    assert parse_label("music | sport", "multi", "|", "here") == ("music", "sport")
    assert parse_label("a,b,a", "multi", ",", "here") == ("a", "b")
    assert parse_label(["x", "3", " x"], "multi", "|", "here") == ("3", "x")
    # only a list read as one (read_table's lists) is a list: text that looks like JSON is text
    assert parse_label('["x", "y"]', "multi", ",", "here") == ('"y"]', '["x"')
    assert parse_label(" 2.5e1 ", "regression", "|", "here") == 25.0


def test_the_help_says_label_sets_and_numbers_are_held_out_from_all_rows(capsys):
    # (it said "per class" alone: a row of two labels, or a number, has no one class)
    with pytest.raises(SystemExit) as stop:
        main(["train", "classify", "--help"])
    assert stop.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for flag, share in (("--test FILE", "--test-fraction"), ("--val FILE", "--val-fraction")):
        assert (f"{flag} {'test' if flag[2] == 't' else 'validation'} data (default: {share} of "
                f"--data, per class; from all rows with --multi-label or --regression)") in text


@pytest.mark.slow
def test_multi_label_scores_agree_with_sklearn_on_the_runs_predictions(multi_run):
    from sklearn.metrics import accuracy_score, f1_score
    from sklearn.preprocessing import MultiLabelBinarizer

    cfg = TASK.typed(read_yaml(multi_run / "config.yaml"), multi_run)
    assert cfg.labels == ["food", "music", "sport"]
    test = load_splits(cfg)["test"]
    _, results = _predictions(multi_run, [t for t, _ in test])
    binary = MultiLabelBinarizer(classes=cfg.labels)
    truth = binary.fit_transform([y for _, y in test])
    preds = binary.transform([r["prediction"] for r in results])
    metrics = json.loads((multi_run / "metrics.json").read_text())
    seen = [i for i in range(3) if truth[:, i].any() or preds[:, i].any()]
    assert metrics["test_micro_f1"] == pytest.approx(f1_score(truth, preds, average="micro"),
                                                     abs=1e-5)
    assert metrics["test_macro_f1"] == pytest.approx(
        f1_score(truth, preds, average="macro", labels=seen), abs=1e-5)
    assert metrics["test_accuracy"] == pytest.approx(accuracy_score(truth, preds), abs=1e-5)
    assert set(metrics["test_per_class"]) == set(cfg.labels)
    assert {"val_f1", "val_micro_f1"} <= set(metrics)
    # each prediction is the labels whose probability is above the threshold
    for r in results:
        assert r["prediction"] == [c for c, p in r["probabilities"].items() if p > 0.5]


@pytest.mark.slow
def test_predict_prints_the_labels_over_the_threshold_joined_by_the_separator(multi_run, capsys):
    assert main(["predict", str(multi_run), "--input", "goal song now", "--json"]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(["predict", str(multi_run), "--input", "goal song now"]) == 0
    line = capsys.readouterr().out.strip("\n").splitlines()[-1] if record["prediction"] else ""
    assert line == "|".join(record["prediction"])


def test_a_jsonl_list_and_a_comma_separator_give_the_csvs_label_sets(tmp_path):
    listed = load_splits(TASK.config(data=str(write_multi(tmp_path / "t.jsonl")),
                                     multi_label=True, seed=3))
    joined = load_splits(TASK.config(data=str(write_multi(tmp_path / "t.csv", sep=",")),
                                     multi_label=True, label_sep=",", seed=3))
    assert listed["train"] == joined["train"] and listed["test"] == joined["test"]
    assert {lab for _, lab in listed["train"]} >= {("food",), ("music", "sport")}


def test_multi_label_f1_of_the_counts_is_sklearns():
    from sklearn.metrics import f1_score

    g = torch.Generator().manual_seed(0)
    truth = torch.rand(50, 4, generator=g) < 0.4
    pred = torch.where(torch.rand(50, 4, generator=g) < 0.7, truth, ~truth)
    pred[:, 3] = False  # a class never predicted counts with F1 0 where it has examples
    ours = f1_scores(*multi_label_counts(pred, truth))
    assert ours["micro_f1"] == pytest.approx(f1_score(truth, pred, average="micro"))
    assert ours["macro_f1"] == pytest.approx(f1_score(truth, pred, average="macro",
                                                      zero_division=0))


@pytest.mark.slow
def test_regression_scores_agree_with_sklearn_and_scipy_and_predict_prints_the_number(
        regression_run, capsys):
    from scipy.stats import spearmanr
    from sklearn.metrics import mean_squared_error, r2_score

    cfg = TASK.typed(read_yaml(regression_run / "config.yaml"), regression_run)
    splits = load_splits(cfg)
    train = torch.tensor([y for _, y in splits["train"]], dtype=torch.float64)
    assert cfg.target_mean == pytest.approx(float(train.mean()))
    assert cfg.target_std == pytest.approx(float(train.std(unbiased=False)))
    test = splits["test"]
    _, results = _predictions(regression_run, [t for t, _ in test])
    preds, truth = [r["prediction"] for r in results], [y for _, y in test]
    metrics = json.loads((regression_run / "metrics.json").read_text())
    assert metrics["test_mse"] == pytest.approx(mean_squared_error(truth, preds), rel=1e-4)
    assert metrics["test_r2"] == pytest.approx(r2_score(truth, preds), abs=1e-4)
    assert metrics["test_spearman"] == pytest.approx(spearmanr(truth, preds).statistic, abs=1e-4)
    assert metrics["test_r2"] > 0.5  # the count of "good" sets the number
    assert {"val_mse", "val_r2", "val_spearman"} <= set(metrics)
    assert main(["predict", str(regression_run), "--input", "good good film"]) == 0
    assert float(capsys.readouterr().out.strip().splitlines()[-1]) == pytest.approx(
        _predictions(regression_run, ["good good film"])[1][0]["prediction"], rel=1e-5)
    assert main(["evaluate", str(regression_run), "--data", cfg.data]) == 0  # another file
    assert set(json.loads(capsys.readouterr().out)) == {"test_mse", "test_r2", "test_spearman"}


def test_regression_scores_are_sklearns_and_scipys_with_ties():
    from scipy.stats import spearmanr
    from sklearn.metrics import mean_squared_error, r2_score

    true = torch.tensor([1.0, 2.0, 2.0, 3.0, 5.0, 5.0, 5.0, 8.0])
    pred = torch.tensor([1.5, 1.5, 2.5, 2.5, 4.0, 6.0, 6.0, 9.0])
    ours = regression_scores(pred, true)
    assert ours["mse"] == pytest.approx(mean_squared_error(true, pred))
    assert ours["r2"] == pytest.approx(r2_score(true, pred))
    assert ours["spearman"] == pytest.approx(spearmanr(true, pred).statistic)


def test_r2_of_constant_targets_is_sklearns_not_minus_infinity():
    from sklearn.metrics import r2_score

    true = torch.full((4,), 3.0)
    for pred in (torch.tensor([2.0, 3.0, 4.0, 3.5]), true.clone()):
        assert regression_scores(pred, true)["r2"] == r2_score(true, pred)


@pytest.mark.slow
def test_init_from_a_regression_run_keeps_its_head_for_numbers_and_starts_one_for_classes(
        regression_run, tmp_path, capsys):
    from safetensors.torch import load_file

    # one step of a vanishing learning rate: the weights are the ones the run started from
    still = ["--max-steps", "1", "--lr", "1e-12", "--warmup", "0", "--weight-decay", "0"]
    numbers = write_numbers(tmp_path / "more.csv", seed=1)
    again = tmp_path / "again"
    assert main(["train", "classify", "--regression", "--init", str(regression_run), "--data",
                 str(numbers), "--out", str(again), *still]) == 0
    before = load_file(regression_run / "model.safetensors")
    after = load_file(again / "model.safetensors")
    assert before.keys() == after.keys()
    for name in before:  # the head too: it answers the same question, a number
        torch.testing.assert_close(after[name], before[name], atol=1e-6, rtol=0)
    classes = tmp_path / "classes.csv"
    classes.write_text("text,label\n" + "".join(
        f"{' '.join(['good'] * (i % 5) + ['film'])},{'high' if i % 5 > 2 else 'low'}\n"
        for i in range(60)))
    out = tmp_path / "classes"
    assert main(["train", "classify", "--init", str(regression_run), "--data", str(classes),
                 "--out", str(out), *still]) == 0
    capsys.readouterr()
    assert main(["predict", str(out), "--input", "good film"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] in {"high", "low"}


def test_a_class_whose_every_row_is_held_out_is_named_when_the_run_starts(tmp_path, capsys):
    from attnlab.tasks.classify.data import read_and_pin

    data = write_multi(tmp_path / "topics.jsonl", n=60)
    lines = data.read_text().splitlines()
    lines[10] = json.dumps({**json.loads(lines[10]), "label": ["rare"]})
    data.write_text("\n".join(lines) + "\n")
    for seed in range(50):  # a seed that draws the one row of 'rare' for testing
        cfg = {**TASK.defaults, "task": "classify", "data": str(data), "multi_label": True,
               "seed": seed}
        splits = read_and_pin(cfg, TASK.config_class().from_values)
        err = capsys.readouterr().err
        if not any("rare" in lab for _, lab in splits["train"]):
            break
        assert "rare" not in err  # trained on: nothing to say
    assert not any("rare" in lab for _, lab in splits["train"])
    assert "rare" in classes_of(splits)  # the model has an output for it ...
    assert ("warning: the training split has no row of 1 of the 4 classes ('rare')" in err)


@pytest.mark.slow
def test_predict_gives_a_number_to_the_precision_of_the_targets_spread(tmp_path, capsys):
    from sklearn.metrics import mean_squared_error

    # years given to a day's fraction: 2024.501 ... 2024.50225, six digits apart from 2024.5
    header, *rows = write_numbers(tmp_path / "numbers.csv").read_text().splitlines()
    data = tmp_path / "years.csv"
    data.write_text("\n".join([header] + [f"{text},{2024.5 + (float(y) - 1000) / 1e6:.9f}"
                                          for text, y in (r.rsplit(",", 1) for r in rows)]) + "\n")
    run = _train(tmp_path, "--regression", data)
    test = load_splits(TASK.typed(read_yaml(run / "config.yaml"), run))["test"]
    _, results = _predictions(run, [t for t, _ in test])
    preds, truth = [r["prediction"] for r in results], [y for _, y in test]
    assert len(set(preds)) == len({t for t, _ in test}) > 1  # a number per text, not 2024.5
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["test_mse"] == pytest.approx(mean_squared_error(truth, preds), rel=1e-3)
    assert main(["predict", str(run), "--input", test[0][0]]) == 0
    assert float(capsys.readouterr().out.strip().splitlines()[-1]) == preds[0]
