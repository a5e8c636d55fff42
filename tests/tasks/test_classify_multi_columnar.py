"""``attnlab train classify --multi-label`` on a Parquet file or a Hugging Face datasets
directory (#41): a label column holding a list of class names per row (a ``datasets``
``Sequence`` of ``ClassLabel``: read as their names) trains the run the same rows as JSON Lines
train, with the same first loss and test metrics; a bad column or row is refused in one line
naming the file, the row and the column (exit 2, nothing written)."""
import json

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from attnlab.cli import main
from attnlab.data.tables import read_table
from attnlab.tasks.classify import TASKS
from attnlab.tasks.classify.data import load_splits

from .test_classify_objectives import TOPICS, write_multi
from .test_columnar_runs import first_loss_and_metrics

TINY = ["--multi-label", "--max-steps", "4", "--model-dim", "16", "--num-heads", "2",
        "--num-layers", "1", "--dim-feedforward", "16", "--batch-size", "8", "--val-every", "2",
        "--threads", "1"]


def _rows(tmp_path, n=60):
    """(text, [topics]) rows, as write_multi's JSON Lines file holds them."""
    path = write_multi(tmp_path / "topics.jsonl", n=n)
    return path, [(r["text"], r["label"]) for r in map(json.loads, path.read_text().splitlines())]


@pytest.mark.slow  # trains three runs
def test_jsonl_parquet_and_datasets_label_lists_train_the_same_run(tmp_path, capsys):
    jsonl, rows = _rows(tmp_path)
    table = pa.table({"text": [t for t, _ in rows], "label": [labels for _, labels in rows]})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=11)  # several row groups
    names = sorted(TOPICS)
    features = datasets.Features({"text": datasets.Value("string"),
                                  "label": datasets.Sequence(datasets.ClassLabel(names=names))})
    datasets.Dataset.from_dict({"text": [t for t, _ in rows],
                                "label": [[names.index(c) for c in labels] for _, labels in rows]},
                               features=features).save_to_disk(str(tmp_path / "ds"))
    results = []
    for data in (jsonl, tmp_path / "t.parquet", tmp_path / "ds"):
        out = tmp_path / f"run-{data.name}"
        assert main(["train", "classify", "--data", str(data), "--out", str(out), *TINY]) == 0
        results.append(first_loss_and_metrics(out))
    assert {"test_micro_f1", "test_macro_f1", "test_per_class"} <= set(results[0][1])
    assert results[1] == results[0] and results[2] == results[0]
    # evaluate --data: the datasets directory scores a run as the JSON Lines file does
    scores = []
    for data in (jsonl, tmp_path / "ds"):
        capsys.readouterr()
        assert main(["evaluate", str(tmp_path / "run-topics.jsonl"), "--data", str(data)]) == 0
        scores.append(json.loads(capsys.readouterr().out))
    assert scores[1] == scores[0] and "test_micro_f1" in scores[0]


def test_a_parquet_list_gives_the_label_sets_of_the_jsonl_and_the_csv(tmp_path):
    jsonl, rows = _rows(tmp_path, n=30)
    pq.write_table(pa.table({"text": [t for t, _ in rows], "label": [ls for _, ls in rows]}),
                   tmp_path / "t.parquet", row_group_size=7)
    cfg = dict(multi_label=True, seed=3)
    want = load_splits(TASKS["classify"].config(data=str(jsonl), **cfg))
    got = load_splits(TASKS["classify"].config(data=str(tmp_path / "t.parquet"), **cfg))
    assert got == want and {lab for _, lab in got["train"]} >= {("food",), ("music", "sport")}


def test_a_list_of_numbers_reads_as_in_json_lines(tmp_path):
    (tmp_path / "n.jsonl").write_text('{"text": "a", "label": [2, 10]}\n')
    pq.write_table(pa.table({"text": ["a"], "label": [[2, 10]]}), tmp_path / "n.parquet")
    read = [read_table(tmp_path / name, ["text", "label"], lists=("label",))
            for name in ("n.jsonl", "n.parquet")]
    assert read[0] == read[1] == [{"text": "a", "label": ["2", "10"]}]


def _table(labels, texts=None):
    return pa.table({"text": texts or [f"goal song {i}" for i in range(len(labels))],
                     "label": labels})


BAD = {
    "nested": (_table([[["sport"]], [["music"]]]),
               "column 'label' holds lists of list<element: string>; it must hold lists of text "
               "or numbers"),
    "null_item": (_table([["sport"], ["music", None]]),
                  "row 2: column 'label' holds a null item"),
    "null_list": (_table([["sport"], None]), "row 2: column 'label' is null"),
    "struct": (_table([{"a": "sport"}, {"a": "music"}]),
               "column 'label' holds struct<a: string> values; it must hold text or numbers"),
    "missing": (pa.table({"text": ["a", "b"], "topics": [["sport"], ["music"]]}),
                "no column 'label' (columns: text, topics)"),
}


@pytest.mark.slow  # the CLI, in process (refused before training)
@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_parquet_label_column_exits_2_naming_row_and_column_and_writes_nothing(
        name, tmp_path, capsys):
    table, fragment = BAD[name]
    path = tmp_path / f"{name}.parquet"
    pq.write_table(table, path)
    out = tmp_path / "run"
    assert main(["train", "classify", "--data", str(path), "--out", str(out), *TINY]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--data {path}" in err[0] and fragment in err[0], err
    assert not out.exists()


@pytest.mark.slow  # the CLI, in process (refused before training)
@pytest.mark.parametrize("objective", [[], ["--regression"]])
@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_a_list_label_without_multi_label_says_give_multi_label(suffix, objective, tmp_path,
                                                                capsys):
    jsonl, rows = _rows(tmp_path, n=20)
    path = jsonl if suffix == "jsonl" else tmp_path / "d.parquet"
    if suffix == "parquet":
        pq.write_table(_table([ls for _, ls in rows], [t for t, _ in rows]), path)
    out = tmp_path / "run"
    assert main(["train", "classify", "--data", str(path), "--out", str(out), *TINY[1:],
                 *objective]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    place = "line 1" if suffix == "jsonl" else "row 1"
    assert len(err) == 1 and f"--data {path} {place}: label {json.dumps(rows[0][1])} is a " \
                             f"list; give --multi-label" in err[0], err
    assert not out.exists()


@pytest.mark.slow
def test_a_held_out_label_never_seen_in_training_is_named_by_its_row(tmp_path, capsys):
    _, rows = _rows(tmp_path)
    pq.write_table(_table([ls for _, ls in rows], [t for t, _ in rows]), tmp_path / "d.parquet")
    names = ["sport", "weather"]
    features = datasets.Features({"text": datasets.Value("string"),
                                  "label": datasets.Sequence(datasets.ClassLabel(names=names))})
    datasets.Dataset.from_dict({"text": ["goal", "rain goal"], "label": [[0], [0, 1]]},
                               features=features).save_to_disk(str(tmp_path / "t"))
    out = tmp_path / "run"
    capsys.readouterr()  # save_to_disk's progress bar
    assert main(["train", "classify", "--data", str(tmp_path / "d.parquet"), "--test",
                 str(tmp_path / "t"), "--out", str(out), *TINY]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--test {tmp_path / 't'} row 2: label 'weather' never seen in " \
                             f"training (labels: food, music, sport)" in err[0], err
    assert not out.exists()
