"""Runs trained on a Parquet file or a Hugging Face datasets directory are the runs trained on the
same rows as CSV/TSV: the same first loss and test metrics; --resume refuses a changed one."""
import csv
import json
import random
import shutil

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from attnlab.cli import main
from attnlab.runs import read_yaml

WORDS = {"pos": "good great lovely".split(), "neg": "bad awful dull".split()}
TINY = ["--max-steps", "4", "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
        "--dim-feedforward", "32", "--batch-size", "8"]


def reviews(n=60) -> pa.Table:
    rng = random.Random(0)
    labels = [("pos", "neg")[i % 2] for i in range(n)]
    texts = [f"the film was {rng.choice(WORDS[lab])} {rng.choice(['', 'really'])}".strip()
             for lab in labels]
    return pa.table({"review": texts, "label": labels})


def write_csv(path, table: pa.Table, delimiter=","):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter=delimiter)
        w.writerow(table.column_names)
        w.writerows(zip(*table.to_pydict().values()))


def first_loss_and_metrics(run):
    rows = list(csv.DictReader(open(run / "logs" / "metrics.csv")))
    metrics = json.loads((run / "metrics.json").read_text())
    return float(rows[0]["train_loss"]), {k: v for k, v in metrics.items() if k.startswith("test_")}


def train_classify(data, out):
    assert main(["train", "classify", "--data", str(data), "--out", str(out),
                 "--text-column", "review", *TINY]) == 0
    return first_loss_and_metrics(out)


@pytest.mark.slow
def test_classify_trains_and_evaluates_the_same_on_parquet_datasets_and_csv(tmp_path, capsys):
    table = reviews()
    write_csv(tmp_path / "r.csv", table)
    pq.write_table(table, tmp_path / "r.parquet")
    whole = datasets.Dataset(table)
    datasets.DatasetDict({"train": whole, "test": whole.select(range(10))}).save_to_disk(
        str(tmp_path / "dd"))
    want = train_classify(tmp_path / "r.csv", tmp_path / "csv")
    assert train_classify(tmp_path / "r.parquet", tmp_path / "parquet") == want
    assert train_classify(tmp_path / "dd" / "train", tmp_path / "datasets") == want
    cfg = read_yaml(tmp_path / "datasets" / "config.yaml")
    assert cfg["data"] == str((tmp_path / "dd" / "train").resolve())
    # evaluate --data: a split of the DatasetDict scores as the CSV of its rows
    write_csv(tmp_path / "t.csv", table.slice(0, 10))
    scores = []
    for data in (tmp_path / "t.csv", tmp_path / "dd" / "test"):
        capsys.readouterr()
        assert main(["evaluate", str(tmp_path / "csv"), "--data", str(data)]) == 0
        scores.append(json.loads(capsys.readouterr().out))
    assert scores[1] == scores[0] and "test_accuracy" in scores[0]


@pytest.mark.slow
def test_resume_refuses_a_parquet_file_or_datasets_directory_that_changed(tmp_path, capsys):
    table = reviews()
    pq.write_table(table, tmp_path / "r.parquet")
    datasets.Dataset(table).save_to_disk(str(tmp_path / "ds"))
    for data, name in ((tmp_path / "r.parquet", "p"), (tmp_path / "ds", "d")):
        train_classify(data, tmp_path / name)
        # a no-op resume of the finished run: the data is unchanged
        assert main(["train", "classify", "--out", str(tmp_path / name), "--resume"]) == 0
    changed = pa.concat_tables([table, table.slice(0, 1)])
    pq.write_table(changed, tmp_path / "r.parquet")
    shutil.rmtree(tmp_path / "ds")
    datasets.Dataset(changed).save_to_disk(str(tmp_path / "ds"))
    for data, name in ((tmp_path / "r.parquet", "p"), (tmp_path / "ds", "d")):
        capsys.readouterr()
        assert main(["train", "classify", "--out", str(tmp_path / name), "--resume"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.endswith(f"--data {data.resolve()} changed since this run started (its SHA-256 "
                            f"differs from config.yaml's data_sha256), so its splits would not be "
                            f"the ones trained on so far; put the file back or start a new run")


@pytest.mark.slow
def test_translate_trains_the_same_on_parquet_as_on_tsv(tmp_path):
    words = ["a", "b", "c", "d", "e"]
    table = pa.table({"en": [f"{x} {y}" for x in words for y in words],
                      "de": [f"{y} {x}" for x in words for y in words]})
    write_csv(tmp_path / "pairs.tsv", table, delimiter="\t")
    pq.write_table(table, tmp_path / "pairs.parquet")
    found = []
    for name in ("pairs.tsv", "pairs.parquet"):
        out = tmp_path / name.replace(".", "_")
        assert main(["train", "translate", "--data", str(tmp_path / name), "--src-column", "en",
                     "--tgt-column", "de", "--tgt-tokenizer", "word", "--src-tokenizer", "word",
                     "--out", str(out), "--val-size", "2", "--warmup", "1", *TINY]) == 0
        found.append(first_loss_and_metrics(out))
    assert found[0] == found[1]


def test_a_label_a_held_out_parquet_file_adds_is_named_by_its_row(tmp_path):
    from attnlab.errors import UsageError
    from attnlab.tasks.classify import TASKS
    from attnlab.tasks.classify.data import load_splits

    pq.write_table(reviews(), tmp_path / "r.parquet")
    pq.write_table(pa.table({"review": ["fine", "odd"], "label": ["pos", "meh"]}),
                   tmp_path / "t.parquet")
    cfg = TASKS["classify"].config(data=str(tmp_path / "r.parquet"), test=str(tmp_path / "t.parquet"),
                                   text_column="review")
    with pytest.raises(UsageError, match=r"^--test .*t.parquet row 2: label 'meh' never seen in "
                                         r"training \(labels: neg, pos\)$"):
        load_splits(cfg)
