"""A ``--multi-label`` row with no label: a Parquet list ``[]`` was refused with "--multi-label
needs at least one label per row", but an empty CSV, TSV or JSON Lines cell only with "empty
value in column 'label'", which does not say that the row needs a label. Every format now gives
the --multi-label message (``labels.parse_label``'s), with its file and line, exit 2 and no run
directory."""
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from attnlab.cli import main


@pytest.mark.parametrize("name, text, where", [
    ("d.csv", "text,label\ngood,a|b\nbad,\nok,a\n", "line 3: empty label set ''"),
    ("d.csv", "text,label\ngood,a|b\nbad,  \nok,a\n", "line 3: empty label set '  '"),
    ("d.tsv", "text\tlabel\ngood\ta|b\nbad\t\nok\ta\n", "line 3: empty label set ''"),
    ("d.jsonl", '{"text": "good", "label": "a|b"}\n{"text": "bad", "label": ""}\n',
     "line 2: empty label set ''"),
    ("d.parquet", None, "row 2: empty label set ''"),
])
def test_a_multi_label_row_without_a_label_says_it_needs_one(tmp_path, capsys, name, text,
                                                             where):
    data = tmp_path / name
    if text is None:
        pq.write_table(pa.table({"text": ["good", "bad"], "label": ["a|b", ""]}), data)
    else:
        data.write_text(text)
    capsys.readouterr()
    assert main(["train", "classify", "--data", str(data), "--multi-label", "--out",
                 str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"attnlab: error: --data {data} {where} (--multi-label needs at least one "
                   f"label per row, separated by --label-sep '|')"]
    assert not (tmp_path / "run").exists()


def test_an_empty_text_is_still_named_as_an_empty_value(tmp_path, capsys):
    data = tmp_path / "d.csv"
    data.write_text("text,label\ngood,a\n,b\n")
    assert main(["train", "classify", "--data", str(data), "--multi-label", "--out",
                 str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"attnlab: error: --data {data} line 3: empty value in column 'text'")


@pytest.mark.parametrize("name, text", [
    ("d.csv", "text,label\ngood,a|b\nbad,\nok,a\n"),
    ("d.tsv", "text\tlabel\ngood\ta|b\nbad\t\nok\ta\n"),
    ("d.jsonl", '{"text": "good", "label": "a|b"}\n{"text": "bad", "label": ""}\n'),
])
def test_evaluate_data_read_a_chunk_at_a_time_says_it_needs_one_too(tmp_path, name, text):
    """``evaluate --data`` reads its rows a chunk at a time (``example_chunks``): the same
    message as training's whole read (``read_examples``), not "empty value in column"."""
    from types import SimpleNamespace

    from attnlab.errors import UsageError
    from attnlab.tasks.classify.data import example_chunks, read_examples

    data = tmp_path / name
    data.write_text(text)
    cfg = SimpleNamespace(set_column=None, text_column="text", label_column="label",
                          json_decimals_as_written=False, multi_label=True, regression=False,
                          label_sep="|", data_sha256=None)
    with pytest.raises(UsageError) as whole:
        read_examples(cfg, "data", str(data))
    with pytest.raises(UsageError) as chunked:
        list(example_chunks(cfg, "data", str(data), rows=1))
    assert str(chunked.value) == str(whole.value)
    assert "--multi-label needs at least one label per row" in str(chunked.value)
