"""``attnlab prepare`` of a CSV, TSV or JSON Lines table: the --text-column read row by row, as
a Parquet file's is, never the whole file at once; every problem one line naming the file and
the line, before anything is written."""
import hashlib
import json
import random

import pytest

from attnlab.data import tables
from attnlab.data.corpus import prepare
from attnlab.errors import UsageError

DOCS = ["the cat sat on the mat. " * 12, 'a dog, "Rex", ran far\naway. ' * 15,
        "birds fly high. " * 9]


def _csv(docs, column="text") -> str:
    quoted = ['"' + d.replace('"', '""') + '"' for d in docs]
    return f"{column},label\n" + "".join(f"{q},pos\n" for q in quoted)


def _jsonl(docs, column="text") -> str:
    return "".join(json.dumps({"id": i, column: d}) + "\n" for i, d in enumerate(docs))


def _files(tmp_path, docs):
    files = []
    for i, doc in enumerate(docs):
        files.append(tmp_path / f"doc{i}.txt")
        files[-1].write_text(doc)
    return files


@pytest.mark.parametrize("name, text", [
    ("docs.jsonl", _jsonl(DOCS[:1] + [""] + DOCS[1:])),  # a row of no text is no document
    ("docs.csv", "\ufeff" + _csv(DOCS[:1] + [""] + DOCS[1:])),  # Excel's byte-order mark
    ("docs.tsv", _csv(DOCS).replace(",pos\n", "\tpos\n").replace("text,label", "text\tlabel")),
])
def test_a_table_is_the_corpus_of_one_text_file_per_row(tmp_path, name, text):
    """Each row a document, the EOS id between rows, token for token as one text file each:
    a quoted line break and comma stay inside the text; the header, the other columns and
    the separators are no part of it."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    want = prepare(_files(tmp_path, DOCS), tmp_path / "from_files", tokenizer="word",
                   chunk_chars=64)
    meta = prepare([path], tmp_path / "from_table", tokenizer="word", chunk_chars=64)
    assert meta["sha256"] == want["sha256"]  # train.bin, val.bin and tokenizer.json
    assert meta["files_sha256"] == [hashlib.sha256(path.read_bytes()).hexdigest()]


def test_tables_mix_with_text_and_parquet_files(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = _files(tmp_path, DOCS)
    (tmp_path / "b.jsonl").write_text(_jsonl(DOCS[1:2], "body"))
    pq.write_table(pa.table({"body": DOCS[2:]}), tmp_path / "c.parquet")
    want = prepare(files, tmp_path / "from_files", tokenizer="char")
    meta = prepare([files[0], tmp_path / "b.jsonl", tmp_path / "c.parquet"],
                   tmp_path / "mixed", tokenizer="char", text_column="body")
    assert meta["sha256"] == want["sha256"]


@pytest.mark.parametrize("name, text, message", [
    ("d.jsonl", '{"body": "a"}\n', r"d.jsonl line 1: no field 'text' \(fields: body\); name it "
                                   r"with --text-column$"),
    ("d.csv", "body,label\na,b\n", r"d.csv: no column 'text' \(columns: body, label\); name it "
                                   r"with --text-column$"),
    ("d.jsonl", '{"text": "a"}\n{"text": 5}\n',
     r"d.jsonl line 2: field 'text' must be a string \(a text\), got 5$"),
    ("d.jsonl", '{"text": "a"}\n{"text": null}\n', r"d.jsonl line 2: .* got null$"),
    ("d.jsonl", '{"text": "a"}\n{"text": "b"\n{"text": "c"}\n',
     r"d.jsonl line 2: not valid JSON \(Expecting ',' delimiter, column 13\)$"),
    ("d.csv", "text,label\na,b\nc\n", r"d.csv line 3: 1 fields, but the header has 2$"),
    ("d.csv", 'text,label\n"a,b\n', r"d.csv line 2: a quote opened in this record is never "),
    ("d.tsv", "text\tlabel\na\tb\nc\td\te\n", r"d.tsv line 3: 3 fields, but the header has 2$"),
    ("d.jsonl", b'{"text": "a"}\n{"text": "\xff"}\n',
     r"d.jsonl line 2: not valid UTF-8 \(byte 0xff at column 11\); save the file as UTF-8$"),
    ("d.csv", "\ufeffa,b\n".encode("utf-16"), r"d.csv: the file is UTF-16"),
])
def test_a_bad_table_is_one_line_naming_the_file_and_line(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(UsageError, match=message) as e:
        prepare([path], tmp_path / "out", tokenizer="char")
    assert str(e.value).startswith(str(path)) and "\n" not in str(e.value)
    assert not (tmp_path / "out").exists()


def test_the_same_rows_given_twice_are_refused_by_their_digest(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(_jsonl(DOCS))
    b.write_bytes(a.read_bytes())
    with pytest.raises(UsageError, match=r"b.jsonl holds the same bytes as .*a.jsonl"):
        prepare([a, b], tmp_path / "out")


def test_a_tsv_quote_past_the_head_that_decided_its_quotes_is_refused(tmp_path, monkeypatch):
    """A TSV's quotes are decided on its head: a value past it that starts with a quote, where
    none did in the head, would be read one way or the other unsaid."""
    monkeypatch.setattr(tables, "TSV_HEAD_CHARS", 40)
    path = tmp_path / "d.tsv"
    path.write_text("text\tlabel\n" + "plain words here\tpos\n" * 5 + '"Hi," she said\tpos\n')
    with pytest.raises(UsageError, match=r"d.tsv line 7: a value starts with a quote, and none "
                                         r"did in the first 40 characters"):
        prepare([path], tmp_path / "out")
    # where the head shows quotes that enclose values, the rest is read as it says
    path.write_text('text\tlabel\n"a ""b"" c"\tpos\n' + "plain words here\tpos\n" * 5
                    + '"x ""y"""\tpos\n')
    rows = [row["text"] for _, row in tables.RowsFile(path, ["text"], str(path)).rows()]
    assert rows[0] == 'a "b" c' and rows[-1] == 'x "y"'


@pytest.mark.slow
def test_a_jsonl_corpus_is_read_row_by_row_not_whole(tmp_path):
    from tests.data.test_corpus import prepare_peak_bytes

    # rows of 2,000 characters: what a row costs to remember (some 16 bytes) is then lost
    # beside what reading the file whole would cost; with rows of 200 it was 24 kB between
    # 500 and 2,000 rows, at 2 kB of this test's limit, and a busy machine crossed it
    def peak_bytes(n_rows: int) -> int:
        rng = random.Random(n_rows)
        path = tmp_path / f"corpus{n_rows}.jsonl"
        path.write_text(_jsonl(["".join(rng.choices("abcdefgh \n", k=2000))
                                for _ in range(n_rows)]))
        return prepare_peak_bytes(path, tmp_path / f"out{n_rows}")

    peak_bytes(10)  # imports and caches first
    small, large = peak_bytes(50), peak_bytes(200)  # about 110 kB and 440 kB
    assert large < 1.2 * small + 20_000, f"peak {small} B for 50 rows, {large} B for 200"
    assert large < 440_000 / 2  # read whole, the file alone would pass this


def _texts(path) -> list[str]:
    """The texts ``attnlab prepare`` reads of a table's "text" column (``RowsFile``)."""
    return [row["text"] for _, row in tables.RowsFile(path, ["text"], str(path)).rows()]


# a value over lines and a doubled quote, as pandas' to_csv(sep="\t") writes them (review: where
# the head that decides the quotes ended inside the first, prepare read one text as two, and
# '"she said ""hi"""' with its quotes; with a second column, refused a valid file)
PANDAS_TSV = ['text\nplain words in a row of text here\n"a review that runs on and on\nand two '
              'lines"\n"she said ""hi"""\nlast one\n',
              'text\tlabel\nplain words in a row of text here\tpos\n"a review that runs\nand '
              'two lines"\tpos\n"she said ""hi"""\tneg\nlast one\tpos\n',
              'text\tlabel\n"Hi" she said\tpos\nplain\tneg\n5" screen\tpos\n']  # quotes: text


@pytest.mark.parametrize("text", PANDAS_TSV)
def test_a_tsv_is_read_as_read_table_reads_it_wherever_its_head_ends(tmp_path, monkeypatch,
                                                                     text):
    """Wherever TSV_HEAD_CHARS falls (inside a quoted value over lines too), prepare's texts
    are read_table's, value for value, or a value past the head that starts with a quote is
    refused; never read another way."""
    path = tmp_path / "d.tsv"
    path.write_text(text)
    want = tables.read_table(path, ["text"]).column("text")
    monkeypatch.setattr(tables, "TSV_HEAD_CHARS", 64)
    assert _texts(path) == want
    for size in range(1, len(text) + 2):
        monkeypatch.setattr(tables, "TSV_HEAD_CHARS", size)
        try:
            assert _texts(path) == want, size
        except UsageError as e:
            assert "a value starts with a quote, and none did in the first" in str(e), size


@pytest.mark.parametrize("value, line", [('"a\tb"', 7), ('"two\nlines"', 7)])
def test_a_quote_past_the_head_is_named_before_its_fields_are_counted(tmp_path, monkeypatch,
                                                                      value, line):
    """Read as text, a quoted value holding a tab or a line break has too many or too few
    fields: the message says why (its quote), not only how many fields (review)."""
    monkeypatch.setattr(tables, "TSV_HEAD_CHARS", 40)
    path = tmp_path / "d.tsv"
    path.write_text("text\tlabel\n" + "plain words here\tpos\n" * 5 + f"{value}\tpos\n")
    with pytest.raises(UsageError, match=rf"^{path} line {line}: a value starts with a quote, "
                                         r"and none did in the first 40 characters"):
        prepare([path], tmp_path / "out")


@pytest.mark.parametrize("name, text", [
    ("cr.csv", "text,label\rhello there,pos\rbad day,neg\r"),
    ("cr.tsv", "text\tlabel\rhello there\tpos\rbad day\tneg"),
    ("mixed.csv", 'text,label\r\n"a\rb",pos\r\nc d e,neg\n"e\r\nf g h",pos\r'),
])
def test_lines_that_end_in_a_lone_carriage_return_are_read_as_read_table_reads_them(
        tmp_path, name, text):
    """A file whose lines end in "\\r" alone (classic Mac OS, some exports): read_table read
    its rows, prepare stopped at Python's "new-line character seen in unquoted field" (review);
    a "\\r" inside a quoted value stays in it."""
    path = tmp_path / name
    path.write_bytes(text.encode())
    want = tables.read_table(path, ["text"]).column("text")
    assert _texts(path) == want and len(want) in (2, 3)
    prepare([path], tmp_path / "out", tokenizer="char")
