"""A Parquet file with a column name twice (Arrow allows it; pyarrow writes it): reading it
ended in pyarrow's KeyError traceback (exit 1), where a CSV header with a name twice is a
one-line error naming the column."""
import pytest

from attnlab.cli import main
from attnlab.data.tables import read_table
from attnlab.errors import UsageError

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _twice(tmp_path):
    path = tmp_path / "reviews.parquet"
    texts = ["a great film", "a dull plot", "lovely acting", "boring and flat"]
    table = pa.Table.from_arrays(
        [pa.array(texts), pa.array(["pos", "neg", "pos", "neg"]), pa.array(["x"] * 4)],
        names=["text", "label", "text"])
    pq.write_table(table, path)
    return path


def test_a_column_named_twice_is_named_with_its_positions(tmp_path):
    path = _twice(tmp_path)
    with pytest.raises(UsageError, match=r"reviews.parquet: column 'text' appears twice in the "
                                         r"file's columns \(positions 1 and 3\)"):
        read_table(path, ["text", "label"])
    with pytest.raises(UsageError, match="column 'text' appears twice"):
        read_table(path)  # every column: that one too
    # a column named twice that nothing reads cannot change a result, as in a CSV
    assert read_table(path, ["label"]).column("label") == ["pos", "neg", "pos", "neg"]


def test_train_and_prepare_exit_2_with_one_line_before_writing(tmp_path, capsys):
    path = _twice(tmp_path)
    run, corpus = tmp_path / "run", tmp_path / "corpus"
    assert main(["train", "classify", "--data", str(path), "--out", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "column 'text' appears twice" in err
    assert main(["prepare", str(path), "--out", str(corpus)]) == 2
    assert "column 'text' appears twice" in capsys.readouterr().err
    assert not run.exists() and not corpus.exists()
