"""Columnar data files: Apache Parquet files and Hugging Face ``datasets`` directories.

``attnlab.data.tables`` picks the reader by the path (``tables.file_format``); this module
reads the two columnar kinds, with pyarrow alone (``datasets`` is not needed to read what
``Dataset.save_to_disk`` wrote):

- ``reviews.parquet``: a Parquet file, read one row group at a time
  (``ParquetFile.read_row_group``), converted a batch of rows at a time.
- ``DIR``, written by ``Dataset.save_to_disk(DIR)``: ``state.json`` lists the shards
  (``data-00000-of-00001.arrow``, ...), Arrow IPC stream files read batch by batch, in that order.
- ``DIR/train``: one split of a ``DatasetDict.save_to_disk(DIR)`` (DIR holds
  ``dataset_dict.json`` and one such directory per split). The split is named by its own
  directory, so the path is the one on disk and nothing new is parsed; ``DIR`` alone, or a
  split DIR lacks, is refused with the splits it has.

Values become the strings the CSV and JSONL readers give: text as it is, integers in decimal,
floats and booleans as JSON writes them (``1.5``, ``true``). A ``datasets`` ``ClassLabel``
column (integers with names, in the schema's ``huggingface`` metadata) gives the names, as a
user who wrote the labels sees them. A column read whose name the file has twice (Arrow allows
it) is refused, as a CSV header's is (``headers.check_unique``). A null, or a column of any
other type (a list, a struct, bytes, a date), is refused by name: read as text it would be a
string nobody wrote; so is a float that is NaN or infinite (``number_text``), where a value is
missing. Only where a task reads a list per row may a column hold lists, each row then a Python
list of str: tag's words and tags (``lists``) must be lists of text (or a ``datasets``
``Sequence`` of ``ClassLabel``: the names), and lists of numbers are refused; classify's
``--multi-label`` labels (``maybe_lists``) may be one value or a list per row, and a list's
items are read as a column's values are (text, numbers, class names), as the JSON Lines reader
reads a list. A null list or a null item is refused naming the column and the row.

Why the digest is taken through the open file: ``Table.sha256`` must be the digest of what was
read, so that a run can tell a changed file on ``--resume``. Each file is hashed through the
descriptor it is then read from (a file replaced by rename in between is not the one read); a
directory's digest is ``attnlab.runs.tree_digest`` over its files, as ``runs.file_digest``
computes it.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..paths import refuse_stream
from ..runs import tree_digest
from .headers import check_unique, missing_columns

__all__ = ["ColumnarFile", "open_columnar", "split_hint", "BATCH_ROWS"]

BATCH_ROWS = 8192  # rows converted to Python at a time
# An unnamed index that pandas' ``to_parquet`` (or ``Dataset.from_pandas``) stored as a column,
# as it does for any index but 0..n-1 (a filtered or shuffled frame). pandas reads it back as
# the index, not a column, as the CSV reader leaves out ``to_csv``'s nameless index column; so
# "every column" (--set-column's features) leaves it out, where it was a feature nobody chose.
_PANDAS_INDEX = re.compile(r"__index_level_\d+__")


def split_hint(path: Path, what: str) -> None:
    """``UsageError`` when the missing ``path`` is a split that a DatasetDict directory lacks
    (its parent holds ``dataset_dict.json``), listing the splits it has."""
    splits = _splits(path.parent)
    if splits is not None:
        start = f"{what} {path}".strip()
        raise UsageError(f"{start}: the DatasetDict {path.parent} has no split {path.name!r} "
                         f"(splits: {', '.join(splits) or 'none'})")


class ColumnarFile:
    """An open Parquet file or datasets directory, checked: the columns asked for exist and
    hold text or numbers. ``batches()`` then yields the rows, converted, a batch at a time;
    ``sha256`` is complete once they are all read.

    Args:
        path: the ``.parquet`` file or the directory.
        columns: the columns to read (``None``: all of them).
        where: how messages start (``"--data reviews.parquet"``).
        hint: ends the message of a missing column (``"; name it with --text-column"``).
        lists: the columns that hold a list of text per row (see the module doc).
        maybe_lists: the columns that may hold a list of values per row instead of one value.
    """

    def __init__(self, path: Path, columns: list[str] | None, where: str, hint: str = "",
                 lists: tuple[str, ...] = (), *, maybe_lists: tuple[str, ...] = ()) -> None:
        self.path, self.where = path, where
        self._digests: dict[str, str] = {}
        if path.is_dir():
            self._files = self._shards()
        else:
            self._files = [path]
        import pyarrow as pa

        self._pa = pa
        schema = self._schema()
        have = list(schema.names)
        # all of them: the columns a user wrote, not pandas' unnamed index (``_PANDAS_INDEX``)
        self.columns = list([c for c in have if not _PANDAS_INDEX.fullmatch(c)]
                            if columns is None else columns)
        missing_columns(self.columns, have, where, hint)

        # Arrow allows a name twice in one schema, where pyarrow's lookup by name fails
        check_unique(have, what="the file's columns", where=where, only=self.columns)
        names = _class_names(schema)
        self._types = {c: schema.field(c).type for c in self.columns}
        self._convert = {c: _converter_of(c, self._types[c], names.get(c), where,
                                          lists=c in lists, maybe_list=c in maybe_lists)
                         for c in self.columns}

    @property
    def sha256(self) -> str:
        """The digest of the bytes read: the file's, or the directory's ``tree_digest``."""
        if self.path.is_dir():
            return tree_digest(self.path, known=self._digests)
        return self._digests[self.path.name]

    def batches(self, batch_rows: int = BATCH_ROWS) -> Iterator[tuple[int, dict[str, list]]]:
        """(number of the batch's first row, counting from 1; {column: values}) per batch."""
        first = 1
        for path in self._files:
            for batch in self._read(path, batch_rows):
                yield first, {c: self._convert[c](batch.column(c), first) for c in self.columns}
                first += batch.num_rows

    # -- reading --------------------------------------------------------------------------------
    def _shards(self) -> list[Path]:
        """The Arrow files of a ``save_to_disk`` directory, in ``state.json``'s order."""
        path, where = self.path, self.where
        splits = _splits(path)
        if splits is not None:
            first = f"{path}/{splits[0]}" if splits else f"{path}/SPLIT"
            raise UsageError(f"{where} is a DatasetDict (splits: {', '.join(splits) or 'none'}); "
                             f"name a split's directory, e.g. {first}")
        state = path / "state.json"
        if not state.is_file():
            raise UsageError(f"{where} is a directory but not a Hugging Face datasets directory "
                             f"(no state.json; write one with Dataset.save_to_disk, or give a "
                             f"data file)")
        data = self._read_small(state)
        try:
            files = [entry["filename"] for entry in json.loads(data)["_data_files"]]
        except (ValueError, KeyError, TypeError):
            raise UsageError(f"{where}/state.json does not list the data files (_data_files); "
                             f"write the directory again with save_to_disk") from None
        shards = [path / name for name in files]
        for shard in shards:
            if not shard.is_file() or shard.parent != path:
                raise UsageError(f"{where}: state.json lists {shard.name}, which is not in the "
                                 f"directory")
        if not shards:
            raise UsageError(f"{where}: state.json lists no data files")
        return shards

    def _read_small(self, path: Path) -> bytes:
        try:
            data = path.read_bytes()
        except OSError as e:
            raise UsageError(f"{self.where}: cannot read {path.name} ({e.strerror or e})") from None
        self._digests[path.relative_to(self.path).as_posix()] = hashlib.sha256(data).hexdigest()
        return data

    def _open(self, path: Path):
        """The file, opened once and hashed through that descriptor, then rewound."""
        f = open(path, "rb")  # noqa: SIM115 - closed by the reader that takes it
        h = hashlib.sha256()
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
        key = path.name if path == self.path else path.relative_to(self.path).as_posix()
        self._digests[key] = h.hexdigest()
        f.seek(0)
        return f

    def _schema(self):
        pa = self._pa
        try:
            if self._files[0] == self.path:  # a Parquet file
                import pyarrow.parquet as pq

                self._fh = self._open(self.path)
                self._parquet = pq.ParquetFile(self._fh)
                return self._parquet.schema_arrow
            with pa.OSFile(str(self._files[0])) as f:
                return pa.ipc.open_stream(f).schema
        except (pa.ArrowException, OSError) as e:
            if getattr(self, "_fh", None) is not None:
                self._fh.close()
            raise UsageError(f"{self.where}: not a readable {self._kind()} "
                             f"({_first_line(e)})") from None

    def _read(self, path: Path, batch_rows: int):
        pa = self._pa
        try:
            if path == self.path:
                # A row group at a time, on this thread: iter_batches' peak memory grew with the
                # file (benchmarks/columnar_prepare.py), this one's is that of one row group.
                with self._fh:  # closed once the rows are read
                    for i in range(self._parquet.metadata.num_row_groups):
                        group = self._parquet.read_row_group(i, columns=self.columns,
                                                             use_threads=False)
                        yield from group.to_batches(max_chunksize=batch_rows)
                        del group
                return
            with self._open(path) as f:
                reader = pa.ipc.open_stream(f)
                for c, kind in self._types.items():  # each shard as the first one
                    if c not in reader.schema.names or reader.schema.field(c).type != kind:
                        raise UsageError(f"{self.where}: column {c!r} of {path.name} is not the "
                                         f"{kind} column of {self._files[0].name}")
                for batch in reader:
                    for start in range(0, batch.num_rows, batch_rows):
                        yield batch.slice(start, batch_rows)
        except (pa.ArrowException, OSError) as e:
            name = "" if path == self.path else f" ({path.name})"
            raise UsageError(f"{self.where}{name}: not a readable {self._kind()} "
                             f"({_first_line(e)})") from None

    def _kind(self) -> str:
        return "datasets directory" if self.path.is_dir() else "Parquet file"


def open_columnar(path: str | Path, columns: list[str] | None, *, what: str, hint: str = "",
                  lists: tuple[str, ...] = ()) -> ColumnarFile:
    """``ColumnarFile(path, columns, f"{what} {path}", hint, lists)``: see the class; a pipe
    or device is refused first (``refuse_stream``)."""
    refuse_stream(path, what)
    return ColumnarFile(Path(path), columns, f"{what} {path}", hint, lists)


def _splits(path: Path) -> list[str] | None:
    """The splits a DatasetDict directory names in ``dataset_dict.json`` (None: not one)."""
    try:
        splits = json.loads((path / "dataset_dict.json").read_text(encoding="utf-8"))["splits"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return [str(s) for s in splits]


def _class_names(schema) -> dict[str, list[str]]:
    """{column: names} of the ``ClassLabel`` columns that ``datasets`` recorded in the schema's
    ``huggingface`` metadata (Parquet files from ``to_parquet`` and save_to_disk's shards)."""
    raw = (schema.metadata or {}).get(b"huggingface")

    def names(f: dict) -> list[str] | None:
        if f.get("_type") in ("Sequence", "List") and isinstance(f.get("feature"), dict):
            f = f["feature"]  # a list of class labels per row (tag's ner_tags)
        return list(f["names"]) if f.get("_type") == "ClassLabel" else None

    try:
        features = json.loads(raw)["info"]["features"] if raw else {}
        found = {name: names(f) for name, f in features.items() if isinstance(f, dict)}
        return {name: n for name, n in found.items() if n is not None}
    except (ValueError, KeyError, TypeError, AttributeError):
        return {}


def _converter_of(column: str, arrow_type, names: list[str] | None, where: str, *,
                  lists: bool, maybe_list: bool):
    """The converter of one column: a list of text per row (``lists``), a list of values or
    one value per row (``maybe_list``: a list if its type is one), or one value per row."""
    import pyarrow.types as t

    if lists or (maybe_list and (t.is_list(arrow_type) or t.is_large_list(arrow_type))):
        return _list_converter(column, arrow_type, names, where, numbers=not lists)
    return _converter(column, arrow_type, names, where)


_UNREADABLE = object()  # ``_spelling`` of a type that is neither text nor numbers


def number_text(value: float | bool) -> str:
    """A number or boolean as JSON spells it (``1.5``, ``1e+20``, ``true``): the text that
    every reader gives a value that is not text.

    Raises:
        ValueError: NaN or an infinity (its JSON spelling the message). pandas, numpy and
            Python's json write a missing float as NaN: read as the text "NaN" it would be a
            class, or a text to classify, that nobody wrote.
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(json.dumps(value))
    return json.dumps(value)


def no_value(spelled: str) -> str:
    """What a message says of a value ``number_text`` refused (its JSON spelling)."""
    return (f"{spelled}, not a value (how pandas, numpy and Python's json write a missing or "
            f"overflowed number); give a value")


def _spelling(arrow_type, names: list[str] | None, *, numbers: bool = True):
    """How a value of ``arrow_type`` becomes the text the CSV and JSONL readers give: None
    (text, kept as it is), a function (a number; a ``ClassLabel``'s integer → its name), or
    ``_UNREADABLE`` (another type; numbers too when not ``numbers``)."""
    import pyarrow.types as t

    value_type = arrow_type.value_type if t.is_dictionary(arrow_type) else arrow_type
    if t.is_string(value_type) or t.is_large_string(value_type) or _is_string_view(value_type):
        return None
    if t.is_integer(value_type) and names is not None:
        return _class_name(names)
    if not numbers:
        return _UNREADABLE
    if t.is_integer(value_type):
        return str
    if t.is_floating(value_type) or t.is_boolean(value_type):
        return number_text  # as the JSONL reader spells a number or true/false
    return _UNREADABLE


def _converter(column: str, arrow_type, names: list[str] | None, where: str):
    """A function (Arrow array, number of its first row) → list of str, as the CSV and JSONL
    readers give them; ``UsageError`` for a type that is not text or numbers."""
    spell = _spelling(arrow_type, names)
    if spell is _UNREADABLE:
        raise UsageError(f"{where}: column {column!r} holds {arrow_type} values; it must hold "
                         f"text or numbers")

    def convert(array, first: int) -> list[Any]:
        values = array.to_pylist()
        if array.null_count:
            row = first + values.index(None)
            raise UsageError(f"{where} row {row}: column {column!r} is null; give a value")
        try:
            return values if spell is None else [spell(v) for v in values]
        except ValueError as e:  # NaN or an infinity
            row = first + next(i for i, v in enumerate(values)
                               if isinstance(v, float) and not math.isfinite(v))
            raise UsageError(f"{where} row {row}: column {column!r} is "
                             f"{no_value(e.args[0])}") from None
        except IndexError:  # a ClassLabel's -1 ("no label") or a number past its names
            row, v = next((first + i, v) for i, v in enumerate(values)
                          if not 0 <= v < len(names or ()))
            raise UsageError(f"{where} row {row}: column {column!r} holds {v}, which is no "
                             f"class of its ClassLabel (names: {', '.join(names[:10])})") from None

    return convert


def _list_converter(column: str, arrow_type, names: list[str] | None, where: str, *,
                    numbers: bool = False):
    """A function (Arrow array of lists, number of its first row) → list of lists of str, for
    a column of lists of text or of class labels (``names``), or of numbers too
    (``numbers``); ``UsageError`` for lists of anything else, a null list or a null item
    (naming the row)."""
    import pyarrow.types as t

    if not (t.is_list(arrow_type) or t.is_large_list(arrow_type)):
        raise UsageError(f"{where}: column {column!r} holds {arrow_type} values; it must hold "
                         f"a list of text per row")
    item = arrow_type.value_type
    spell = _spelling(item, names, numbers=numbers)
    if spell is _UNREADABLE:
        what = "text or numbers" if numbers else "text (or a datasets Sequence of ClassLabel)"
        raise UsageError(f"{where}: column {column!r} holds lists of {item}; it must hold "
                         f"lists of {what}")

    def convert(array, first: int) -> list[list[str]]:
        out = []
        for i, value in enumerate(array.to_pylist()):
            if value is None or None in value:
                what = "is null" if value is None else "holds a null item"
                raise UsageError(f"{where} row {first + i}: column {column!r} {what}; give a "
                                 f"list of text")
            try:
                out.append(value if spell is None else [spell(v) for v in value])
            except ValueError as e:  # NaN or an infinity
                raise UsageError(f"{where} row {first + i}: column {column!r} holds "
                                 f"{no_value(e.args[0])}") from None
            except IndexError as e:
                raise UsageError(f"{where} row {first + i}: column {column!r} holds {e.args[0]}, "
                                 f"which is no class of its ClassLabel (names: "
                                 f"{', '.join(names[:10])})") from None
        return out

    return convert


def _class_name(names: list[str]):
    def spell(v: int) -> str:
        if not 0 <= v < len(names):
            raise IndexError(v)
        return names[v]
    return spell


def _is_string_view(arrow_type) -> bool:
    import pyarrow.types as t

    return bool(getattr(t, "is_string_view", lambda _: False)(arrow_type))


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
