"""A row of only empty fields (``,,``, as a spreadsheet writes an empty row) is a row with
empty values, refused naming the file, line and column, as any empty value is; only a line with
nothing but white space on it is a blank line, which the reader skips. Before this, ``,,`` was
skipped as if it were blank, and the number of rows a run read changed without a word."""
import pytest

from attnlab.cli import main
from attnlab.data.tables import read_table
from attnlab.errors import UsageError


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


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
