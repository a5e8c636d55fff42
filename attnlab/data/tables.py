"""Readers for users' own data files: CSV, TSV and JSON Lines with named columns.

``read_table(path, columns=["text", "label"])`` returns the rows as a list of dicts holding the
named columns (all strings). Every problem is a ``UsageError`` whose one-line message names the
flag, the file and — where there is one — the column and line, e.g.

    --data reviews.csv line 7: not valid UTF-8 (byte 0xff at column 12)
    --data reviews.csv: no column 'label' (columns: text, sentiment)

The file type comes from the extension: ``.csv``; ``.tsv`` / ``.tab``; ``.jsonl`` / ``.ndjson``
(one JSON object per line). Text is UTF-8 (a byte-order mark is allowed). Line numbers are the
file's physical lines, counting from 1 (the header is line 1 of a CSV).
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from ..errors import UsageError

__all__ = ["read_table", "Table", "FORMATS"]

FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


class Table(list):
    """A list of rows (dicts of column → str) that also knows where each row came from.

    Attributes:
        path: the file read.
        columns: the columns kept, in order.
        lines: ``lines[i]`` is the line number of row i in the file (for error messages).
    """

    def __init__(self, rows, *, path: Path, columns: list[str], lines: list[int]) -> None:
        super().__init__(rows)
        self.path, self.columns, self.lines = path, columns, lines

    def column(self, name: str) -> list[str]:
        """Every row's value of one column."""
        return [row[name] for row in self]


def read_table(path: str | Path, columns: list[str] | None = None, *, what: str = "--data",
               format: str | None = None, allow_empty_values: bool = False) -> Table:
    """Read a CSV, TSV or JSONL file into a list of rows.

    Args:
        path: the file.
        columns: the columns every row must have (and the only ones kept); ``None`` keeps all
            the header's columns (CSV/TSV) or the first row's keys (JSONL).
        what: the flag the file came from, to start error messages (``"--test"``).
        format: ``"csv"``, ``"tsv"`` or ``"jsonl"``; default from the extension.
        allow_empty_values: accept empty strings in the named columns.

    Returns:
        A ``Table``: a list of dicts ``{column: str}`` with ``.lines`` and ``.path``.

    Raises:
        UsageError: missing file, unknown extension, undecodable bytes (file and line), empty
            file, missing column (named), a malformed row or an empty value (file and line).

    Example:
        >>> rows = read_table("reviews.csv", columns=["text", "label"])
        >>> rows[0]
        {'text': 'Loved it', 'label': 'pos'}
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{what}: file not found: {path}")
    fmt = format or FORMATS.get(path.suffix.lower())
    if fmt not in ("csv", "tsv", "jsonl"):
        raise UsageError(f"{what} {path}: unknown file type {path.suffix or '(none)'!r}; use "
                         f"{', '.join(FORMATS)}")
    where = f"{what} {path}"
    text = _decode(path.read_bytes(), where)
    if not text.strip():
        raise UsageError(f"{where}: the file is empty")
    reader = _read_jsonl if fmt == "jsonl" else _read_delimited
    rows, lines, columns = reader(text, columns, where, "\t" if fmt == "tsv" else ",")
    if not rows:
        raise UsageError(f"{where}: the file has no data rows")
    if not allow_empty_values:
        for row, line in zip(rows, lines):
            for c in columns:
                if not row[c].strip():
                    raise UsageError(f"{where} line {line}: empty value in column {c!r}")
    return Table(rows, path=path, columns=columns, lines=lines)


def _decode(data: bytes, where: str) -> str:
    """UTF-8 text of ``data``; the error names the line and column of the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        start = e.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
        line = data.count(b"\n", 0, start) + 1
        column = start - (data.rfind(b"\n", 0, start) + 1) + 1
        raise UsageError(f"{where} line {line}: not valid UTF-8 (byte 0x{data[start]:02x} at "
                         f"column {column}); save the file as UTF-8") from None


def _missing(columns: list[str], have: list[str], where: str) -> None:
    missing = [c for c in columns if c not in have]
    if missing:
        s = "s" if len(missing) > 1 else ""
        raise UsageError(f"{where}: no column{s} {', '.join(map(repr, missing))} "
                         f"(columns: {', '.join(have) or 'none'})")


def _read_delimited(text: str, columns, where: str, delimiter: str):
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(reader)
        while not any(h.strip() for h in header):  # skip leading blank lines
            header = next(reader)
    except StopIteration:
        raise UsageError(f"{where}: the file is empty") from None
    except csv.Error as e:
        raise UsageError(f"{where} line {reader.line_num}: {e}") from None
    header = [h.strip() for h in header]
    columns = list(columns) if columns is not None else [h for h in header if h]
    _missing(columns, header, where)
    index = {c: header.index(c) for c in columns}
    rows, lines = [], []
    start = reader.line_num + 1
    try:
        for record in reader:
            if any(field.strip() for field in record):  # blank lines are skipped
                if len(record) != len(header):
                    raise UsageError(f"{where} line {start}: {len(record)} fields, but the header "
                                     f"has {len(header)}")
                rows.append({c: record[i] for c, i in index.items()})
                lines.append(start)
            start = reader.line_num + 1
    except csv.Error as e:
        raise UsageError(f"{where} line {reader.line_num}: {e}") from None
    return rows, lines, columns


def _read_jsonl(text: str, columns, where: str, _delimiter: str):
    rows, lines = [], []
    for number, line in enumerate(text.split("\n"), start=1):  # not splitlines: U+2028 is no line end
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise UsageError(f"{where} line {number}: not valid JSON ({e.msg})") from None
        if not isinstance(obj, dict):
            raise UsageError(f"{where} line {number}: expected a JSON object, got "
                             f"{type(obj).__name__}")
        if columns is None:
            columns = list(obj)
        missing = [c for c in columns if c not in obj]
        if missing:
            raise UsageError(f"{where} line {number}: no field {missing[0]!r} "
                             f"(fields: {', '.join(obj) or 'none'})")
        row = {}
        for c in columns:
            value = obj[c]
            if isinstance(value, (dict, list)) or value is None:
                raise UsageError(f"{where} line {number}: field {c!r} must be a string or "
                                 f"number, got {json.dumps(value)[:40]}")
            # JSON true/1/"1" are different labels to a user; keep JSON's spelling of scalars.
            row[c] = value if isinstance(value, str) else json.dumps(value)
        rows.append(row)
        lines.append(number)
    return rows, lines, list(columns or [])
