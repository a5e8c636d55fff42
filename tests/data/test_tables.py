"""read_table: users' CSV/TSV/JSONL files, and errors that name the file, column and line."""
import sys

import pytest

from attnlab.cli import main
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


def test_a_jsonl_decimal_keeps_its_spelling_when_asked(tmp_path):
    """A JSON label written 1e2 was read as 100.0 (json.loads' float, spelled back), so
    classify's predict and confusion matrix named a class that no row of the file has.
    ``spelled=False`` (the default) reads as runs recorded before did."""
    labels = ["1e2", "2.50", "1E-3", "-0.0", "1", "true", "0.1000000000000000001"]
    path = write(tmp_path, "d.jsonl", "".join(f'{{"text": "t{i}", "label": {label}}}\n'
                                              for i, label in enumerate(labels)))
    assert read_table(path, ["text", "label"], spelled=True).column("label") == labels
    assert read_table(path, ["text", "label"]).column("label")[:2] == ["100.0", "2.5"]
    # the items of a list too (--multi-label)
    write(tmp_path, "m.jsonl", '{"text": "a", "label": [1e2, 3]}\n')
    found = read_table(tmp_path / "m.jsonl", ["text", "label"], lists=("label",), spelled=True)
    assert found.column("label") == [["1e2", "3"]]
    # a decimal too large for a float is still no value (inf), whatever its spelling
    write(tmp_path, "inf.jsonl", '{"text": "a", "label": 1e999}\n')
    with pytest.raises(UsageError, match=r"inf.jsonl line 1: field 'label' is Infinity, not a "):
        read_table(tmp_path / "inf.jsonl", ["text", "label"], spelled=True)


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
    # what the header shows of why a column is missing
    ("d.csv", "Text,label\nhi,a\n", r"no column 'text' \(columns: Text, label\); 'Text' differs from 'text' only in case"),
    ("d.csv", "text;label\nhi;a\n", r"\(columns: text;label\); the header is one name holding ';'"),
    ("d.csv", "sep=,\ntext,label\nhi,a\n", r"\(columns: sep=, \); the first line is Excel's 'sep=' line"),
])
def test_errors_name_file_column_and_line(tmp_path, name, content, message):
    path = write(tmp_path, name, content)
    with pytest.raises(UsageError, match=message) as info:
        read_table(path, ["text", "label"])
    assert "\n" not in str(info.value)


def test_missing_file_names_the_flag_and_path(tmp_path):
    with pytest.raises(UsageError, match=r"--test: file not found: .*missing.csv"):
        read_table(tmp_path / "missing.csv", ["text"], what="--test")


@pytest.mark.parametrize("name, content, message", [
    ("d.csv", "text,label,text\na,b,c\n", r"d.csv line 1: column 'text' appears twice in the header \(positions 1 and 3\)"),
    ("d.tsv", "\n\ntext\tlabel\tlabel\na\tb\tc\n", r"d.tsv line 3: column 'label' appears twice"),
    ("d.jsonl", '{"text": "a", "label": 1, "text": "b"}\n', r"d.jsonl line 1: field 'text' appears twice"),
    ("d.csv", 'text,label\nok,a\n"never closed,b\nmore,c\n', r"d.csv line 3: a quote opened in this record is never closed"),
    ("d.csv", 'text,label\n"two\nlines" and more,a\n', r"d.csv line 2: text follows a closing quote \(the quoted value runs on to line 3\)"),
    ("d.csv", "text,label\nok,a\n".encode("utf-16"), r"d.csv: the file is UTF-16"),
    # two files joined with `cat`: the second header would be a row, a class "label"
    ("d.csv", "text,label\nok,a\n\ufefftext,label\nfine,b\n", r"d.csv line 3: this row repeats the header \(text, label\)"),
    ("d.tsv", "text\tlabel\nok\ta\ntext\tlabel\n", r"d.tsv line 3: this row repeats the header"),
    ("d.jsonl", '{"text": "a", "label": 1}\n{"text": "a" "label": 1}\n', r"d.jsonl line 2: not valid JSON \(.*column 14\)"),
])
def test_what_a_reader_could_silently_misread_is_an_error(tmp_path, name, content, message):
    path = write(tmp_path, name, content)
    with pytest.raises(UsageError, match=message) as info:
        read_table(path, ["text", "label"])
    assert "\n" not in str(info.value)


def test_a_repeated_column_nobody_reads_is_no_error(tmp_path):
    path = write(tmp_path, "d.csv", "note,text,note,label\nx,hi,y,pos\n")
    assert read_table(path, ["text", "label"]) == [{"text": "hi", "label": "pos"}]
    with pytest.raises(UsageError, match=r"column 'text' appears twice in the columns asked for"):
        read_table(path, ["text", "text"])


def test_a_directory_a_link_loop_and_a_broken_link_are_named(tmp_path):
    import os

    (tmp_path / "dir.csv").mkdir()
    os.symlink(tmp_path / "loop.csv", tmp_path / "loop.csv")
    os.symlink(tmp_path / "gone.csv", tmp_path / "broken.csv")
    for name, message in (("dir.csv", "is a directory"), ("loop.csv", "symbolic links"),
                          ("broken.csv", "a symbolic link to a file that does not exist")):
        with pytest.raises(UsageError, match=message) as info:
            read_table(tmp_path / name, ["text"], what="--test")
        assert f"--test {tmp_path / name}" in str(info.value)


def test_the_digest_is_of_the_bytes_read(tmp_path):
    import hashlib

    path = write(tmp_path, "d.csv", "text,label\nhi,pos\n")
    assert read_table(path, ["text"]).sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


# A row of only empty fields (``,,``, as a spreadsheet writes an empty row) is a row with empty
# values, refused naming the file, line and column, as any empty value is; only a line with
# nothing but white space on it is a blank line, which the reader skips. Before this, ``,,`` was
# skipped as if it were blank, and the number of rows a run read changed without a word.
@pytest.mark.parametrize("name, text, message", [
    ("d.csv", "id,text,label\n1,good,pos\n,,\n2,bad,neg\n", r"d.csv line 3: empty value in column 'text'"),
    ("d.csv", 'text,label\ngood,pos\n"",""\n', r"d.csv line 3: empty value in column 'text'"),
    ("d.csv", "text,label\ngood,pos\nbad,neg\n , \n", r"d.csv line 4: empty value in column 'text'"),
    ("d.tsv", "text\tlabel\ngood\tpos\n\t\nbad\tneg\n", r"d.tsv line 3: empty value in column 'text'"),
    ("d.csv", 'text\ngood\n""\n', r"d.csv line 3: empty value in column 'text'"),
])
def test_a_row_of_empty_fields_is_refused_naming_file_line_and_column(tmp_path, name, text,
                                                                       message):
    columns = ["text"] if text.startswith("text\n") else ["text", "label"]
    with pytest.raises(UsageError, match=message):
        read_table(write(tmp_path, name, text), columns)


def test_blank_lines_are_still_skipped_and_lines_still_count_them(tmp_path):
    # an empty line and a line of spaces (no separator) hold no row
    csv_rows = read_table(write(tmp_path, "d.csv", "text,label\ngood,pos\n\n   \nbad,neg\n"))
    assert csv_rows == [{"text": "good", "label": "pos"}, {"text": "bad", "label": "neg"}]
    assert csv_rows.lines == [2, 5]
    tsv_rows = read_table(write(tmp_path, "d.tsv", "text\tlabel\n  \ngood\tpos\n"))
    assert tsv_rows == [{"text": "good", "label": "pos"}] and tsv_rows.lines == [3]


def test_an_empty_spreadsheet_row_above_the_header_loses_no_row(tmp_path):
    # no data row can be lost before the header: the header is the first line with text
    rows = read_table(write(tmp_path, "d.csv", ",,\nid,text,label\n1,good,pos\n"), ["text", "label"])
    assert rows == [{"text": "good", "label": "pos"}] and rows.lines == [3]


@pytest.mark.parametrize("task, header", [("classify", "text,label"),
                                          ("translate", "source,target")])
def test_train_refuses_the_row_before_writing_a_run(tmp_path, capsys, task, header):
    """The reader is shared: classify's and translate's files are refused alike."""
    rows = "".join(f"word{i} more,{'ab'[i % 2]}\n" for i in range(20))
    data = write(tmp_path, "d.csv", f"{header}\n{rows},\n")
    out = tmp_path / "run"
    assert main(["train", task, "--data", str(data), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    first = header.split(",")[0]
    assert err.endswith(f"d.csv line 22: empty value in column '{first}'"), err
    assert len(err.splitlines()) == 1 and not out.exists()


# A TSV's quotes: enclosing a value (pandas, Python's csv module as Excel writes, R) or text
# (by hand, cut/paste). Each kind of file is read as its writer wrote it; a file that shows
# both kinds, or only quotes that may be either, is refused naming the line.
VALUES = ['"Hi" she said', "tab\there", "two\nlines", "plain", '5" screen', '"Hi"', "a, b",
          "a tab\tand\ntwo lines"]


def test_a_tsv_that_pandas_wrote_reads_back_its_values(tmp_path):
    pd = pytest.importorskip("pandas")
    path = tmp_path / "d.tsv"
    pd.DataFrame({"text": VALUES, "label": ["x"] * len(VALUES)}).to_csv(path, sep="\t",
                                                                       index=False)
    assert read_table(path, ["text", "label"]).column("text") == VALUES


def test_a_tsv_written_as_excel_writes_it_reads_back_its_values(tmp_path):
    import csv

    path = tmp_path / "d.tsv"
    with open(path, "w", newline="", encoding="utf-8") as f:  # Excel's "Text (Tab delimited)"
        csv.writer(f, dialect="excel-tab").writerows([["text", "label"],
                                                      *([v, "x"] for v in VALUES)])
    assert read_table(path, ["text", "label"]).column("text") == VALUES


def test_a_tsv_that_quotes_its_header_and_text_as_r_does_is_unquoted(tmp_path):
    path = write(tmp_path, "d.tsv", '"text"\t"stars"\n"Hi"\t5\n"a, b"\t4\n')
    assert read_table(path) == [{"text": "Hi", "stars": "5"}, {"text": "a, b", "stars": "4"}]


@pytest.mark.parametrize("lines", [
    ['"Hi" she said\tpos', "plain\tneg"],  # the csv module refused this one
    ['"Hi"\tpos', "plain\tneg"],  # the csv module read this one as Hi
    ['said "no"\tneg', '"Hi"\tpos', '"a, b"\tneg'],
    ['"never closed\tpos', 'ok\tneg'],
])
def test_a_tsv_written_by_hand_keeps_its_quotes(tmp_path, lines):
    path = write(tmp_path, "d.tsv", "text\tlabel\r\n" + "\r\n".join(lines) + "\r\n")
    assert read_table(path, ["text", "label"]).column("text") == [x.split("\t")[0] for x in lines]


@pytest.mark.parametrize("text, message", [
    ('text\tlabel\n"a, b"\tpos\nc\tneg\n',
     r"d.tsv line 2: value '\"a, b\"' is enclosed in quotes, and nothing in the file says"),
    ('text\tlabel\n"""Hi"" she said"\tpos\n5" screen\tneg\n',
     r"d.tsv line 3: a quote that is text, but line 2 encloses a value in quotes"),
    # a quote that is text, closed by another lines later: three rows read as one before
    ('text\tlabel\n"Hi there\tpos\nok\tneg\n5"\tpos\n',
     r"d.tsv line 2: a quote opens a value that runs to line 4 across tabs"),
])
def test_a_tsv_whose_quotes_may_mean_either_is_refused_naming_the_line(tmp_path, text, message):
    with pytest.raises(UsageError, match=message) as info:
        read_table(write(tmp_path, "d.tsv", text), ["text", "label"])
    assert "\n" not in str(info.value)


# JSON that json.loads cannot turn into text raised RecursionError or ValueError (a traceback),
# or (a lone surrogate) passed, to fail as UnicodeEncodeError once the run directory existed.
@pytest.mark.parametrize("line, message", [
    ('{"text": ' + "[" * 100000 + "]" * 100000 + ', "label": "a"}', r"line 2: JSON that cannot be read \(nested too deeply\)"),
    pytest.param('{"text": "a", "label": ' + "9" * 5000 + "}",
                 r"line 2: JSON that cannot be read \(Exceeds the limit \(4300 digits\)",
                 marks=pytest.mark.skipif(not hasattr(sys, "get_int_max_str_digits"),
                                          reason="Python without the integer digit limit")),
    ('{"text": "bad \\ud800 film", "label": "a"}', r"line 2: a lone surrogate escape"),
])
def test_json_that_is_no_text_is_refused_naming_the_line(tmp_path, line, message):
    path = write(tmp_path, "d.jsonl", '{"text": "ok \\ud83d\\ude00", "label": "b"}\n' + line + "\n")
    with pytest.raises(UsageError, match=r"--data .*d.jsonl " + message):
        read_table(path, ["text", "label"])
    # a surrogate pair is one character (an emoji): the first line alone reads
    write(tmp_path, "ok.jsonl", '{"text": "ok \\ud83d\\ude00", "label": "b"}\n')
    assert read_table(tmp_path / "ok.jsonl", ["text", "label"])[0]["text"] == "ok \U0001f600"


def test_a_long_document_is_one_value(tmp_path):
    long = "word " * 40000  # 200,000 characters: past the csv module's default field limit
    rows = read_table(write(tmp_path, "d.csv", f'text,label\n"{long}",a\nshort,b\n'))
    assert rows.column("text") == [long, "short"]
