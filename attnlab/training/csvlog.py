"""The training log of a run: ``logs/metrics.csv``, one row per logged step, that pandas reads.

Columns: ``step`` (optimiser steps done), ``train_seconds`` (seconds of training since the first
step, validation left out, across ``--resume``: ``attnlab.training.clock``), then the metrics in
the order first logged (``train_loss``, ``train_acc`` ..., the step's ``lr``, ``grad_norm`` and
throughput: ``stepstats``, ``val_loss`` ...); a cell is empty where a row has no value (training
rows have no validation metrics). A resumed run's ``metrics.csv`` holds the whole run, each
step once: the rows up to the checkpoint it resumed from, then its own. The interrupted
process's log is kept as it was, as ``metrics.partN.csv``, with the rows it wrote after that
checkpoint (steps the resumed run trained again). One of the sinks of ``runlog.RunLog``.
"""
from __future__ import annotations

import csv
import io
import math
import os
import shutil
from pathlib import Path

from ..errors import UsageError
from ..runs import naming, write_through

__all__ = ["CSVLog", "check_steps", "keep_previous_log"]

ENCODING = "utf-8"  # what pandas reads by default


class CSVLog:
    """Rows written to ``path`` as they come (a crash keeps every row logged before it). The
    file is rewritten whole when a row brings a new column, appended to otherwise; rows are few
    (tens to hundreds a run).

    Examples:
        >>> log = CSVLog("metrics.csv")
        >>> log.write(1, {"train_loss": 2.5}, seconds=0.5); log.write(2, {"val_loss": 2.0}, seconds=1.0)
        >>> open("metrics.csv").read().splitlines()
        ['step,train_seconds,train_loss,val_loss', '1,0.5,2.5,', '2,1.0,,2.0']
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.columns: list[str] = ["step", "train_seconds"]
        self.rows: list[dict[str, float]] = []

    def begin(self, step: int) -> None:
        """Training starts at ``step``: of a log already there (a resumed run's), the rows up
        to ``step`` are kept, and those after it, which the interrupted process wrote after
        its checkpoint and this one writes again, are dropped (``keep_previous_log`` kept
        them). Plotted, steps 21-25 of a run killed at 25 and resumed from 20 showed twice.
        A row cut short is dropped (``read_rows``); the steps were checked before the run
        wrote anything (``check_steps``)."""
        if not self.path.is_file():
            return
        columns, read = read_rows(self.path)
        rows = [row for line, row in read if step_of(row, self.path, line) <= step
                and None not in row and None not in row.values()]  # no field missing or extra
        if not rows:
            self.path.unlink()
            return
        self.columns += [c for c in columns if c not in self.columns]
        self.rows = rows
        self._rewrite()

    def close(self) -> None:
        """Nothing to do: each row is written when it comes."""

    def write(self, step: int, metrics: dict[str, float], *, seconds: float) -> None:
        """A row of ``metrics`` at ``step``, ``seconds`` of training after the first step."""
        row = {"step": step, "train_seconds": round(seconds, 3), **metrics}
        self.rows.append(row)
        new = [k for k in row if k not in self.columns]
        self.columns += new
        if new or len(self.rows) == 1:
            self._rewrite()
        else:
            self._append(row)

    def _append(self, row: dict[str, float]) -> None:
        """``row`` at the end of the file, whole or not at all: a full disk took half a row
        (``2,0.04,2.3`` of ``2,0.04,2.3958``), which a resumed run then read back as a row whose
        numbers were cut short. The error names the file (a failed write names none)."""
        text = io.StringIO()
        csv.DictWriter(text, self.columns).writerow(row)
        data = memoryview(text.getvalue().encode(ENCODING))
        with open(self.path, "ab", buffering=0) as f:  # unbuffered: nothing left to flush
            end = f.seek(0, os.SEEK_END)
            try:
                while data:
                    data = data[f.write(data):]
            except BaseException as e:
                f.truncate(end)  # frees space: it cannot fail for want of it
                raise naming(e, self.path)

    def _rewrite(self) -> None:
        """The whole file anew, header and rows, replacing the old one only once written (a
        full disk leaves the old one as it was, and no temporary file)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)

        def write(temporary: Path) -> None:
            with open(temporary, "w", newline="", encoding=ENCODING) as f:
                writer = csv.DictWriter(f, self.columns)
                writer.writeheader()
                writer.writerows(self.rows)

        write_through(self.path, write)


def read_rows(path: Path) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """(the columns, each row that has a step with its line number) of the log at ``path``. A
    row cut short (a last line with no line end, left by a power loss or an older version's
    full disk) is left out, as a step not logged: kept, ``2`` read back as a row ``2,,,`` of
    a step with no numbers. A log that is not UTF-8 (edited by hand and saved as UTF-16 or
    Latin-1) is refused naming it, the line and the column: it ended a resume in a
    ``UnicodeDecodeError`` traceback."""
    from ..data.tables import decode_text  # (the one check of UTF-8 of what users give)

    # newline=None: "\r\n" and "\r" read as "\n", as ``Path.read_text`` reads them
    text = io.StringIO(decode_text(path.read_bytes(), f"--resume: {path}"), newline=None).read()
    whole = text[:text.rfind("\n") + 1]  # (DictWriter ends each row with "\r\n")
    reader = csv.DictReader(io.StringIO(whole, newline=""))
    columns = list(reader.fieldnames or [])
    return columns, [(reader.line_num, row) for row in reader if row.get("step")]


def step_of(row: dict[str, str], path: Path, line: int) -> int:
    """The step of a ``row`` read back from the log at ``path`` (at ``line``): a finite whole
    number. A ``UsageError`` naming the file, the line and the value otherwise (a log edited
    by hand): text ended a resume in a ``ValueError`` traceback, and ``nan`` or ``inf``
    dropped the row in silence."""
    try:
        step = float(row["step"])
    except ValueError:
        step = math.nan
    if not math.isfinite(step) or step != int(step):
        raise UsageError(f"--resume: {path} line {line}: step {row['step']!r} is not a "
                         f"whole number; correct that line, or remove it, and resume again")
    return int(step)


def check_steps(log_dir: Path) -> None:
    """``--resume``: the step of every row of ``log_dir``'s ``metrics.csv`` (where there is
    one) is a whole number (``step_of``), checked before the run writes anything: a refusal
    found when training started, after the data and the model were built, left a copy of the
    log (``keep_previous_log``) at each try."""
    path = Path(log_dir) / "metrics.csv"
    if path.is_file():
        for line, row in read_rows(path)[1]:
            step_of(row, path, line)


def keep_previous_log(log_dir: Path) -> None:
    """Keep a copy of the log of an interrupted run as ``metrics.partN.csv`` (N = 1, 2, ...):
    the resumed run's ``metrics.csv`` drops the rows written after the checkpoint
    (``CSVLog.begin``), which the copy keeps as they were."""
    csv_log = Path(log_dir) / "metrics.csv"
    if csv_log.is_file():
        n = 1
        while (kept := csv_log.with_name(f"metrics.part{n}.csv")).exists():
            n += 1
        # whole or not at all (a half copy, left by a full disk, would pass for the log), and
        # an error names the copy (shutil.copyfile's named the log copied, on a full disk)
        rows = csv_log.read_bytes()  # (a few kB: rows are few)
        write_through(kept, lambda tmp: tmp.write_bytes(rows))
