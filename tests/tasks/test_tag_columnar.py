"""``attnlab train tag`` on a Parquet file or a Hugging Face datasets directory: the same rows as
JSON Lines train the same run (the same first loss and test metrics), tags stored as a
``Sequence`` of ``ClassLabel`` read as their names, and each bad column or row refused in one
line naming the file, the row and the column (exit 2, nothing written)."""
import json

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from attnlab.cli import main
from attnlab.tasks.tag.data import read_sentences

from .test_columnar_runs import first_loss_and_metrics
from .test_tag import capitalised

TINY = ["--max-steps", "4", "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
        "--dim-feedforward", "16", "--batch-size", "8", "--val-every", "2", "--threads", "1"]
SENTENCES = [(w, ["B-PER" if t == "B-X" else t for t in tags]) for w, tags in capitalised(40)]


def _table(rows=SENTENCES) -> pa.Table:
    return pa.table({"words": [w for w, _ in rows], "labels": [t for _, t in rows]})


@pytest.mark.slow  # trains three runs
def test_jsonl_parquet_and_datasets_train_the_same_run(tmp_path):
    table = _table()
    (tmp_path / "s.jsonl").write_text("".join(
        json.dumps({"words": w, "labels": t}) + "\n" for w, t in SENTENCES))
    pq.write_table(table, tmp_path / "s.parquet", row_group_size=7)  # several row groups
    tags = sorted({t for _, ts in SENTENCES for t in ts})
    features = datasets.Features({"words": datasets.Sequence(datasets.Value("string")),
                                  "labels": datasets.Sequence(datasets.ClassLabel(names=tags))})
    datasets.Dataset.from_dict({"words": table["words"].to_pylist(),
                                "labels": [[tags.index(t) for t in ts] for _, ts in SENTENCES]},
                               features=features).save_to_disk(str(tmp_path / "ds"))
    results = []
    for name in ("s.jsonl", "s.parquet", "ds"):
        out = tmp_path / f"run-{name}"
        assert main(["train", "tag", "--data", str(tmp_path / name), "--out", str(out),
                     "--tokens-column", "words", "--tags-column", "labels", *TINY]) == 0
        results.append(first_loss_and_metrics(out))
    assert results[0][1]["test_f1"] >= 0 and "test_per_type" in results[0][1]
    assert results[1] == results[0] and results[2] == results[0]


def test_a_parquet_file_gives_the_sentences_of_the_jsonl_numbered_by_row(tmp_path):
    rows = [(["John", "runs"], ["B-PER", "O"]), ([], []), (["Paris"], ["B-LOC"])]
    pq.write_table(pa.table({"tokens": [w for w, _ in rows], "tags": [t for _, t in rows]}),
                   tmp_path / "a.parquet")
    found = read_sentences(tmp_path / "a.parquet")
    assert found.words == [["John", "runs"], ["Paris"]] and found.tags == [["B-PER", "O"],
                                                                          ["B-LOC"]]
    assert found.lines == [1, 3]  # rows; the empty one adds no sentence, as in JSON Lines


BAD = {
    "numbers": (pa.table({"tokens": [["a"]], "tags": [[1]]}),
                "column 'tags' holds lists of int64; it must hold lists of text"),
    "text": (pa.table({"tokens": ["a b"], "tags": [["O", "O"]]}),
             "column 'tokens' holds string values; it must hold a list of text per row"),
    "null_item": (pa.table({"tokens": [["a"], ["b", None]], "tags": [["O"], ["O", "O"]]}),
                  "row 2: column 'tokens' holds a null item"),
    "lengths": (pa.table({"tokens": [["a"], ["a", "b"]], "tags": [["O"], ["O"]]}),
                "row 2: 2 tokens but 1 tags"),
    "bio": (pa.table({"tokens": [["John"]], "tags": [["PER"]]}),
            "row 1: tag 'PER' is not BIO"),
    "empty_word": (pa.table({"tokens": [["a", " "]], "tags": [["O", "O"]]}),
                   "row 1: field 'tokens' must be a list of non-empty strings"),
    "missing": (pa.table({"tokens": [["a"]], "ner": [["O"]]}),
                "no column 'tags' (columns: tokens, ner); name them with --tokens-column and "
                "--tags-column"),
}


@pytest.mark.slow  # the CLI, in process
@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_parquet_file_exits_2_naming_row_and_column_and_writes_nothing(name, tmp_path,
                                                                             capsys):
    table, fragment = BAD[name]
    path = tmp_path / f"{name}.parquet"
    pq.write_table(table, path)
    out = tmp_path / "run"
    assert main(["train", "tag", "--data", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--data {path}" in err[0] and fragment in err[0], err
    assert not out.exists()


@pytest.mark.slow
def test_a_held_out_parquet_tag_never_seen_in_training_is_named_by_its_row(tmp_path, capsys):
    pq.write_table(_table(), tmp_path / "d.parquet")
    pq.write_table(_table([(["a"], ["O"]), (["Rome"], ["B-LOC"])]), tmp_path / "t.parquet")
    assert main(["train", "tag", "--data", str(tmp_path / "d.parquet"), "--test",
                 str(tmp_path / "t.parquet"), "--tokens-column", "words", "--tags-column",
                 "labels", "--out", str(tmp_path / "r")]) == 2
    assert "t.parquet row 2: tag 'B-LOC' never seen in training" in capsys.readouterr().err
