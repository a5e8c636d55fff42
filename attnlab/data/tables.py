"""Readers for users' own data files: CSV, TSV, JSON Lines, Parquet and Hugging Face datasets
directories, with named columns.

``read_table(path, columns=["text", "label"])`` returns the rows as a list of dicts holding the
named columns (all strings; a column named in ``lists`` may hold a list of strings instead). Every problem is a ``UsageError`` whose one-line message names the
flag, the file and — where there is one — the column and line, e.g.

    --data reviews.csv line 7: not valid UTF-8 (byte 0xff at column 12)
    --data reviews.csv: no column 'label' (columns: text, sentiment)

The file type comes from the extension: ``.csv``; ``.tsv`` / ``.tab`` (whose quotes may be text:
``attnlab.data.tsv_quoting``); ``.jsonl`` / ``.ndjson``
(one JSON object per line); ``.parquet``. A directory is a Hugging Face datasets directory
(``Dataset.save_to_disk``; one split of a ``DatasetDict`` is its subdirectory, ``DIR/train``),
read by ``attnlab.data.columnar``. ``file_format`` is the one place the kind is decided. Text is
UTF-8 (a byte-order mark is allowed). Line numbers are the file's physical lines, counting from
1 (the header is line 1 of a CSV); a columnar file has rows instead, counting from 1
(``place`` words a position either way).

Nothing is read silently wrong ("Trust: no silent wrong result"): a column named twice in the
header (or a key twice in one JSON object) is an error, not "the first one wins" (csv) or "the
last one wins" (``json.loads``); a quote that is never closed is an error, where Python's csv
module would read the rest of the file into one value; a directory, a symbolic-link loop, a
UTF-16 file and an unreadable file are named as such. The file is read once, and
``Table.sha256`` is the digest of exactly the bytes read, so a caller can tell whether the file
it recorded (``attnlab.runs.record_data_files``) is the one it used.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
from collections.abc import Collection, Iterator
from itertools import chain
from pathlib import Path

from ..errors import UsageError
from ..paths import not_found, refuse_stream
from .headers import check_unique, missing_columns

__all__ = ["read_table", "read_bytes", "check_unique", "check_digest", "Table", "FORMATS",
           "COLUMNAR", "file_format", "place", "places", "KINDS", "parse_json_line", "refuse_utf16",
           "refuse_gzip", "decode_utf8", "decode_text", "read_whole_as_text", "RowsFile",
           "table_chunks", "text_lines", "same_both_readings", "CHUNK_ROWS"]

FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
           ".parquet": "parquet"}
_FIELD_LIMIT = 2**31 - 1  # the largest csv.field_size_limit takes on every platform (a C long)
# rows a reader or a command holds at a time (predict's inputs and their answers, the rows
# evaluate scores): what they hold grows with it, not with the file
CHUNK_ROWS = 8192
COLUMNAR = ("parquet", "datasets")  # the formats ``attnlab.data.columnar`` reads, by rows
KINDS = "a .csv, .tsv, .jsonl or .parquet file or a Hugging Face datasets directory"


def file_format(path: str | Path) -> str | None:
    """The kind of data file ``path`` is: a value of ``FORMATS`` (by its extension), or
    ``"datasets"`` for a directory; None for an unknown extension."""
    path = Path(path)
    return "datasets" if path.is_dir() else FORMATS.get(path.suffix.lower())


def read_whole_as_text(path: str | Path, name: str, reader: str, tokenizer: str = ""
                       ) -> str | None:
    """The refusal of a table of rows (.csv, .tsv, .jsonl: not ``COLUMNAR``) given to a
    ``reader`` that reads a file whole, as text (``train lm --data``): its header or keys,
    separators and every column (the labels) would become the corpus, unsaid. None for any
    other file. ``name`` is how the message names the file (``--data r.csv``); ``tokenizer``
    is put in the prepare command it gives (`` --tokenizer DIR``, for a run with --init).

    Examples:
        >>> read_whole_as_text("notes.txt", "notes.txt", "train lm") is None
        True
        >>> read_whole_as_text("r.csv", "--data r.csv", "train lm")[:60]
        '--data r.csv is a table (.csv), and train lm reads such a fi'
    """
    kind = file_format(path)
    if kind is None or kind in COLUMNAR:
        return None
    return (f"{name} is a table ({Path(path).suffix}), and {reader} reads such a file whole, "
            f"as text: its header or keys, separators and every column would be the corpus; "
            f"prepare its texts first (attnlab prepare {path} --text-column NAME{tokenizer} "
            f"--out CORPUS, then give --data CORPUS), or rename it .txt to read it whole")


def place(path: str | Path, number: int) -> str:
    """Where row ``number`` of a data file is, in its own terms: "line 7" of a text file (as
    ``Table.lines`` counts), "row 7" of a Parquet file or datasets directory."""
    return places(path, [number])[0]


def places(path: str | Path, numbers) -> list[str]:
    """``place`` of each of ``numbers``, the file's kind read once (a file system call per row
    cost more than reading a large table's rows)."""
    unit = "row" if file_format(path) in COLUMNAR else "line"
    return [f"{unit} {number}" for number in numbers]


class Table(list):
    """A list of rows (dicts of column → str, or list of str in a ``lists`` column) that also
    knows where each row came from.

    Attributes:
        path: the file read.
        columns: the columns kept, in order.
        lines: ``lines[i]`` is the line number of row i in the file (for error messages).
        sha256: the SHA-256 of the bytes read (hex), to compare with a recorded digest.
    """

    def __init__(self, rows, *, path: Path, columns: list[str], lines: list[int],
                 sha256: str = "") -> None:
        super().__init__(rows)
        self.path, self.columns, self.lines, self.sha256 = path, columns, lines, sha256

    def column(self, name: str) -> list[str]:
        """Every row's value of one column."""
        return [row[name] for row in self]


def read_table(path: str | Path, columns: list[str] | None = None, *, what: str = "--data",
               format: str | None = None, allow_empty_values: bool | Collection[str] = False,
               lists: tuple[str, ...] = (), spelled: bool = False) -> Table:
    """Read a CSV, TSV or JSONL file into a list of rows.

    Args:
        path: the file.
        columns: the columns every row must have (and the only ones kept); ``None`` keeps all
            the header's columns (CSV/TSV) or the first row's keys (JSONL).
        what: the flag the file came from, to start error messages (``"--test"``).
        format: ``"csv"``, ``"tsv"`` or ``"jsonl"``; default from the extension.
        allow_empty_values: accept empty strings in every column (True), or in the columns
            it names (a column whose own rule reads it: --multi-label's label, which
            ``parse_label`` reads as the empty label set).
        lists: columns where a row may hold a list of values instead of one (--multi-label's
            labels): a JSON Lines list, or a Parquet or datasets list column; the row then
            holds a list of str, each item spelled as a value of the column would be.
            Emptiness is the caller's to check (an empty list is not an empty value).
        spelled: a JSON Lines decimal is the text the line has (``1e2``, ``2.50``), not the
            one Python's float gives (``100.0``, ``2.5``; the default, as runs recorded it).

    Returns:
        A ``Table``: a list of dicts ``{column: str}`` (or ``list[str]``, see ``lists``) with
        ``.lines`` and ``.path``.

    Raises:
        UsageError: missing file, a directory or a symbolic-link loop, unknown extension,
            undecodable bytes (file and line), empty file, no data rows, missing or repeated
            column (named; also when ``columns`` names one twice), an unclosed quote, a
            malformed row or an empty value (file and line); a Parquet file or datasets
            directory that cannot be read, a DatasetDict (or a split it lacks), a column that
            does not hold text or numbers, a null (``attnlab.data.columnar``).

    Examples:
        >>> _ = Path("reviews.csv").write_text("text,label,stars\\nLoved it,pos,5\\nMeh,neg,2\\n")
        >>> rows = read_table("reviews.csv", columns=["text", "label"])
        >>> rows[0]
        {'text': 'Loved it', 'label': 'pos'}
    """
    path = Path(path)
    fmt = _found_format(path, format, what)
    where = f"{what} {path}"
    if columns is not None:
        check_unique(columns, what="the columns asked for", where=where)
    if fmt in COLUMNAR:
        return _read_columnar(path, columns, where, allow_empty_values, lists)
    data = read_bytes(path, what=what)
    text = _decode(data, where)
    if not text.strip():
        raise UsageError(f"{where}: the file is empty")
    if fmt == "jsonl":
        rows, lines, columns = _read_jsonl(text, columns, where, lists, spelled)
    else:
        rows, lines, columns = _read_delimited(text, columns, where, fmt)
    if not rows:
        raise UsageError(f"{where}: the file has no data rows")
    _no_empty_values(rows, lines, _checked(columns, allow_empty_values), where)
    return Table(rows, path=path, columns=columns, lines=lines,
                 sha256=hashlib.sha256(data).hexdigest())


def table_chunks(path: str | Path, columns: list[str], *, what: str = "--data",
                 lists: tuple[str, ...] = (), spelled: bool = False,
                 allow_empty_values: bool | Collection[str] = False,
                 rows: int = CHUNK_ROWS) -> Iterator[Table]:
    """``read_table``'s rows of ``columns``, ``rows`` at a time, the file read as they come
    (``RowsFile``, which reads a TSV whole only where its head leaves its quotes undecided; a
    Parquet file or datasets directory a batch at a time): each chunk a ``Table`` of its rows
    and their lines (a Parquet file's rows), its ``sha256`` the digest of the bytes read so
    far, the file's once the last chunk is out. ``UsageError`` as ``read_table``'s (with its
    ``allow_empty_values``), each once its row is read.

    Examples:
        >>> _ = Path("votes.csv").write_text("text,label\\nyes,a\\nno,b\\nmaybe,a\\n")
        >>> [(chunk.column("text"), chunk.lines) for chunk in table_chunks(
        ...     "votes.csv", ["text", "label"], rows=2)]
        [(['yes', 'no'], [2, 3]), (['maybe'], [4])]
    """
    path = Path(path)
    fmt = _found_format(path, None, what)
    where = f"{what} {path}"
    check_unique(columns, what="the columns asked for", where=where)
    if fmt in COLUMNAR:
        from .columnar import ColumnarFile

        source, unit = ColumnarFile(path, columns, where, maybe_lists=lists), "row"
        numbered = ((first + i, dict(zip(source.columns, values)))
                    for first, batch in source.batches(rows)
                    for i, values in enumerate(zip(*(batch[c] for c in source.columns))))
    else:
        source, unit = RowsFile(path, columns, where, lists=lists, spelled=spelled,
                                whole_if_undecided=True), "line"
        numbered = source.rows()
    held, lines, seen = [], [], False
    checked = _checked(columns, allow_empty_values)
    for line, row in chain(numbered, [(None, None)]):
        if line is not None:
            for c in checked:
                if isinstance(row[c], str) and not row[c].strip():
                    raise UsageError(f"{where} {unit} {line}: empty value in column {c!r}")
            held.append(row)
            lines.append(line)
        if held and (len(held) == rows or line is None):
            seen = True
            yield Table(held, path=path, columns=list(columns), lines=lines,
                        sha256=source.sha256)
            held, lines = [], []
    if not seen:
        raise UsageError(f"{where}: the file has no data rows")


def _found_format(path: Path, format: str | None, what: str) -> str:
    """The file's format (``format``, else from its name); ``UsageError`` first when the file
    is missing (the name may only be mistyped), then when its type is unknown."""
    fmt = format or file_format(path)
    if not path.exists() and not path.is_symlink():
        from .columnar import split_hint

        split_hint(path, what)  # DIR/test of a DatasetDict without a test split
        raise not_found(what, path)
    refuse_stream(path, what)  # before its name: <(...) is /dev/fd/63, of no file type
    if fmt is None:
        raise UsageError(f"{what} {path}: unknown file type {path.suffix or '(none)'!r}; use "
                         f"{', '.join(FORMATS)} or a Hugging Face datasets directory")
    return fmt


def _checked(columns, allowed: bool | Collection[str]) -> list[str]:
    """The columns whose empty values ``read_table`` refuses (``allowed``: its
    ``allow_empty_values``)."""
    if allowed is True:
        return []
    return [c for c in columns if not (allowed and c in allowed)]


def _no_empty_values(rows: list[dict[str, str]], lines: list[int], columns, where: str) -> None:
    """``UsageError`` naming the file, line and column of the first empty (or blank) value."""
    for row, line in zip(rows, lines):
        for c in columns:
            if isinstance(row[c], str) and not row[c].strip():
                raise UsageError(f"{where} line {line}: empty value in column {c!r}")


def _read_columnar(path: Path, columns, where: str, allow_empty_values: bool | Collection[str],
                   lists: tuple[str, ...]) -> Table:
    """``read_table`` of a Parquet file or datasets directory (``attnlab.data.columnar``): the
    same rows of strings (lists of them in a list column of ``lists``), numbered by row."""
    from .columnar import ColumnarFile

    source = ColumnarFile(path, columns, where, maybe_lists=lists)
    rows: list[dict[str, str]] = []
    checked = _checked(source.columns, allow_empty_values)
    for first, batch in source.batches():
        values = [batch[c] for c in source.columns]
        for i, row in enumerate(zip(*values)):
            for c, v in zip(source.columns, row):
                if c in checked and isinstance(v, str) and not v.strip():
                    raise UsageError(f"{where} row {first + i}: empty value in column {c!r}")
            rows.append(dict(zip(source.columns, row)))
    if not rows:
        raise UsageError(f"{where}: no data rows")
    return Table(rows, path=path, columns=source.columns, lines=list(range(1, len(rows) + 1)),
                 sha256=source.sha256)


def read_bytes(path: str | Path, *, what: str = "--data") -> bytes:
    """The bytes of a data file, read once; ``UsageError`` naming the file (and ``what``, its
    flag) when it is missing, a directory, a symbolic-link loop, unreadable, or a pipe or
    device (``refuse_stream``)."""
    path = Path(path)
    refuse_stream(path, what)
    try:
        return path.read_bytes()
    except OSError as e:
        raise _unreadable(e, path, what) from None


def _unreadable(e: OSError, path: Path, what: str) -> UsageError:
    """The ``UsageError`` of a data file that could not be opened or read (``read_bytes``)."""
    where = f"{what} {path}".strip()
    if isinstance(e, FileNotFoundError):
        if path.is_symlink():
            return UsageError(f"{where}: a symbolic link to a file that does not exist "
                              f"({os.readlink(path)})")
        return not_found(what, path)
    if isinstance(e, IsADirectoryError):
        return UsageError(f"{where} is a directory; give a data file")
    # ELOOP (a link loop), EACCES, EIO, ...
    return UsageError(f"{where}: cannot read the file ({e.strerror or e})")


# how much of a TSV decides how its quotes are read when it is read row by row (``RowsFile``)
TSV_HEAD_CHARS = 1 << 22


class RowsFile:
    """A CSV, TSV or JSON Lines file read row by row as its lines come, never whole, so that a
    file larger than memory can be read (``attnlab prepare``'s --text-column): the rows, rules
    and messages of ``read_table``, each line decoded (and hashed) as it is read.

    A TSV's quotes are decided (``tsv_quoting``) on its first ``TSV_HEAD_CHARS`` characters,
    ended where a record ends (``_tsv_head``: never inside a quoted value); where none of those
    starts a value of ``columns`` with a quote, a later value that starts with one is refused
    naming its line (before its fields are counted), not read one way or the other unsaid;
    with ``whole_if_undecided``, the file's quotes are then decided as ``read_table`` decides
    them, on the whole file (read whole once, for this), and the rows read on from that line.
    Lines end as ``read_table``'s do: at "\\n", "\\r\\n" or a lone "\\r" (``_cr_lines``).

    Args:
        path: the file.
        columns: the columns to read.
        where: how messages start (``"reviews.csv"``, ``"--data reviews.csv"``).
        hint: ends the message of a missing column (``"; name it with --text-column"``).
        texts: columns whose JSON values must be strings (a number is refused, naming the line).
        lists, spelled: as ``read_table``'s.
        whole_if_undecided: a late quote in a TSV is decided on the whole file, not refused.

    Attributes:
        sha256: the SHA-256 (hex) of the bytes read, complete once ``rows()`` is.
    """

    def __init__(self, path: str | Path, columns: list[str], where: str, hint: str = "", *,
                 texts: tuple[str, ...] = (), lists: tuple[str, ...] = (),
                 spelled: bool = False, whole_if_undecided: bool = False) -> None:
        self.path, self.columns, self.where = Path(path), list(columns), where
        self.hint, self.texts, self.lists, self.spelled = hint, texts, lists, spelled
        self.whole_if_undecided = whole_if_undecided
        self._hash = hashlib.sha256()

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()

    def rows(self) -> Iterator[tuple[int, dict[str, str]]]:
        """(line, row) of each data row, as ``read_table`` numbers them."""
        try:
            yield from self._rows(None)
        except _Undecided as late:  # whole_if_undecided: read_table's rule, on the whole file
            text = _decode(read_bytes(self.path, what=""), self.where)
            quoting = _delimited_options(text, self.where, "tsv")["quoting"]
            del text  # not held while the rows are read again
            self._hash = hashlib.sha256()  # the bytes read again, from the start
            # the rows before ``late.line`` start no value with a quote: both readings agree
            yield from ((line, row) for line, row in self._rows(quoting) if line >= late.line)

    def _rows(self, quoting: int | None) -> Iterator[tuple[int, dict[str, str]]]:
        """``rows``, a TSV's quotes read as ``quoting`` says (None: as its head decides)."""
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed below
        except OSError as e:
            raise _unreadable(e, self.path, "") from None
        with f:
            lines = self._lines(f)
            if file_format(self.path) == "jsonl":
                yield from _jsonl_rows(lines, self.columns, self.where, self.lists,
                                       hint=self.hint, texts=self.texts, spelled=self.spelled)
                return
            yield from self._delimited((text for _, text in lines), quoting)

    def _lines(self, f) -> Iterator[tuple[int, str]]:
        """(number, text) of each line of the open file, hashed and decoded as it comes."""
        return _numbered_lines(f, self._hash, self.path, self.where, "")

    def _delimited(self, lines: Iterator[str], quoting: int | None
                   ) -> Iterator[tuple[int, dict[str, str]]]:
        fmt = file_format(self.path)
        lines = _cr_lines(lines)
        if quoting is not None:  # decided on the whole file
            yield from _delimited_rows(lines, self.columns, self.where,
                                       {"delimiter": "\t", "quoting": quoting}, self.hint)
            return
        head, decides, cut = _tsv_head(lines) if fmt == "tsv" else ([], 0, False)
        shown = "".join(head[:decides])
        options = _delimited_options(shown, self.where, fmt)
        # read whole, or quotes that enclose values: a later quote is read as the head's are
        decided = not cut or options.get("quoting") != csv.QUOTE_NONE

        def check(line: int, values: list[str]) -> None:  # before a row's fields are counted
            nonlocal decided
            if not decided and any(v.startswith('"') for v in values):
                if line > decides and self.whole_if_undecided:
                    raise _Undecided(line)
                if line > decides:
                    raise UsageError(
                        f"{self.where} line {line}: a value starts with a quote, and none did in "
                        f"the first {min(len(shown), TSV_HEAD_CHARS):,} characters, which "
                        f"decide whether the file's quotes enclose values or are text; save it "
                        f"as .csv")
                decided = True  # the head's quotes are text

        yield from _delimited_rows(chain(head, lines), self.columns, self.where, options,
                                   self.hint, None if decided else check)


def text_lines(path: str | Path, hasher, *, what: str = "--data") -> Iterator[tuple[int, str]]:
    """(number, text) of each line of the text file ``path`` (its "\\n" kept), read as they
    come, never whole: each line's bytes added to ``hasher`` (a ``hashlib`` object, the file's
    digest once the last line is out) and decoded, with ``read_bytes``' and ``read_table``'s
    messages (a pipe, a missing file, bytes that are not UTF-8: the line and column).

    Examples:
        >>> _ = Path("two.txt").write_bytes(b"\\xef\\xbb\\xbfone\\ntwo\\n")
        >>> list(text_lines("two.txt", hashlib.sha256()))
        [(1, 'one\\n'), (2, 'two\\n')]
    """
    path = Path(path)
    refuse_stream(path, what)
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as e:
        raise _unreadable(e, path, what) from None
    with f:
        yield from _numbered_lines(f, hasher, path, f"{what} {path}", what)


def _numbered_lines(f, hasher, path: Path, where: str, what: str) -> Iterator[tuple[int, str]]:
    """(number, text) of each line of the open binary file ``f``, hashed and decoded as it
    comes (``text_lines``, ``RowsFile``)."""
    try:
        for number, raw in enumerate(f, start=1):
            hasher.update(raw)
            yield number, _decode(raw, where, number)
    except OSError as e:  # EIO, ...
        raise _unreadable(e, path, what) from None


class _Undecided(Exception):
    """A value of a TSV read row by row starts with a quote at ``line``, past the head that
    decided its quotes (``RowsFile``'s ``whole_if_undecided``)."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


def _cr_lines(lines: Iterator[str]) -> Iterator[str]:
    """``lines`` (split at "\\n") split at each lone carriage return too, as ``read_table``'s
    ``io.StringIO(text, newline="")`` splits the text it gives the csv module: a file whose
    lines end in "\\r" alone (classic Mac OS) is read as it reads it."""
    for line in lines:
        if "\r" in line:
            yield from filter(None, _LONE_CR.split(line))
        else:
            yield line


_LONE_CR = re.compile(r"(?<=\r)(?!\n)")  # the place after a carriage return that ends a line


def _tsv_head(lines: Iterator[str]) -> tuple[list[str], int, bool]:
    """The first lines of a TSV read row by row (``RowsFile``), whose first ``decides`` decide
    its quotes: at least ``TSV_HEAD_CHARS`` characters, ending where a record ends (a line end
    outside a quoted value, read as a quoting program writes it), so that a value running over
    lines is judged whole, as ``read_table`` judges the file. A quote still open after twice
    ``TSV_HEAD_CHARS`` leaves its record out. Returns (lines, decides, whether the file goes
    on: ``cut``); the whole file's lines when it is shorter."""
    head: list[str] = []
    size, decides, quoted = 0, 0, False
    for line in lines:
        head.append(line)
        size += len(line)
        quoted = _quote_open(line, quoted)
        if not quoted:
            decides = len(head)
        if size >= TSV_HEAD_CHARS and not quoted or size >= 2 * TSV_HEAD_CHARS:
            return head, decides, True
    return head, len(head), False


def _quote_open(line: str, quoted: bool) -> bool:
    """Whether a quoted value is open at the end of one line of a TSV, read as the csv
    module's QUOTE_MINIMAL reads it (``quoted``: whether one was open at its start): a quote
    that starts a field opens one; inside it, a doubled quote is a quote, a lone one closes."""
    at = 0
    while True:
        if quoted:
            at = line.find('"', at)
            if at < 0:
                return True
            if line.startswith('"', at + 1):
                at += 2
                continue
            quoted, at = False, line.find("\t", at + 1)  # the field's rest is not quoted
            if at < 0:
                return False
            at += 1
        elif line.startswith('"', at):
            quoted, at = True, at + 1
        else:  # to the next field that starts with a quote
            at = line.find('\t"', at)
            if at < 0:
                return False
            at += 1


def check_digest(path, digest: str, recorded: str | None, *, what: str) -> None:
    """Refuse rows read from a file whose bytes are not the ones a run recorded.

    ``attnlab.runs.record_data_files`` hashes a data file when a run starts, and the run
    reads it (again) later: in ``--resume``, in ``evaluate``, or just after the check. If the
    file changed in between, the rows just read are not the ones the digest vouches for.

    Args:
        path: the file, for the message.
        digest: the SHA-256 of the bytes read (``Table.sha256``).
        recorded: the digest in config.yaml's ``data_sha256`` (None: nothing recorded yet).
        what: the file's flag, to start the message.
    """
    from ..runs import digest_holds

    if recorded and not digest_holds(path, digest, recorded):
        raise UsageError(f"{what} {path} changed since this run recorded it (its SHA-256 "
                         f"differs from config.yaml's data_sha256), so the rows read now are not "
                         f"the ones the run checked; put the file back or start a new run")


def same_both_readings(path, first: str, second: str, *, what: str = "--data",
                       command: str = "evaluate") -> None:
    """``UsageError`` when the digests of two readings of ``path`` (a first pass that checks
    every row, a later one that scores or answers them) differ: the rows scored are not the
    rows checked."""
    if first != second:
        raise UsageError(f"{what} {path} changed while {command} read it (its SHA-256 differs "
                         f"between its readings); {command} it again once it is written")


def refuse_utf16(head: bytes, where: str) -> None:
    """UsageError when a file's first bytes ``head`` are a UTF-16 byte-order mark: what Excel's
    and Notepad's "Unicode text" writes, which is no UTF-8."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise UsageError(f"{where}: the file is UTF-16 (it starts with a UTF-16 byte-order "
                         f"mark); save it as UTF-8")


def refuse_gzip(head: bytes, where: str) -> None:
    """UsageError when a file's first bytes ``head`` are gzip's magic bytes: a compressed file
    (``notes.txt.gz``), whose bytes are no text."""
    if head.startswith(b"\x1f\x8b"):
        raise UsageError(f"{where} is gzip-compressed, not text; decompress it first "
                         f"(gunzip -k FILE) and give the text file")


# a NUL byte this near the start says binary or UTF-16 without its mark (both show one in
# their first bytes); further in, it is a stray character of a text (scraped dumps hold them)
NUL_HEAD = 1 << 16


def decode_utf8(decoder, raw: bytes, read: int, where: str) -> str:
    """``raw``, the bytes of a text file after its first ``read``, decoded by ``decoder`` (a
    ``codecs`` incremental UTF-8 decoder; ``raw`` b"" at the end of the file), a byte-order
    mark at the file's start dropped. ``UsageError`` starting with ``where`` and naming the
    byte of the file when they are UTF-16 or not UTF-8, or hold a NUL byte in the file's first
    ``NUL_HEAD`` bytes (binary, or UTF-16 without its mark, whose every other byte is NUL and
    would decode as "valid" UTF-8); a NUL further in is a character of the text."""
    if read == 0:
        refuse_utf16(raw, where)
        refuse_gzip(raw, where)
    start = read - len(decoder.getstate()[0])  # the byte where the text decoded here starts
    try:
        text = decoder.decode(raw, final=not raw)
    except UnicodeDecodeError as e:
        raise UsageError(f"{where} is not UTF-8 text ({e.reason} at byte "
                         f"{start + e.start})") from None
    if start < NUL_HEAD and "\0" in text:
        at = start + len(text[:text.index("\0")].encode("utf-8"))
        if at < NUL_HEAD:
            raise UsageError(f"{where} holds a NUL byte at byte {at}: a binary file, or UTF-16 "
                             f"text without a byte-order mark; give UTF-8 text")
    return text[1:] if start == 0 and text.startswith("\ufeff") else text


def decode_text(data: bytes, where: str, line: int = 1) -> str:
    """UTF-8 text of ``data``; the error names the line and column of the first bad byte
    (``WHERE line N: ...``). ``data`` may be one line of a file read line by line
    (``RowsFile``): ``line`` is its number; only the file's first line may start with a
    byte-order mark (dropped).

    Examples:
        >>> decode_text("café".encode(), "--data x.csv")
        'café'
    """
    first = line == 1
    if first:
        refuse_utf16(data, where)
        refuse_gzip(data, where)
    try:
        return data.decode("utf-8-sig" if first else "utf-8")
    except UnicodeDecodeError as e:
        start = e.start + (3 if first and data.startswith(b"\xef\xbb\xbf") else 0)
        line += data.count(b"\n", 0, start)
        column = start - (data.rfind(b"\n", 0, start) + 1) + 1
        raise UsageError(f"{where} line {line}: not valid UTF-8 (byte 0x{data[start]:02x} at "
                         f"column {column}); save the file as UTF-8") from None


_decode = decode_text  # (the name its callers in attnlab use)


def _read_delimited(text: str, columns, where: str, fmt: str):
    rows, lines = [], []
    for line, row in _delimited_rows(io.StringIO(text, newline=""), columns, where,
                                     _delimited_options(text, where, fmt)):
        rows.append(row)
        lines.append(line)
    return rows, lines, list(rows[0]) if rows else []


def _delimited_options(text: str, where: str, fmt: str) -> dict:
    """The csv module's options of a CSV, or of a TSV whose quotes ``text`` (the file, or its
    head: ``RowsFile``) shows (they may be text: ``tsv_quoting``, decided once for the file)."""
    if fmt != "tsv":
        return {"delimiter": ","}
    from .tsv_quoting import quoting

    return {"delimiter": "\t", "quoting": quoting(text, where)}


def _delimited_rows(lines, columns, where: str, options: dict, hint: str = "", check=None):
    """(line, row) of each data row of a CSV or TSV given as its ``lines`` (an iterable of
    str, each with its line end), read as it comes. strict: a quote that is never closed, or
    text after a closing quote, is an error; without it Python's csv module reads the rest of
    the file into one value and says nothing. ``hint`` ends the message of a missing column;
    ``check(line, values)``, where given, sees each record's values of ``columns`` first."""
    # A value may be as long as the file (a long document): the csv module's default limit of
    # 131,072 characters refused one, and ``strict`` already names a quote never closed. The
    # limit is the process's; only ever raised here.
    csv.field_size_limit(max(csv.field_size_limit(), _FIELD_LIMIT))
    reader = csv.reader(lines, strict=True, **options)
    start = 1  # the line where the current record starts
    try:
        header = next(reader)
        # before the header no row is lost: a line with no text (blank, or separators
        # only, as a spreadsheet writes an empty row) is skipped
        while not any(h.strip() for h in header):
            start = reader.line_num + 1
            header = next(reader)
    except StopIteration:
        raise UsageError(f"{where}: the file is empty") from None
    except csv.Error as e:
        raise _quote_error(e, where, start, reader.line_num) from None
    header = [h.strip() for h in header]
    columns = list(columns) if columns is not None else [h for h in header if h]
    missing_columns(columns, header, where, hint)
    check_unique(header, what="the header", where=f"{where} line {start}", only=columns)
    index = {c: header.index(c) for c in columns}
    start = reader.line_num + 1
    try:
        for record in reader:
            if not _blank_line(record):
                if check:
                    check(start, [record[i] for i in index.values() if i < len(record)])
                if len(record) != len(header):
                    raise UsageError(f"{where} line {start}: {len(record)} fields, but the header "
                                     f"has {len(header)}")
                if _repeats_header(record, header):
                    raise UsageError(f"{where} line {start}: this row repeats the header "
                                     f"({', '.join(header)}), as joining two files that each "
                                     f"have one writes it; it would be read as a row of data: "
                                     f"delete it")
                yield start, {c: record[i] for c, i in index.items()}
            start = reader.line_num + 1
    except csv.Error as e:
        raise _quote_error(e, where, start, reader.line_num) from None


def _repeats_header(record: list[str], header: list[str]) -> bool:
    """Whether a data row is the header again (``cat a.csv b.csv``; the second file's
    byte-order mark, if any, now inside the text), which would be a row whose text is "text"
    and whose label is "label": a class nobody meant, trained on without a word."""
    return [f.lstrip("\ufeff").strip() for f in record] == header


def _blank_line(record: list[str]) -> bool:
    """Whether a CSV/TSV record (as the csv module reads one line) is a blank line, which the
    reader skips: nothing on the line, or white space only (one field of spaces).

    A line of separators only (``,,``; in a TSV, tabs), as a spreadsheet writes an empty row,
    is not blank, nor is ``""``: it is a row whose values are empty, refused as any empty value
    is (``_no_empty_values`` names its line and first column). Skipping it would change the
    number of rows without a word.

    Examples:
        >>> _blank_line([]), _blank_line(["  "]), _blank_line(["", "", ""]), _blank_line([""])
        (True, True, False, False)
    """
    return not record or (len(record) == 1 and record[0].isspace())


def _quote_error(e: csv.Error, where: str, start: int, end: int) -> UsageError:
    """The csv module's error, as a message naming the line where the bad record starts."""
    if "unexpected end of data" in str(e):
        return UsageError(f"{where} line {start}: a quote opened in this record is never closed, "
                          f"so the rest of the file would be read as one value; close it (write "
                          f"\"\" for a quote inside a quoted value)")
    if "expected after" in str(e):
        runs_on = f" (the quoted value runs on to line {end})" if end != start else ""
        return UsageError(f"{where} line {start}: text follows a closing quote{runs_on}; quote "
                          f"the whole value and write \"\" for a quote inside it")
    return UsageError(f"{where} line {end}: {e}")


def _read_jsonl(text: str, columns, where: str, lists: tuple[str, ...] = (),
                spelled: bool = False):
    rows, lines = [], []
    # not splitlines: U+2028 is no line end
    numbered = enumerate(text.split("\n"), start=1)
    for number, row in _jsonl_rows(numbered, columns, where, lists, spelled=spelled):
        rows.append(row)
        lines.append(number)
    return rows, lines, list(rows[0]) if rows else list(columns or [])


def _jsonl_rows(numbered_lines, columns, where: str, lists: tuple[str, ...] = (), *,
                hint: str = "", texts: tuple[str, ...] = (), spelled: bool = False):
    """(line, row) of each object of a JSON Lines file given as (number, line) pairs, read as
    they come. ``texts``: columns whose every value must be a JSON string (a corpus' texts:
    a number or null there is refused naming the line); ``hint`` ends the message of a
    missing field; ``spelled``: decimals as the line writes them (``read_table``)."""
    for number, line in numbered_lines:
        if not line.strip():
            continue
        # (its line end dropped: json would count it, and name column 1 of a line after it)
        obj = parse_json_line(line.rstrip("\n"), f"{where} line {number}", spelled=spelled)
        if not isinstance(obj, dict):
            raise UsageError(f"{where} line {number}: expected a JSON object, got "
                             f"{type(obj).__name__}")
        if columns is None:
            columns = list(obj)
        twice = [c for c in obj.duplicates if c in columns]
        if twice:  # json.loads alone would keep the last value and say nothing
            raise UsageError(f"{where} line {number}: field {twice[0]!r} appears twice in one "
                             f"object; keep one so it is clear which value to use")
        missing = [c for c in columns if c not in obj]
        if missing:
            raise UsageError(f"{where} line {number}: no field {missing[0]!r} "
                             f"(fields: {', '.join(obj) or 'none'}){hint}")
        yield number, _json_row(obj, columns, f"{where} line {number}", lists, texts)


def _json_row(obj: dict, columns, where: str, lists: tuple[str, ...], texts: tuple[str, ...]
              ) -> dict:
    """The row of the ``columns`` of one JSON object (``where``: its file and line)."""
    row = {}
    for c in columns:
        value = obj[c]
        if c in texts and not isinstance(value, str):
            raise UsageError(f"{where}: field {c!r} must be a string (a text), got "
                             f"{json.dumps(value)[:40]}")
        if c in lists and isinstance(value, list) and not any(map(_not_scalar, value)):
            row[c] = _scalar_texts(value, f"{where}: field {c!r} holds")
            continue
        if _not_scalar(value):
            listed = " or a list of them" if c in lists else ""
            raise UsageError(f"{where}: field {c!r} must be a string or number{listed}, got "
                             f"{json.dumps(value)[:40]}")
        row[c] = _scalar_texts([value], f"{where}: field {c!r} is")[0]
    return row


_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # the JSON escape of a UTF-16 surrogate half


def parse_json_line(line: str, where: str, *, spelled: bool = False):
    """The value of one line of a JSON Lines file, its objects ``_Object``s (which know a key
    given twice); with ``spelled``, its decimals ``_Decimal``s (which know how the line wrote
    them: ``1e2``, not ``100.0``).

    Raises:
        UsageError: starting with ``where`` (the file and line): not valid JSON; nested too
            deeply, or an integer of more digits than Python converts (json's RecursionError
            and ValueError, tracebacks before); a lone surrogate (``"\\ud800"`` without its
            pair), which is no text: writing the run's tokenizer as UTF-8 failed on it, after
            the run directory was made.
    """
    try:
        obj = json.loads(line, object_pairs_hook=_Object,
                         parse_float=_Decimal if spelled else None)
    except json.JSONDecodeError as e:
        raise UsageError(f"{where}: not valid JSON ({e.msg}, column {e.colno})") from None
    except (RecursionError, ValueError) as e:
        problem = "nested too deeply" if isinstance(e, RecursionError) else str(e).split(":")[0]
        raise UsageError(f"{where}: JSON that cannot be read ({problem})") from None
    if _SURROGATE.search(line):  # paired halves decode to one character; a lone one stays
        try:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(f"{where}: a lone surrogate escape (such as \\ud800 without its "
                             f"pair) is not text; write the character itself") from None
    return obj


def _not_scalar(value) -> bool:
    """A JSON value that is not a string, number or boolean (an object, a list, null)."""
    return isinstance(value, (dict, list)) or value is None


def _scalar_texts(values: list, where: str) -> list[str]:
    """Each JSON string as it is, any other scalar as JSON spells it: true/1/"1" are different
    labels to a user (``attnlab.data.columnar.number_text``, as a column's numbers are spelled
    there). ``UsageError`` starting with ``where`` for NaN or an infinity (no value)."""
    if all(isinstance(v, str) for v in values):  # most values: no import to look up
        return list(values)
    from .columnar import no_value, number_text

    try:  # number_text first: a decimal that overflows (1e999) is inf, no value
        return [v if isinstance(v, str) else getattr(v, "spelling", number_text(v))
                for v in values]
    except ValueError as e:
        raise UsageError(f"{where} {no_value(e.args[0])}") from None


class _Decimal(float):
    """A JSON decimal that keeps its spelling (``spelling``): a label written ``1e2`` or
    ``2.50`` is that label, as it would be in a CSV, not ``100.0`` or ``2.5``."""

    def __new__(cls, spelling: str) -> "_Decimal":
        number = super().__new__(cls, spelling)
        number.spelling = spelling
        return number


class _Object(dict):
    """A JSON object that remembers the keys it was given more than once (``duplicates``),
    which a plain ``json.loads`` would silently collapse to the last value."""

    def __init__(self, pairs) -> None:
        super().__init__()
        self.duplicates = []
        for key, value in pairs:
            if key in self and key not in self.duplicates:
                self.duplicates.append(key)
            self[key] = value
