"""``evaluate --data`` reads a TSV a chunk of rows at a time (``table_chunks``), its quotes
decided on its head (``TSV_HEAD_CHARS``, 4,194,304 characters). A value past the head that
started with a quote, where none did in the head, was refused ("save it as .csv") although
``train classify`` (``read_table``, which decides on the whole file) read the same file: the
quotes are now decided as ``read_table`` decides them, and the rows are ``read_table``'s. The
head is made 64 characters here so that a file of a few lines goes past it."""
import pytest

from attnlab.data import tables
from attnlab.data.tables import read_table, table_chunks

HEAD = "text\tlabel\n" + "plain words here\tpos\n" * 5


@pytest.mark.parametrize("late, text", [
    ('"Hi," she said\tneg\n', '"Hi," she said'),  # a person's quote: text
    ('"a\ttab and ""quotes"""\tneg\n', 'a\ttab and "quotes"'),  # a program's: it encloses
    ('"two\nlines"\tneg\n', "two\nlines"),  # a program's, over two lines
])
def test_a_tsv_quote_past_the_head_is_read_as_read_table_reads_the_file(tmp_path, monkeypatch,
                                                                        late, text):
    monkeypatch.setattr(tables, "TSV_HEAD_CHARS", 64)
    path = tmp_path / "big.tsv"
    path.write_text(HEAD + late + "more plain words\tpos\n")
    whole = read_table(path, ["text", "label"])
    chunks = list(table_chunks(path, ["text", "label"], rows=2))
    assert [row for chunk in chunks for row in chunk] == list(whole)
    assert [line for chunk in chunks for line in chunk.lines] == whole.lines
    assert whole.column("text")[5] == text
    assert chunks[-1].sha256 == whole.sha256  # the file's digest, though read twice


def test_a_tsv_whose_quotes_are_both_kinds_is_refused_as_read_table_refuses_it(tmp_path,
                                                                               monkeypatch):
    from attnlab.errors import UsageError

    monkeypatch.setattr(tables, "TSV_HEAD_CHARS", 64)
    path = tmp_path / "big.tsv"
    path.write_text(HEAD + '"a\ttab"\tneg\n"Hi" she said\tpos\n')
    with pytest.raises(UsageError) as whole:
        read_table(path, ["text", "label"])
    with pytest.raises(UsageError) as chunked:
        list(table_chunks(path, ["text", "label"], rows=2))
    assert str(chunked.value) == str(whole.value)
