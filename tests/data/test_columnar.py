"""Parquet files and Hugging Face datasets directories read as CSV/JSONL files are: the same rows,
the digest of what was read, one-line errors, and prepare's documents."""
import csv
import json

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from attnlab.data.columnar import ColumnarFile
from attnlab.data.tables import check_digest, read_table
from attnlab.errors import UsageError
from attnlab.runs import file_digest

ROWS = {"text": ["a fine film", "dull, slow", "caf\u00e9 \u00fcber"], "label": ["pos", "neg", "pos"],
        "stars": [5, 1, 4]}


def datasets_dir(path, data=ROWS, features=None):
    """``Dataset.save_to_disk(path)`` of ``data``: the layout a user gets from datasets."""
    datasets.Dataset.from_dict(data, features=features).save_to_disk(str(path))
    return path


def write_parquet(path, data):
    pq.write_table(pa.table(data), path)
    return path


def write_csv(path, data):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(list(data))
        w.writerows(zip(*data.values()))
    return path


def test_parquet_and_datasets_directories_give_the_rows_of_the_same_csv(tmp_path):
    write_csv(tmp_path / "d.csv", ROWS)
    write_parquet(tmp_path / "d.parquet", ROWS)
    datasets_dir(tmp_path / "ds")
    want = read_table(tmp_path / "d.csv", ["text", "label", "stars"])
    for path in (tmp_path / "d.parquet", tmp_path / "ds"):
        rows = read_table(path, ["text", "label", "stars"])
        assert rows == want, path
        assert rows.lines == [1, 2, 3]  # rows, counting from 1
        # the digest of what was read is the one a run records of the path
        assert rows.sha256 == file_digest(path)


def test_the_shards_of_a_datasets_directory_are_read_in_their_order(tmp_path):
    data = {"text": [f"row {i}" for i in range(10)], "label": ["pos", "neg"] * 5}
    datasets.Dataset.from_dict(data).save_to_disk(str(tmp_path / "ds"), num_shards=3)
    assert len(list((tmp_path / "ds").glob("data-*.arrow"))) == 3
    rows = read_table(tmp_path / "ds", ["text", "label"])
    assert rows.column("text") == data["text"] and rows.sha256 == file_digest(tmp_path / "ds")


def test_a_split_of_a_dataset_dict_is_its_own_directory(tmp_path):
    full = datasets.Dataset.from_dict(ROWS)
    datasets.DatasetDict({"train": full, "test": full.select([2, 0])}).save_to_disk(str(tmp_path / "dd"))
    assert read_table(tmp_path / "dd" / "test", ["text"]).column("text") == ["caf\u00e9 \u00fcber",
                                                                          "a fine film"]
    with pytest.raises(UsageError, match=r"^--test .*dd/validation: the DatasetDict .*dd has no split "
                                         r"'validation' \(splits: train, test\)$"):
        read_table(tmp_path / "dd" / "validation", ["text"], what="--test")
    with pytest.raises(UsageError, match=r"dd is a DatasetDict \(splits: train, test\); name a split's "
                                         r"directory, e.g. .*dd/train$"):
        read_table(tmp_path / "dd", ["text"])


def test_values_are_spelt_as_the_jsonl_reader_spells_them(tmp_path):
    features = datasets.Features({"text": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=["neg", "pos"]),
                                  "score": datasets.Value("float64"), "ok": datasets.Value("bool")})
    data = {"text": ["x", "y"], "label": [1, 0], "score": [0.5, 2.0], "ok": [True, False]}
    datasets_dir(tmp_path / "ds", data, features)
    (tmp_path / "d.jsonl").write_text("".join(
        json.dumps({"text": t, "label": ["neg", "pos"][lab], "score": s, "ok": o}) + "\n"
        for t, lab, s, o in zip(*data.values())))
    # a ClassLabel gives its names, as the user who wrote the labels sees them
    assert read_table(tmp_path / "ds") == read_table(tmp_path / "d.jsonl")
    datasets.Dataset.from_dict(data, features=features).to_parquet(str(tmp_path / "d.parquet"))
    assert read_table(tmp_path / "d.parquet") == read_table(tmp_path / "d.jsonl")


def test_a_large_file_is_read_in_batches_of_rows(tmp_path):
    table = pa.table({"text": [f"row {i}" for i in range(1000)]})
    pq.write_table(table, tmp_path / "big.parquet", row_group_size=300)
    source = ColumnarFile(tmp_path / "big.parquet", ["text"], "--data big.parquet")
    batches = list(source.batches(batch_rows=128))
    assert max(len(b["text"]) for _, b in batches) <= 128 and len(batches) >= 8
    assert [first for first, _ in batches][:2] == [1, 1 + len(batches[0][1]["text"])]
    assert [t for _, b in batches for t in b["text"]] == table.column("text").to_pylist()


def test_feature_sets_read_from_parquet_are_those_of_the_csv(tmp_path):
    from torch.testing import assert_close

    from attnlab.data.feature_sets import read_feature_sets

    data = {"cloud": ["c1", "c2", "c1"], "shape": ["ball", "cube", "ball"], "x": [0.0, 1.0, 0.5],
            "y": [2, 3, 4]}
    kw = dict(set_column="cloud", label_column="shape")
    want = read_feature_sets(write_csv(tmp_path / "p.csv", data), **kw)
    found = read_feature_sets(write_parquet(tmp_path / "p.parquet", data), **kw)
    assert [label for _, label in found] == [label for _, label in want] == ["ball", "cube"]
    assert_close([s for s, _ in found], [s for s, _ in want], rtol=0, atol=0)
    assert found.features == ["x", "y"] and found.lines == [1, 2]
    write_parquet(tmp_path / "two.parquet", {**data, "shape": ["ball", "cube", "cone"]})
    with pytest.raises(UsageError, match=r"two.parquet row 3: set 'c1' has label 'cone' here but "
                                         r"'ball' on row 1; a set has one label$"):
        read_feature_sets(tmp_path / "two.parquet", **kw)


def _bad(tmp_path, case):
    if case == "no column":
        return write_parquet(tmp_path / "d.parquet", {"review": ["x"], "label": ["pos"]})
    if case == "not datasets":
        (tmp_path / "plain").mkdir()
        (tmp_path / "plain" / "d.csv").write_text("text,label\nx,pos\n")
        return tmp_path / "plain"
    if case == "list column":
        return write_parquet(tmp_path / "d.parquet", {"text": [["a", "b"]], "label": ["pos"]})
    if case == "null":
        return write_parquet(tmp_path / "d.parquet", {"text": ["a", None], "label": ["pos", "neg"]})
    if case == "empty":
        return write_parquet(tmp_path / "d.parquet", {"text": ["a", " "], "label": ["pos", "neg"]})
    data = write_parquet(tmp_path / "good.parquet", ROWS).read_bytes()
    if case == "not parquet":
        (tmp_path / "d.parquet").write_text("text,label\nx,pos\n")
    elif case == "truncated":
        (tmp_path / "d.parquet").write_bytes(data[: len(data) // 2] + data[-300:])
    else:  # "corrupt pages": the footer is intact, the column's data is not
        (tmp_path / "d.parquet").write_bytes(data[:4] + bytes(200) + data[204:])
    return tmp_path / "d.parquet"


@pytest.mark.parametrize("case, message", [
    ("no column", r"d.parquet: no column 'text' \(columns: review, label\)$"),
    ("not datasets", r"plain is a directory but not a Hugging Face datasets directory"),
    ("list column", r"column 'text' holds list<(element|item): string> values; it must hold text or "
                    r"numbers$"),
    ("null", r"d.parquet row 2: column 'text' is null"),
    ("empty", r"d.parquet row 2: empty value in column 'text'$"),
    ("not parquet", r"d.parquet: not a readable Parquet file \("),
    ("truncated", r"d.parquet: not a readable Parquet file \("),
    ("corrupt pages", r"d.parquet: not a readable Parquet file \("),
])
def test_bad_columnar_input_is_one_line_naming_the_file(tmp_path, case, message):
    path = _bad(tmp_path, case)
    with pytest.raises(UsageError, match=message) as e:
        read_table(path, ["text", "label"], what="--data")
    assert str(e.value).startswith(f"--data {path}") and "\n" not in str(e.value)


def test_prepare_reads_a_table_row_by_row_as_files_are_read_one_by_one(tmp_path):
    """Each row is a document: the corpus of a table is the corpus of one text file per row,
    the EOS id between them, token for token; a row of no text is no document."""
    from attnlab.data.corpus import prepare

    docs = ["the cat sat on the mat. " * 12, "a dog ran far away. " * 15, "birds fly high. " * 9]
    files = []
    for i, doc in enumerate(docs):
        files.append(tmp_path / f"doc{i}.txt")
        files[-1].write_text(doc)
    write_parquet(tmp_path / "docs.parquet", {"body": docs[:1] + [""] + docs[1:]})
    datasets_dir(tmp_path / "ds", {"body": docs})
    want = prepare(files, tmp_path / "from_files", tokenizer="word", chunk_chars=64)
    for name, source in (("from_parquet", "docs.parquet"), ("from_datasets", "ds")):
        meta = prepare([tmp_path / source], tmp_path / name, tokenizer="word", chunk_chars=64,
                       text_column="body")
        assert meta["sha256"] == want["sha256"]  # train.bin, val.bin and tokenizer.json
        assert meta["files_sha256"] == [file_digest(tmp_path / source)]
    with pytest.raises(UsageError, match=r"docs.parquet: no column 'text' \(columns: body\); name it "
                                         r"with --text-column$"):
        prepare([tmp_path / "docs.parquet"], tmp_path / "c", tokenizer="word")
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("name, rows, lists, message", [
    ("d.jsonl", ['{"text": "a", "label": 1.5}', '{"text": "b", "label": NaN}'], (),
     r"d.jsonl line 2: field 'label' is NaN, not a value \("),
    ("d.jsonl", ['{"text": Infinity, "label": "x"}'], (),
     r"d.jsonl line 1: field 'text' is Infinity, not a value \("),
    ("d.jsonl", ['{"text": "a", "label": ["x", -Infinity]}'], ("label",),
     r"d.jsonl line 1: field 'label' holds -Infinity, not a value \("),
    ("d.parquet", {"text": ["a", "b", "c"], "label": [1.0, 2.0, float("nan")]}, (),
     r"d.parquet row 3: column 'label' is NaN, not a value \("),
    ("d.parquet", {"text": ["a", "b"], "label": [[1.0], [2.0, float("inf")]]}, ("label",),
     r"d.parquet row 2: column 'label' holds Infinity, not a value \("),
])
def test_a_nan_or_infinite_number_is_refused_not_read_as_the_text_nan(tmp_path, name, rows,
                                                                       lists, message):
    # Python's json and polars write a missing float as NaN: read as the text "NaN" it would be
    # a class (or a text to classify) that nobody wrote
    path = tmp_path / name
    if name.endswith(".jsonl"):
        path.write_text("\n".join(rows) + "\n")
    else:
        write_parquet(path, rows)
    with pytest.raises(UsageError, match=message) as e:
        read_table(path, ["text", "label"], what="--data", lists=lists)
    assert str(e.value).startswith(f"--data {path}") and "\n" not in str(e.value)


def test_a_nan_label_stops_train_classify_before_the_run_directory(tmp_path, capsys):
    from attnlab.cli import main

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"text": f"t {i}", "label": [1.0, 2.0, float("nan")][i % 3]})
                            + "\n" for i in range(30)))
    assert main(["train", "classify", "--data", str(data), "--out", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.startswith(f"attnlab: error: --data {data} line 3: field "
                                              f"'label' is NaN, not a value (")
    assert not (tmp_path / "run").exists()


def test_a_map_of_the_dataset_loaded_from_disk_does_not_change_its_digest(tmp_path):
    # datasets writes a .map()'s result beside the files it read (cache-<fingerprint>.arrow):
    # `evaluate` and `--resume` then refused the unchanged rows as "changed since trained"
    path = datasets_dir(tmp_path / "ds")
    before = file_digest(path)
    datasets.load_from_disk(str(path)).map(lambda row: {"n": len(row["text"])})
    assert [p.name for p in path.glob("cache-*.arrow")]  # the cache file is there
    assert file_digest(path) == before
    assert ColumnarFile(path, ["text"], "--data ds").sha256 == before
    datasets_dir(tmp_path / "other", {**ROWS, "text": ["a fine film", "dull", "b"]})
    (path / "data-00000-of-00001.arrow").write_bytes(
        (tmp_path / "other" / "data-00000-of-00001.arrow").read_bytes())
    assert file_digest(path) != before  # the rows changed: refused, as before


def test_a_run_that_recorded_its_datasets_cache_files_still_takes_its_unchanged_rows(tmp_path):
    """Runs before cache files were left out recorded a digest with them: their unchanged
    data must still be theirs (evaluate and --resume refused it as 'changed'), and changed
    rows still refused."""
    from attnlab.runs import check_data_files, tree_digest

    path = datasets_dir(tmp_path / "ds")
    datasets.load_from_disk(str(path)).map(lambda row: {"n": len(row["text"])})
    recorded = tree_digest(path, caches=True)  # what such a run's config.yaml holds
    assert recorded != file_digest(path)
    check_data_files({"data": str(path)}, {"data": recorded})
    check_digest(path, ColumnarFile(path, ["text"], "--data ds").sha256, recorded,
                 what="--data")
    datasets_dir(tmp_path / "other", {**ROWS, "text": ["a fine film", "dull", "b"]})
    (path / "data-00000-of-00001.arrow").write_bytes(
        (tmp_path / "other" / "data-00000-of-00001.arrow").read_bytes())
    with pytest.raises(UsageError, match="changed since this run"):
        check_data_files({"data": str(path)}, {"data": recorded})
