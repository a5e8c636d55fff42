"""Text classification on the user's file: splits, batches, metrics, and a tiny end-to-end run."""
import csv
import json
import random
import subprocess
import sys

import pytest
import torch
from torch.testing import assert_close

from attnlab.cli import main
from attnlab.runs import read_yaml
from attnlab.tasks.classify import TASKS
from attnlab.tasks.classify.data import load_splits
from attnlab.tasks.classify.runtime import classification_metrics, make_batches, per_class_table

TASK = TASKS["classify"]

WORDS = {"pos": "good great lovely superb".split(), "neg": "bad awful poor dull".split(),
         "meh": "okay average plain fair".split()}
FILLER = "the movie was a and plot acting film".split()


def write_csv(path, n=240, seed=0, labels=tuple(WORDS)):
    """Texts whose one sentiment word gives the label away, among filler words."""
    rng = random.Random(seed)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "review", "sentiment"])
        for i in range(n):
            label = labels[i % len(labels)]
            words = [rng.choice(FILLER) for _ in range(rng.randint(2, 8))] + [rng.choice(WORDS[label])]
            rng.shuffle(words)
            w.writerow([i, " ".join(words), label])
    return path


def cfg_for(path, **kw):
    return TASK.config(**{"data": str(path), "test": None, "val": None, "text_column": "review",
            "label_column": "sentiment", "seed": 3, "val_fraction": 0.1, "test_fraction": 0.2, **kw})


def test_splits_are_disjoint_stratified_and_reproducible(tmp_path):
    path = write_csv(tmp_path / "d.csv", n=300)
    splits = load_splits(cfg_for(path))
    assert [len(splits[k]) for k in ("train", "val", "test")] == [210, 30, 60]
    for k in ("val", "test"):  # each class is held out in proportion
        counts = {lab: sum(1 for _, y in splits[k] if y == lab) for lab in WORDS}
        assert len(set(counts.values())) == 1
    ids = lambda k: {t for t, _ in splits[k]}  # noqa: E731
    assert sum(len(splits[k]) for k in splits) == 300
    assert load_splits(cfg_for(path)) == splits
    assert load_splits(cfg_for(path, seed=4))["test"] != splits["test"]
    assert ids("test") and ids("train")


def test_batches_are_padded_with_zero_and_keep_every_example():
    ids = [[5] * n for n in (3, 1, 7, 2, 5)]
    batches = make_batches(ids, [0, 1, 2, 0, 1], 2, shuffle=True, seed=1)
    seen = []
    for x, y in batches:
        lengths = (x != 0).sum(1)
        assert x.shape[1] == int(lengths.max())  # padded to the longest in its batch
        seen += list(zip(lengths.tolist(), y.tolist()))
    assert sorted(seen) == sorted(zip((3, 1, 7, 2, 5), (0, 1, 2, 0, 1)))


def test_metrics_agree_with_scikit_learn():
    from sklearn.metrics import accuracy_score, f1_score

    g = torch.Generator().manual_seed(0)
    targets = torch.randint(0, 4, (200,), generator=g)
    preds = torch.where(torch.rand(200, generator=g) < 0.7, targets, torch.randint(0, 4, (200,), generator=g))
    m = classification_metrics(preds, targets, 4)
    assert m["test_accuracy"] == pytest.approx(accuracy_score(targets, preds), abs=1e-6)
    assert m["test_macro_f1"] == pytest.approx(f1_score(targets, preds, average="macro"), abs=1e-6)
    table = per_class_table(preds, targets, ["a", "b", "c", "d"]).splitlines()
    f1 = f1_score(targets, preds, average=None)
    assert table[0].split() == ["class", "precision", "recall", "f1", "support"]
    for row, value, n in zip(table[1:], f1, torch.bincount(targets, minlength=4)):
        assert float(row.split()[3]) == pytest.approx(value, abs=1e-4)
        assert int(row.split()[4]) == int(n)


@pytest.fixture(scope="module")
def classify_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("classify")
    data = write_csv(tmp / "reviews.csv", n=240)
    out = tmp / "run"
    code = main(["train", "classify", "--data", str(data), "--out", str(out),
                 "--text-column", "review", "--label-column", "sentiment", "--tokenizer", "word",
                 "--max-steps", "80", "--model-dim", "32", "--num-heads", "2", "--num-layers", "1",
                 "--dim-feedforward", "64", "--lr", "3e-3", "--warmup", "10", "--pooling", "mean"])
    assert code == 0
    return out


@pytest.mark.slow
def test_tiny_classify_run_learns_and_writes_the_run_directory(classify_run):
    metrics = json.loads((classify_run / "metrics.json").read_text())
    assert set(metrics) >= {"test_accuracy", "test_macro_f1", "steps", "train_seconds", "parameters"}
    assert metrics["test_accuracy"] > 0.6  # chance: 1/3; the sentiment word decides
    assert (classify_run / "tokenizer.json").is_file() and (classify_run / "model.safetensors").is_file()
    cfg = read_yaml(classify_run / "config.yaml")
    assert cfg["labels"] == ["meh", "neg", "pos"]


@pytest.mark.slow
def test_predict_prints_a_label_and_evaluate_reproduces_the_metrics(classify_run, capsys):
    cfg = read_yaml(classify_run / "config.yaml")
    assert main(["predict", str(classify_run), "--input", "the film was superb"]) == 0
    label = capsys.readouterr().out.strip().splitlines()[-1]
    model, tokenizer = TASK.runtime().load(TASK, classify_run, TASK.typed(cfg, classify_run))
    logits = model(torch.tensor([tokenizer.encode("the film was superb")]))
    assert label == cfg["labels"][int(logits.argmax())]
    assert main(["evaluate", str(classify_run)]) == 0
    again = json.loads(capsys.readouterr().out)
    metrics = json.loads((classify_run / "metrics.json").read_text())
    for key in ("test_accuracy", "test_macro_f1"):
        assert again[key] == pytest.approx(metrics[key], abs=1e-6)


@pytest.mark.slow
def test_a_padded_test_batch_predicts_what_each_text_does_alone(classify_run):
    cfg = TASK.typed(read_yaml(classify_run / "config.yaml"), classify_run)
    model, tokenizer = TASK.runtime().load(TASK, classify_run, cfg)
    ids = [tokenizer.encode(t) for t in ["the movie was a lovely film and plot", "good", "awful acting"]]
    x, _ = make_batches(ids, [0, 0, 0], 3)[0]  # one batch, rows ordered by length, 0-padded
    by_length = sorted(ids, key=len)
    assert [(row != 0).sum().item() for row in x] == [len(i) for i in by_length]
    alone = torch.cat([model(torch.tensor([i])) for i in by_length])
    assert_close(model(x), alone, atol=1e-5, rtol=1e-4)


@pytest.mark.slow
def test_evaluate_on_another_file_and_predict_never_import_lightning(classify_run, tmp_path):
    other = write_csv(tmp_path / "other.tsv", n=30, seed=9)
    other.write_text(other.read_text().replace(",", "\t"))
    code = (
        "import sys, json\n"
        "from attnlab.cli import main\n"
        f"assert main(['evaluate', {str(classify_run)!r}, '--data', {str(other)!r}]) == 0\n"
        f"assert main(['predict', {str(classify_run)!r}, '--input', 'bad film']) == 0\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in ('lightning', 'pytorch_lightning')]\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads(proc.stdout[: proc.stdout.rindex("}") + 1])
    assert 0 <= metrics["test_accuracy"] <= 1 and "test_macro_f1" in metrics
    assert proc.stdout.strip().splitlines()[-1] in ("meh", "neg", "pos")


@pytest.mark.slow
def test_evaluate_reads_a_file_whose_columns_are_named_otherwise(classify_run, tmp_path, capsys):
    """The run was trained on columns review/sentiment: a file with text/label is read by
    naming them, as train takes them, and gives the same scores as the same rows under the
    run's own names (the default)."""
    own = write_csv(tmp_path / "own.csv", n=30, seed=9)
    other = tmp_path / "other.csv"
    other.write_text(own.read_text().replace("id,review,sentiment", "id,text,label", 1))
    assert main(["evaluate", str(classify_run), "--data", str(own)]) == 0
    expected = json.loads(capsys.readouterr().out)
    assert main(["evaluate", str(classify_run), "--data", str(other)]) == 2
    assert "other.csv: no columns 'review', 'sentiment'" in capsys.readouterr().err
    assert main(["evaluate", str(classify_run), "--data", str(other), "--text-column", "text",
                 "--label-column", "label"]) == 0
    assert json.loads(capsys.readouterr().out) == expected


@pytest.mark.slow
@pytest.mark.parametrize("flags, message", [
    (["--text-column", "label", "--label-column", "label"],
     "--text-column and --label-column are both 'label'; they must name two different columns"),
    (["--src-column", "text"], "--src-column is for translate runs; "),
    (["--label-column", " "], "--label-column must be a column name, got ' '"),
    (["--set-column", "id"], "--set-column would make the classify run "),
])
def test_evaluate_checks_column_flags_as_train_does(classify_run, tmp_path, capsys, flags,
                                                    message):
    data = write_csv(tmp_path / "d.csv", n=6)
    assert main(["evaluate", str(classify_run), "--data", str(data), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


@pytest.mark.slow
def test_evaluate_column_flags_need_a_data_file(classify_run, capsys):
    assert main(["evaluate", str(classify_run), "--text-column", "text"]) == 2
    assert "--text-column names a column of --data FILE" in capsys.readouterr().err


@pytest.mark.slow
def test_plot_attention_labels_cls_and_the_texts_own_words(classify_run, tmp_path):
    cfg = read_yaml(classify_run / "config.yaml")
    maps, x_labels, y_labels = TASK.runtime().attention_maps(
        TASK, classify_run, TASK.typed(cfg, classify_run), "what a superb film")
    assert x_labels == y_labels == ["what", " a", " superb", " film"]  # mean pooling: no [CLS]
    assert len(maps) == 1 and maps[0].shape == (2, 4, 4)
    assert_close(maps[0].sum(-1), torch.ones(2, 4), atol=1e-5, rtol=0)
    out = tmp_path / "a.png"
    assert main(["plot", "attention", str(classify_run), "--input", "what a superb film",
                 "--out", str(out)]) == 0
    assert out.stat().st_size > 1000


@pytest.mark.slow
@pytest.mark.parametrize("tokenizer", ["bpe", "char"])
def test_jsonl_with_bpe_or_char_tokenizer_and_cls_pooling_runs_end_to_end(tmp_path, capsys, tokenizer):
    rng = random.Random(1)
    lines = [json.dumps({"body": " ".join(rng.choice(WORDS[lab]) for _ in range(3)) + " ünï",
                         "y": i % 2}) for i, lab in enumerate(["pos", "neg"] * 20)]
    (tmp_path / "d.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    assert main(["train", "classify", "--data", str(tmp_path / "d.jsonl"), "--out", str(out),
                 "--text-column", "body", "--label-column", "y", "--tokenizer", tokenizer,
                 "--vocab-size", "300", "--max-steps", "3", "--model-dim", "16", "--num-heads", "2",
                 "--num-layers", "1", "--pooling", "cls"]) == 0
    assert "test_macro_f1" in json.loads((out / "metrics.json").read_text())
    assert json.loads((out / "tokenizer.json").read_text())["type"] == tokenizer
    assert read_yaml(out / "config.yaml")["labels"] == ["0", "1"]  # JSON numbers as labels
    capsys.readouterr()
    assert main(["predict", str(out), "--input", "good ünï"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] in ("0", "1")


@pytest.mark.slow
def test_evaluate_refuses_a_training_file_that_changed_since(classify_run, tmp_path, capsys):
    """evaluate re-draws the test split from the training file with the run's seed: if the file
    changed, those rows are no longer the held-out ones, so it says so instead of scoring them."""
    import shutil

    from attnlab.runs import write_yaml

    run = tmp_path / "run"
    shutil.copytree(classify_run, run)
    cfg = read_yaml(run / "config.yaml")
    data = tmp_path / "reviews.csv"
    shutil.copy(cfg["data"], data)  # the same bytes, elsewhere
    write_yaml(run / "config.yaml", {**cfg, "data": str(data)})
    assert main(["evaluate", str(run)]) == 0
    capsys.readouterr()

    with open(data, "a") as f:
        f.write("an extra review,pos\n")
    assert main(["evaluate", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"--data {data} changed since this run was trained" in err and "--data FILE" in err
    assert "Traceback" not in err

    data.unlink()
    assert main(["evaluate", str(run)]) == 2
    assert "is gone" in capsys.readouterr().err


@pytest.mark.slow
def test_resume_takes_the_data_file_where_it_moved_to_if_its_bytes_are_the_same(
        classify_run, tmp_path, capsys, monkeypatch):
    """The data file moved (or the run went to another machine): --resume said it was gone and
    refused --data at its new path as another setting, so the run could not continue without
    editing config.yaml. Now --data may name it anywhere, its SHA-256 must be the recorded one,
    and config.yaml records the new path, absolute."""
    import shutil

    from attnlab.runs import write_yaml

    run = tmp_path / "run"
    shutil.copytree(classify_run, run)
    cfg = read_yaml(run / "config.yaml")
    gone = tmp_path / "reviews.csv"  # where the run read its data, now gone
    write_yaml(run / "config.yaml", {**cfg, "data": str(gone)})
    (tmp_path / "moved").mkdir()
    shutil.copy(cfg["data"], tmp_path / "moved" / "reviews.csv")
    write_csv(tmp_path / "other.csv", n=240, seed=1)
    monkeypatch.chdir(tmp_path)
    more = ["train", "classify", "--out", str(run), "--resume", "--max-steps", "84"]
    capsys.readouterr()
    assert main(more) == 2
    assert capsys.readouterr().err == (f"attnlab: error: --data {gone} (the file this run started "
                                       f"on) is gone; give --data where it is now, put the file "
                                       f"back or start a new run\n")
    assert main([*more, "--data", "other.csv"]) == 2
    started = (f"the run started on {gone} (its SHA-256 is config.yaml's data_sha256): give "
               f"that file where it is now, or start a new run\n")
    assert capsys.readouterr().err == (f"attnlab: error: --data other.csv is not the file this "
                                       f"run started on: its bytes differ; {started}")
    assert main([*more, "--data", "mooved/reviews.csv"]) == 2  # mistyped
    assert capsys.readouterr().err == (f"attnlab: error: --data mooved/reviews.csv not found; "
                                       f"{started}")
    assert main([*more, "--data", "moved/reviews.csv"]) == 0, capsys.readouterr().err
    cfg = read_yaml(run / "config.yaml")
    assert cfg["data"] == str(tmp_path / "moved" / "reviews.csv")
    assert json.loads((run / "metrics.json").read_text())["steps"] == 84


def test_a_moved_data_file_is_recorded_when_the_resumed_run_starts(tmp_path):
    """config.yaml named the moved file's new path only when the resumed run finished: a run
    interrupted again then asked for --data once more, and evaluate --checkpoint last could not
    find its data. Now the path is recorded at the start (its bytes were checked before)."""
    from attnlab.commands.preflight import record_moved_data
    from attnlab.runs import write_yaml

    saved = {"task": "classify", "data": "/gone/reviews.csv", "test": "/kept/test.csv",
             "data_sha256": {"data": "ab", "test": "cd"}, "max_steps": 40}
    write_yaml(tmp_path / "config.yaml", saved)
    record_moved_data(tmp_path, {**saved, "data": "/moved/reviews.csv", "max_steps": 80})
    # only the moved path: the budget is recorded when the run finishes, as before
    assert read_yaml(tmp_path / "config.yaml") == {**saved, "data": "/moved/reviews.csv"}


@pytest.mark.slow
def test_a_resumed_run_stopped_again_names_the_moved_file_in_its_config(
        classify_run, tmp_path, capsys, monkeypatch):
    # the resumed run, accepted, stops before its first step (as a signal would stop it):
    # config.yaml must already name the file where it is now, for the next --resume and for
    # evaluate (a --resume refused before, tests/reliability/test_refused_resume_leftovers.py,
    # records nothing)
    import shutil

    from attnlab.errors import UsageError
    from attnlab.training.engine import Loop

    run = tmp_path / "run"
    shutil.copytree(classify_run, run)
    moved = tmp_path / "moved.csv"
    shutil.copy(read_yaml(run / "config.yaml")["data"], moved)

    def stopped(*args, **kwargs):
        raise UsageError("stopped here")

    monkeypatch.setattr(Loop, "run", stopped)
    assert main(["train", "classify", "--out", str(run), "--resume", "--max-steps", "84",
                 "--data", str(moved)]) == 2
    assert "stopped here" in capsys.readouterr().err
    assert read_yaml(run / "config.yaml")["data"] == str(moved)


def test_ddp_ranks_take_disjoint_equal_shares_of_each_epoch_and_resume_mid_epoch(monkeypatch):
    from attnlab.data import resumable  # the batches call shard there
    from attnlab.tasks.classify import runtime as classify_data

    # 50 texts of varied length, each tagged by its first id; batches of 4: 13 an epoch
    ids = [[100 + i] + [5] * (i % 7) for i in range(50)]
    targets = [i % 2 for i in range(50)]

    def rows(batch):
        return sorted(int(x[0]) for x in batch[0])

    shares = {}
    for rank in (0, 1):
        monkeypatch.setattr(resumable, "shard", lambda rank=rank: (rank, 2))
        loader = classify_data._Batches(ids, targets, 4, seed=3)
        shares[rank] = [rows(b) for b in loader]
        assert len(shares[rank]) == len(loader) == 6  # 13 // 2: both ranks take the same count
    seen = [i for share in shares.values() for batch in share for i in batch]
    assert len(seen) == len(set(seen))  # no text on both ranks

    monkeypatch.setattr(resumable, "shard", lambda: (0, 1))
    whole = classify_data._Batches(ids, targets, 4, seed=3)
    first = list(whole)
    resumed = classify_data._Batches(ids, targets, 4, seed=3)
    resumed.load_state_dict({"epoch": 0, "done": 5})
    assert [rows(b) for b in resumed] == [rows(b) for b in first[5:]]


@pytest.mark.slow
def test_resume_refuses_a_training_file_that_changed_since_the_run_started(classify_run, tmp_path,
                                                                          capsys):
    import shutil

    from attnlab.runs import write_yaml

    run = tmp_path / "run"
    shutil.copytree(classify_run, run)
    cfg = read_yaml(run / "config.yaml")
    data = tmp_path / "reviews.csv"
    shutil.copy(cfg["data"], data)
    write_yaml(run / "config.yaml", {**cfg, "data": str(data)})
    assert main(["train", "classify", "--out", str(run), "--resume"]) == 0  # same file: a no-op
    with open(data, "a") as f:
        f.write("an extra review,pos\n")
    capsys.readouterr()
    assert main(["train", "classify", "--out", str(run), "--resume"]) == 2
    err = capsys.readouterr().err
    assert f"--data {data} changed since this run started" in err
    assert "put the file back or start a new run" in err and "Traceback" not in err


def test_macro_f1_is_torchmetrics_multiclass_macro_f1():
    torchmetrics = pytest.importorskip("torchmetrics.functional.classification")
    g = torch.Generator().manual_seed(0)
    for k, n in [(2, 1), (2, 7), (3, 4), (5, 30), (7, 3)]:
        for _ in range(20):
            preds, targets = torch.randint(0, k, (2, n), generator=g)
            ours = classification_metrics(preds, targets, k)["test_macro_f1"]
            theirs = float(torchmetrics.multiclass_f1_score(preds, targets, k, average="macro"))
            assert ours == pytest.approx(theirs, abs=1e-6), (k, preds, targets)


@pytest.mark.slow
def test_texts_the_word_tokenizer_cannot_split_are_named_before_training(tmp_path, capsys):
    """Reviews in Chinese are one unknown "word" each to the default word tokeniser: the run
    trained on nothing and scored chance (test accuracy 0.5), without a word. Now a note says
    so; English reviews get none."""
    rng = random.Random(0)
    filler, cue = "我你他的是在有人这上中大来和国", {"pos": "好棒喜欢", "neg": "差坏失望"}
    rows = [(("".join(rng.choice(filler) for _ in range(8)) + rng.choice(cue[y])), y)
            for y in ("pos", "neg") * 60]
    with open(tmp_path / "zh.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("review", "sentiment"), *rows])
    common = ["--text-column", "review", "--label-column", "sentiment", "--max-steps", "1",
              "--model-dim", "16", "--num-heads", "2", "--num-layers", "1"]
    capsys.readouterr()
    assert main(["train", "classify", "--data", str(tmp_path / "zh.csv"),
                 "--out", str(tmp_path / "zh"), *common]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "100% of the 12 tokens of the validation texts are unk" in notes[0]
    assert main(["train", "classify", "--data", str(write_csv(tmp_path / "en.csv")),
                 "--out", str(tmp_path / "en"), *common]) == 0
    assert "note:" not in capsys.readouterr().err


@pytest.mark.parametrize("missing", ["NA", "nan", "NULL"])
def test_a_class_spelled_as_a_missing_value_is_named_when_the_run_starts(tmp_path, capsys,
                                                                         missing):
    from attnlab.tasks.classify.data import read_and_pin

    # R's write.csv writes a missing label as NA, pandas' astype(str) as nan: a class of
    # those rows is trained unless the user hears of it
    for labels, said in (((missing, "pos", "neg"), True), (("none", "pos", "neg"), False)):
        data = tmp_path / f"{labels[0]}.csv"
        data.write_text("text,label\n" + "".join(f"text {i},{labels[i % 3]}\n" for i in range(60)))
        cfg = {**TASK.defaults, "task": "classify", "data": str(data)}
        splits = read_and_pin(cfg, TASK.config_class().from_values)
        assert labels[0] in {lab for _, lab in splits["train"]}  # still a class, as written
        err = capsys.readouterr().err
        assert (f"warning: the class {missing!r} may be a missing label, as it is often written"
                in err) is said
        assert said or "missing label" not in err  # "none" is a class name of its own


def test_classes_that_are_one_number_written_two_ways_are_named_when_the_run_starts(
        tmp_path, capsys):
    from attnlab.tasks.classify.data import read_and_pin

    # rows appended from a file of floats: 1.0 beside 1 (a label is used as written)
    for extra, said in (("1.0", True), ("1", False)):
        data = tmp_path / f"{extra}.csv"
        data.write_text("text,label\n" + "".join(f"text {i},{i % 2}\n" for i in range(30))
                        + "".join(f"more {i},{extra}\n" for i in range(10)))
        cfg = {**TASK.defaults, "task": "classify", "data": str(data)}
        splits = read_and_pin(cfg, TASK.config_class().from_values)
        assert ({lab for _, lab in splits["train"]} == {"0", "1", "1.0"}) is said
        err = capsys.readouterr().err
        assert ("warning: classes that may be one number written two ways ('1' and '1.0') "
                "are trained as different classes" in err) is said
        assert said or "written two ways" not in err


def test_json_numbers_that_are_one_number_written_two_ways_are_named_when_the_run_starts(
        tmp_path):
    """A JSONL label column of 2.5 and 2.50 (1e2 and 100.0) trained four classes without a
    word: two equal JSON numbers are one number. The same texts in a CSV ("3.1" and "3.10"
    may be versions there) are not named."""
    from attnlab.tasks.classify.data import read_and_pin

    def said(name, labels):
        data = tmp_path / name
        data.write_text("".join(f'{{"text": "text {i}", "label": {labels[i % 4]}}}\n'
                                for i in range(60)) if name.endswith(".jsonl") else
                        "text,label\n" + "".join(f"t{i},{labels[i % 4]}\n" for i in range(60)))
        notes: list[str] = []
        cfg = {**TASK.defaults, "task": "classify", "data": str(data)}
        splits = read_and_pin(cfg, TASK.config_class().from_values, said=notes)
        assert len({lab for _, lab in splits["train"]}) == 4  # still classes as written
        return [note for note in notes if "written two ways" in note]

    numbers = ["2.5", "2.50", "1e2", "100.0"]
    assert said("n.jsonl", numbers) == [
        "warning: classes that may be one number written two ways ('2.5' and '2.50'; '100.0' "
        "and '1e2') are trained as different classes; write each number one way if they are "
        "one class"]
    assert said("n.csv", numbers) == []


def test_a_jsonl_decimal_label_is_the_class_as_written_and_an_old_run_reads_it_as_before(
        tmp_path):
    """A JSON label written 1e2 became the class '100.0' (json.loads' float spelled back), so
    predict and confusion.csv named a class that no row of the file has. A run recorded
    before keeps its classes ('100.0', '2.5'): its evaluate and --resume read them so."""
    from attnlab.tasks.classify.data import read_and_pin

    data = tmp_path / "d.jsonl"
    data.write_text("".join(f'{{"text": "text {i}", "label": {["1e2", "2.50"][i % 2]}}}\n'
                            for i in range(40)))
    cfg = {**TASK.defaults, "task": "classify", "data": str(data)}
    splits = read_and_pin(cfg, TASK.config_class().from_values, said=[])
    assert {lab for _, lab in splits["train"]} == {"1e2", "2.50"}
    assert cfg["json_decimals_as_written"] is True  # recorded in config.yaml
    old = {k: v for k, v in cfg.items() if k != "json_decimals_as_written"}
    before = load_splits(TASK.config_class().from_values(old))
    assert {lab for _, lab in before["train"]} == {"100.0", "2.5"}


@pytest.mark.slow
def test_predict_and_the_confusion_matrix_name_a_jsonl_decimal_class_as_written(tmp_path,
                                                                                capsys):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(f'{{"text": "{w} film", "label": {lab}}}\n'
                            for w, lab in [("good", "1e2"), ("bad", "2.50")] * 20))
    out = tmp_path / "run"
    assert main(["train", "classify", "--data", str(data), "--out", str(out), "--max-steps", "2",
                 "--model-dim", "16", "--num-heads", "2", "--num-layers", "1"]) == 0
    header = (out / "confusion.csv").read_text().splitlines()[0]
    assert header == "true \\ predicted,2.50,1e2"
    capsys.readouterr()
    assert main(["predict", str(out), "--input", "good film", "--json"]) == 0
    found = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert sorted(found["probabilities"]) == ["1e2", "2.50"]
    assert found["prediction"] in ("1e2", "2.50")


def test_a_held_out_label_that_is_a_training_label_written_otherwise_is_named(tmp_path):
    """--data written by hand (1e2), --test by pandas' to_json (100.0): refused as a label
    never seen in training, without a word on why; now the message names the twin."""
    from attnlab.errors import UsageError
    from attnlab.tasks.classify.data import read_and_pin

    data, test = tmp_path / "d.jsonl", tmp_path / "t.jsonl"
    data.write_text("".join(f'{{"text": "text {i}", "label": {["1e2", "2"][i % 2]}}}\n'
                            for i in range(40)))
    test.write_text('{"text": "a", "label": 2}\n{"text": "b", "label": 100.0}\n')
    cfg = {**TASK.defaults, "task": "classify", "data": str(data), "test": str(test)}
    with pytest.raises(UsageError, match=r"t.jsonl line 2: label '100.0' never seen in training "
                                         r"\(labels: 1e2, 2\); training has '1e2', the same "
                                         r"number written otherwise \(a label is used as "
                                         r"written\): write each number one way$"):
        read_and_pin(cfg, TASK.config_class().from_values, said=[])
