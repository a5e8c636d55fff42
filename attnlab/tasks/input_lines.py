"""The lines of a file of inputs (``--input-file``) of ``predict``, ``translate`` and
``generate``, and of a file of sequences that ``evaluate --data`` scores (reverse, copy, sort),
read once to check every line, then a chunk at a time as they are answered or scored
(``InputLines``), and the label of each (``LineLabels``)."""
from __future__ import annotations

import hashlib
import io
import os
import stat
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from ..data.tables import CHUNK_ROWS, _decode, same_both_readings
from ..errors import UsageError
from .base import refuse_blank


def open_inputs(path: str, where: str):
    """``path`` opened to read its bytes; UsageError naming it when it cannot be."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{where}: is a directory, not a file of inputs")
    try:
        return open(p, "rb")  # noqa: SIM115 - held by the InputLines read from it
    except FileNotFoundError:
        raise UsageError(f"{where}: not found") from None
    except OSError as e:
        raise UsageError(f"{where}: cannot read it ({e.strerror or e})") from None


def _line_text(raw: bytes, first: bool) -> str:
    """One line of a file of inputs, as its bytes ``raw`` hold it (its "\\n" kept): without
    its "\\n" or "\\r\\n", nor a byte-order mark on the file's ``first`` line. Lines end at
    "\\n" only: str.splitlines would also cut at a form feed, U+0085, U+2028 and others inside
    a line, and the outputs would no longer match the lines."""
    return raw.decode("utf-8-sig" if first else "utf-8").removesuffix("\n").removesuffix("\r")


class InputLines(Sequence):
    """The lines of a file of inputs (``--input-file``), every one read and checked when made,
    then held a chunk of ``chunk`` lines at a time: each chunk is read again from the file when
    it is asked for, so that what is held grows with the chunk, not the file (all the lines of a
    file of 10^6 inputs were held while the first was answered).

    The first reading checks each line (UTF-8, not blank: the first bad one named by its
    number, before anything is answered), counts them, and keeps where each chunk starts and
    the SHA-256 of its bytes; a chunk read again whose bytes differ is refused
    (``same_both_readings``), never answered as lines that were not checked. A source that
    cannot be read twice (standard input, a pipe given as ``<(...)``) is copied, as it is read,
    to an unnamed temporary file, which goes when the command ends.

    Args:
        source: the open binary file (read from where it is; held to read the chunks again).
        where: how messages start (``--input-file big.txt``).
        path: the file's name, for the message of a file changed while it was read.
        command: the command that reads it, for that message.
        flag: the flag that reads a table's column instead, for the message of a Parquet file.
        chunk: lines per chunk.
        what: the flag that named the file, for the message of a file changed while it was read.
        blanks: keep blank lines, for the caller to pass over (``evaluate --data`` of
            sequences), instead of refusing the first; and an empty file, of no lines, for
            the caller to name as it names one of blank lines.

    Raises:
        UsageError: the file is empty (without ``blanks``), not UTF-8, a Parquet file, or a
            line is blank; or it is read once and its copy cannot be written (a full
            temporary directory).

    Examples:
        >>> import io
        >>> lines = InputLines(io.BytesIO(b"one\\r\\ntwo\\nthree"), "--input-file -", "-", chunk=2)
        >>> len(lines), lines[2], lines[0:2], lines == ['one', 'two', 'three']
        (3, 'three', ['one', 'two'], True)
        >>> lines.count('two'), lines.index('three'), lines == ('one', 'two', 'three')
        (1, 2, False)
    """

    def __init__(self, source, where: str, path: str, *, command: str = "predict",
                 flag: str = "--text-column", chunk: int = CHUNK_ROWS,
                 what: str = "--input-file", blanks: bool = False) -> None:
        self.path, self.command, self.flag, self.chunk = path, command, flag, chunk
        self.what, self.blanks = what, blanks
        self._starts: list[int] = []  # the byte offset of each chunk's first line
        self._digests: list = []  # the SHA-256 of each chunk's bytes
        self._held: tuple[int, list[str]] = (-1, [])  # (chunk number, its lines)
        try:
            self._file = source if _rereadable(source) else tempfile.TemporaryFile()  # noqa: SIM115
        except OSError as e:  # no temporary directory, or not writable
            raise UsageError(_cannot_copy(where, path, e)) from None
        self._count = self._first_reading(source, where)
        self._digests = [d.hexdigest() for d in self._digests]

    def _first_reading(self, source, where: str) -> int:
        """Read every line of ``source`` (copying it to ``self._file`` when that is a copy),
        checking each; returns how many there are."""
        copy = None if self._file is source else self._file
        offset, count, blank, head = source.tell() if copy is None else 0, 0, None, b""
        try:
            for raw in source:
                if count % self.chunk == 0:
                    self._starts.append(offset)
                    self._digests.append(hashlib.sha256())
                self._digests[-1].update(raw)
                offset += len(raw)
                count += 1
                head = head or raw[:4]
                if copy is not None:
                    try:
                        copy.write(raw)
                    except OSError as e:  # a full or size-limited temporary directory
                        raise UsageError(_cannot_copy(where, self.path, e)) from None
                try:
                    text = _line_text(raw, count == 1)
                except UnicodeDecodeError:
                    self._refuse_undecodable(raw, where, head, count)
                if count == 1 and raw in (b"", b"\xef\xbb\xbf"):
                    count = 0  # a byte-order mark alone: no line ("\r" alone is a blank one)
                elif blank is None and not text.strip():
                    blank = count  # named once every line is known to be UTF-8, as before
        except OSError as e:  # EIO, ...
            raise UsageError(f"{where}: cannot read it ({e.strerror or e})") from None
        if copy is not None:
            try:
                copy.flush()
            except OSError as e:
                raise UsageError(_cannot_copy(where, self.path, e)) from None
        self._end = offset
        if not count:
            self._starts, self._digests = [], []  # a byte-order mark alone: no chunk either
            if not self.blanks:
                raise UsageError(f"{where}: no inputs (the file is empty)")
        if blank is not None and not self.blanks:
            refuse_blank("", f"{where} line {blank}", "; give one input per line")
        return count

    def _refuse_undecodable(self, raw: bytes, where: str, head: bytes, line: int) -> NoReturn:
        """UsageError of the bytes ``raw`` of line ``line``, which are not UTF-8: a Parquet
        file named so, else said as every data reader says it (``_decode``: UTF-16, gzip, or
        the byte, its column and the advice)."""
        if head == b"PAR1":  # Parquet's magic bytes
            raise UsageError(f"{where}: is a Parquet file; give a text file of inputs, one per "
                             f"line, or {self.flag} NAME for the texts of its column NAME")
        _decode(raw, where, line)
        raise AssertionError(f"{where} line {line}: decoded here, not by _line_text")

    def __len__(self) -> int:
        return self._count

    def __eq__(self, other) -> bool:  # as the list of the lines, which read_inputs returned
        if not isinstance(other, list | InputLines):  # a tuple is not equal to a list either
            return NotImplemented
        return len(other) == self._count and all(a == b for a, b in zip(self, other))

    __hash__ = None  # equal to a list, which has none

    @property
    def held(self) -> int:
        """How many lines are held now: at most a chunk's."""
        return len(self._held[1])

    def same_end(self) -> None:
        """``UsageError`` (``same_both_readings``) when the file no longer ends where its first
        reading ended: lines appended (or some cut) while it was read, which the chunks read
        again, each checked against its digest, do not show. Said by a command whose answer is
        of the whole file (``evaluate``'s scores), once it has read its last chunk."""
        size = os.fstat(self._file.fileno()).st_size
        same_both_readings(self.path, f"{self._end} bytes", f"{size} bytes", what=self.what,
                           command=self.command)

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(self._count)
            if step != 1 or stop <= start:
                return [self[j] for j in range(start, stop, step)]
            first, last = start // self.chunk, (stop - 1) // self.chunk
            lines = [line for k in range(first, last + 1) for line in self._lines_of(k)]
            return lines[start - first * self.chunk:stop - first * self.chunk]
        if not -self._count <= i < self._count:
            raise IndexError(f"input line {i} of {self._count}")
        i %= self._count
        return self._lines_of(i // self.chunk)[i % self.chunk]

    def __iter__(self) -> Iterator[str]:
        for k in range(len(self._starts)):
            yield from self._lines_of(k)

    def _lines_of(self, k: int) -> list[str]:
        """The lines of chunk ``k``, read again (the chunk held last kept, not read twice)."""
        if self._held[0] != k:
            self._held = (-1, [])  # not held with the next while it is read
            start, end = self._starts[k:k + 2] if k + 1 < len(self._starts) else (
                self._starts[k], self._end)
            # from the file itself, not from what a buffered reader kept of the first reading
            data = os.pread(self._file.fileno(), end - start, start)
            same_both_readings(self.path, self._digests[k], hashlib.sha256(data).hexdigest(),
                               what=self.what, command=self.command)
            self._held = (k, [_line_text(raw, k == 0 and j == 0)
                              for j, raw in enumerate(io.BytesIO(data))])
        return self._held[1]


def _cannot_copy(where: str, path: str, error: OSError) -> str:
    """The message of a source read once (standard input, a pipe) that its copy, read again
    chunk by chunk, could not be written to."""
    what = "standard input" if path == "-" else "it"
    return (f"{where}: cannot copy {what} to a temporary file in {tempfile.gettempdir()} "
            f"({error.strerror or error}); free space there, or set TMPDIR to a directory "
            f"with room for the input")


def _rereadable(source) -> bool:
    """Whether the binary file ``source`` can be read again from where each chunk starts: a
    regular file (not standard input, which is copied, nor a pipe or a device)."""
    try:
        return stat.S_ISREG(os.fstat(source.fileno()).st_mode) and source.seekable() \
            and source is not getattr(sys.stdin, "buffer", None)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False


class LineLabels(Sequence):
    """``WHERE line N`` for the lines 1 to ``count`` of a file, each made when asked for: a
    list of them held a string per line of the file for the few that a note or an error
    names.

    Examples:
        >>> labels = LineLabels("--input-file big.txt", 1_000_000)
        >>> len(labels), labels[0], labels[-1]
        (1000000, '--input-file big.txt line 1', '--input-file big.txt line 1000000')
        >>> list(labels[8192:8194]), labels[:3].count('--input-file big.txt line 2')
        (['--input-file big.txt line 8193', '--input-file big.txt line 8194'], 1)
    """

    def __init__(self, where: str, count: int, first: int = 1) -> None:
        # _count, not count: that is Sequence.count(value), which a list has too
        self.where, self._count, self.first = where, count, first

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(self._count)
            if step != 1:
                return [self[j] for j in range(start, stop, step)]
            return LineLabels(self.where, max(stop - start, 0), self.first + start)
        if not -self._count <= i < self._count:
            raise IndexError(f"line label {i} of {self._count}")
        return f"{self.where} line {self.first + i % self._count}"
