"""read_table: users' CSV/TSV/JSONL files, and errors that name the file, column and line."""
import pytest

from attnlab.data.tables import read_table
from attnlab.errors import UsageError


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def test_csv_keeps_the_named_columns_and_their_lines(tmp_path):
    path = write(tmp_path, "d.csv", 'id,text,label\n1,"hello, world",pos\n\n2,"two\nlines",neg\n3,x,pos\n')
    rows = read_table(path, ["text", "label"])
    assert rows == [{"text": "hello, world", "label": "pos"},
                    {"text": "two\nlines", "label": "neg"},
                    {"text": "x", "label": "pos"}]
    assert rows.lines == [2, 4, 6]  # physical lines where each record starts
    assert rows.column("label") == ["pos", "neg", "pos"]


def test_tsv_jsonl_and_bom(tmp_path):
    tsv = write(tmp_path, "d.tsv", "\ufefftext\tlabel\na, b\t1\n")
    assert read_table(tsv, ["text", "label"]) == [{"text": "a, b", "label": "1"}]
    jsonl = write(tmp_path, "d.jsonl", '{"text": "caf\u00e9", "label": 1}\n\n{"text": "x\u2028y", "label": "1"}\n')
    rows = read_table(jsonl, ["text", "label"])
    assert rows == [{"text": "café", "label": "1"}, {"text": "x\u2028y", "label": "1"}]
    assert rows.lines == [1, 3]


def test_all_columns_when_none_are_named(tmp_path):
    path = write(tmp_path, "d.csv", "source,target\nhello,bonjour\n")
    rows = read_table(path)
    assert rows.columns == ["source", "target"] and rows[0] == {"source": "hello", "target": "bonjour"}


@pytest.mark.parametrize("name, content, message", [
    ("d.csv", "", r"--data .*d.csv: the file is empty"),
    ("d.csv", "text,label\n", r"--data .*d.csv: the file has no data rows"),
    ("d.jsonl", "\n \n", r"--data .*d.jsonl: the file is empty"),
    ("d.csv", "text,category\nhi,a\n", r"d.csv: no column 'label' \(columns: text, category\)"),
    ("d.csv", "body\nhi\n", r"d.csv: no columns 'text', 'label' \(columns: body\)"),
    ("d.jsonl", '{"text": "a", "label": 1}\n{"text": "b"}\n', r"d.jsonl line 2: no field 'label'"),
    ("d.jsonl", '{"text": "a", "label": 1}\n[1]\n', r"d.jsonl line 2: expected a JSON object"),
    ("d.jsonl", '{"text": "a", "label": 1}\n{oops\n', r"d.jsonl line 2: not valid JSON"),
    ("d.jsonl", '{"text": "a", "label": null}\n', r"d.jsonl line 1: field 'label' must be a string"),
    ("d.csv", "text,label\nhi,a\nbad\n", r"d.csv line 3: 1 fields, but the header has 2"),
    ("d.csv", "text,label\nhi,a\n  ,b\n", r"d.csv line 3: empty value in column 'text'"),
    ("d.csv", b"text,label\nok,a\nok,b\ncaf\xe9,c\n", r"d.csv line 4: not valid UTF-8 \(byte 0xe9 at column 4\)"),
    ("d.xlsx", "text,label\n", r"d.xlsx: unknown file type '.xlsx'"),
])
def test_errors_name_file_column_and_line(tmp_path, name, content, message):
    path = write(tmp_path, name, content)
    with pytest.raises(UsageError, match=message) as info:
        read_table(path, ["text", "label"])
    assert "\n" not in str(info.value)


def test_missing_file_names_the_flag_and_path(tmp_path):
    with pytest.raises(UsageError, match=r"--test: file not found: .*missing.csv"):
        read_table(tmp_path / "missing.csv", ["text"], what="--test")
