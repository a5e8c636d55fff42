"""Jet files in the Top Quark Tagging Reference Dataset's layout: write, check, read in chunks.

Shapes: N jets, n constituents per jet (at most 200), 4 = (E, px, py, pz) in GeV.

The layout is the reference dataset's (Kasieczka, Plehn et al., SciPost Phys. 7, 014 (2019);
Zenodo record 2603256: train.h5, val.h5, test.h5): a pandas DataFrame in an HDF5 file under the
key ``table``, one row per jet, with the columns

    E_0, PX_0, PY_0, PZ_0, E_1, ..., PZ_199    the constituents, pT-ordered, zero-padded
    is_signal_new                              1 = top jet, 0 = QCD jet

The reference files also hold truthE, truthPX, truthPY, truthPZ and ttv; they are not read.
Both of pandas' HDF formats are read ("table", which ``write_jets`` writes, and "fixed"), always
a row range at a time (``store.select(start=, stop=)``), so ``iter_jets`` over the 1.2M-jet
training file holds one chunk in memory, never the file (``tests/jets/test_reader.py``
measures it).

Every problem with a file is a ``UsageError`` whose one line names the flag (``what``), the file
and, where there is one, the column and the row (rows count from 0, in file order):

    --data train.h5: column PX_3 row 17 is NaN
    --test test.h5: only one class (is_signal_new = 1 for all 500 jets); a test set needs both

pandas and tables (the ``jets`` extra) are imported when a file is first touched, so importing
this module needs numpy only; without them the error says what to install.
"""
from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ...data.overlap import shared_note
from ...errors import UsageError, first_few
from ...paths import not_found, refuse_stream
from ...runs import write_through

__all__ = ["MAX_CONSTITUENTS", "KEY", "LABEL_COLUMN", "jet_columns", "write_jets",
           "read_settings", "count_jets", "read_jets", "read_labels", "iter_jets",
           "check_jet_file", "jet_digests", "shared_jets"]

MAX_CONSTITUENTS = 200     # the reference files' constituents per jet
KEY = "table"              # the HDF key of the DataFrame
LABEL_COLUMN = "is_signal_new"
SETTINGS_ATTR = "attnlab_settings"  # the generator settings, JSON, on the table's HDF node
SCAN_CHUNK = 20_000        # jets per read when a whole file is scanned, or per write (≈ 65 MB)
SPACELIKE_TOLERANCE = 1e-4  # how far below |p| (relative) a constituent's E may be rounded
ORDER_TOLERANCE = 1e-4  # how far (relative) a dropped constituent's pT may exceed a kept one's


def jet_columns(n: int = MAX_CONSTITUENTS) -> list[str]:
    """The four-momentum columns of ``n`` constituents, in the reference files' order.

    Examples:
        >>> jet_columns(2)
        ['E_0', 'PX_0', 'PY_0', 'PZ_0', 'E_1', 'PX_1', 'PY_1', 'PZ_1']
    """
    if not isinstance(n, int) or not 1 <= n <= MAX_CONSTITUENTS:
        raise ValueError(f"n must be an integer in 1..{MAX_CONSTITUENTS}, got {n!r}")
    return [f"{c}_{i}" for i in range(n) for c in ("E", "PX", "PY", "PZ")]


def _pandas():
    try:
        import pandas as pd
        importlib.import_module("tables")  # pandas' HDF5 backend: fail here, not inside pandas
    except ImportError as exc:
        raise UsageError(f"reading and writing jet files needs pandas and tables ({exc.name} "
                         f"is missing): pip install 'attnlab[jets]'") from None
    return pd


def write_jets(path: str | Path, p4: np.ndarray, labels: np.ndarray,
               settings: dict[str, Any] | None = None) -> None:
    """Write jets in the reference layout (pandas "table" format, blosc:lz4-compressed).

    The momenta are stored as float32 (the reference's precision is no finer than that, and it
    halves the file), zero-padded to 200 constituents; ``settings`` (JSON-serialisable: how the
    jets were made) is stored as an attribute of the ``table`` node, for ``read_settings``. The
    file is written next to ``path`` and renamed into place, so an interrupted write never
    leaves a half file under the final name; it is written ``SCAN_CHUNK`` jets at a time, so
    writing holds one chunk beside ``p4`` (``attnlab data jets`` checks its memory for that).

    Args:
        path: the .h5 file to (over)write.
        p4: (N, n, 4) four-momenta [E, px, py, pz] in GeV, n ≤ 200, padding rows all zero.
        labels: (N,) 1 for top jets, 0 for QCD jets.
        settings: the generator settings to keep with the jets, or None.

    Raises:
        ValueError: on a bad shape, no jets, a label other than 0/1, a non-finite momentum,
            or settings that JSON cannot hold.

    Examples:
        >>> p4 = np.zeros((2, 3, 4)); p4[:, 0] = [100.0, 60.0, 0.0, 80.0]
        >>> write_jets("jets.h5", p4, [1, 0], settings={"seed": 1})
        >>> count_jets("jets.h5"), read_settings("jets.h5")
        (2, {'seed': 1})
    """
    p4, labels = np.asarray(p4), np.asarray(labels)
    if p4.ndim != 3 or p4.shape[2] != 4 or not 1 <= p4.shape[1] <= MAX_CONSTITUENTS:
        raise ValueError(f"p4 must have shape (N, n, 4) with n <= {MAX_CONSTITUENTS}, "
                         f"got {p4.shape}")
    if labels.shape != p4.shape[:1] or len(labels) == 0:
        raise ValueError(f"labels must have shape ({len(p4)},) with N >= 1, got {labels.shape}")
    if not np.isin(labels, (0, 1)).all():
        raise ValueError(f"labels must be 0 or 1, got {sorted(set(labels.tolist()) - {0, 1})[:5]}")
    if not all(np.isfinite(p4[a:a + SCAN_CHUNK]).all() for a in range(0, len(p4), SCAN_CHUNK)):
        raise ValueError("p4 holds NaN or inf")
    try:
        text = None if settings is None else json.dumps(settings, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"settings must be JSON-serialisable: {exc}") from None
    pd = _pandas()

    def write(partial: Path) -> None:
        with pd.HDFStore(partial, mode="w", complevel=5, complib="blosc:lz4") as store:
            # a chunk at a time: the whole table at once held four more copies of the jets
            # (padded, the frame, pandas' and PyTables' own), 13 kB a jet beside the 3 kB
            for a in range(0, len(p4), SCAN_CHUNK):
                # track_times=False: no write time in the file, so the same jets (the same
                # --seed) make the same bytes, and a run's recorded SHA-256 still matches.
                # index=False, and no index made after: PyTables' index nodes record when
                # they were made (two writes of the same jets differed), and every read here
                # is a row range (start=, stop=), which needs no index
                store.put(KEY, _frame(pd, p4[a:a + SCAN_CHUNK], labels[a:a + SCAN_CHUNK],
                                      start=a), format="table", append=True, index=False,
                          track_times=False)
            if text is not None:
                store.get_storer(KEY).attrs[SETTINGS_ATTR] = text

    write_through(path, write, lock=False)  # (HDF5 locks it, refusing one locked; then runs)


def _frame(pd, p4: np.ndarray, labels: np.ndarray, *, start: int):
    """Rows ``start ..`` of the reference table: p4 (n, ≤ 200, 4) zero-padded to 200
    constituents as float32, then the labels; a DataFrame (n, 801)."""
    padded = np.zeros((len(p4), MAX_CONSTITUENTS, 4), np.float32)
    padded[:, :p4.shape[1]] = p4
    frame = pd.DataFrame(padded.reshape(len(p4), -1), columns=jet_columns(),  # (n, 800)
                         index=pd.RangeIndex(start, start + len(p4)))
    frame[LABEL_COLUMN] = labels.astype(np.int64)
    return frame


class _JetFile:
    """An open jet file: its row count and range reads, each checked (``UsageError``)."""

    def __init__(self, path: str | Path, what: str = "",
                 max_constituents: int = MAX_CONSTITUENTS) -> None:
        self.path, self.where = Path(path), f"{what} {path}".strip()
        self.columns = jet_columns(max_constituents)
        refuse_stream(self.path, what)  # HDF5 reads by seeking: a pipe could only hang it
        self.store = _open_store(self.path, what)
        try:
            self.nrows, self.positions = self._layout()
            self.dropped = self._dropped()
        except BaseException:
            self.store.close()
            raise

    def __enter__(self) -> "_JetFile":
        return self

    def __exit__(self, *exc) -> None:
        self.store.close()

    def _layout(self) -> tuple[int, np.ndarray]:
        """(rows, positions of the momentum columns then the label) after checking the keys
        and the columns."""
        # pandas also lists "/" for a file whose key is "table" (the group /table holds a node
        # named "table"); it is not a key
        keys = [k.lstrip("/") for k in self.store.keys() if k != "/"]
        if KEY not in keys:
            raise UsageError(f"{self.where}: no key '{KEY}' (keys: {', '.join(keys) or 'none'}); "
                             f"a jets file is a pandas HDF file with the table under '{KEY}'")
        try:
            head = self.store.select(KEY, start=0, stop=0)  # no rows: the columns only
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise UsageError(f"{self.where}: '{KEY}' is not a pandas table of jets "
                             f"({exc.__class__.__name__}: {exc})") from None
        present = [str(c) for c in getattr(head, "columns", [])]
        missing = [c for c in [*self.columns, LABEL_COLUMN] if c not in set(present)]
        if missing:
            raise UsageError(f"{self.where}: {self._missing(missing, set(present))}")
        storer = self.store.get_storer(KEY)
        nrows = storer.nrows if storer.is_table else storer.shape[0]  # "table" / "fixed"
        index = {c: i for i, c in enumerate(present)}
        return int(nrows), np.array([index[c] for c in [*self.columns, LABEL_COLUMN]])

    def _dropped(self) -> np.ndarray:
        """(k, 3) positions of the E, PX, PY columns of the k constituents the file holds after
        the ``max_constituents`` read: ``_check_hardest`` compares their pT with the kept.
        Past the reference's 200 too: a file of more (E_200, ...) has them checked, not
        dropped unseen."""
        head = self.store.select(KEY, start=0, stop=0)
        index = {str(c): i for i, c in enumerate(head.columns)}
        found, i = [], len(self.columns) // 4
        while all(n in index for n in (f"E_{i}", f"PX_{i}", f"PY_{i}")):
            found.append([index[f"{c}_{i}"] for c in ("E", "PX", "PY")])
            i += 1
        return np.array(found, dtype=np.int64).reshape(-1, 3)

    def _check_hardest(self, frame, p4: np.ndarray, start: int) -> None:
        """Refuse a jet of which the read keeps a constituent softer (lower pT) than one it
        drops, or keeps a padding row (all zeros) where it drops a constituent: the first
        ``max_constituents`` are the hardest only in a pT-ordered file with the padding last
        (as the reference files are), and a model reading another subset scores another jet."""
        if not len(self.dropped):
            return
        columns = self.dropped.ravel()
        rest = self._numbers(frame, start, columns, [str(c) for c in frame.columns[columns]])
        rest = rest.reshape(len(p4), -1, 3)
        rest_pt = np.where(rest[..., 0] > 0, np.hypot(rest[..., 1], rest[..., 2]), -np.inf)
        # a NaN in a dropped column (not read) says nothing of its pT, and must not hide the
        # pT of the row's other dropped constituents from the max below
        rest_pt[np.isnan(rest_pt)] = -np.inf
        # a kept padding row is below every dropped constituent (pT >= 0 > -1)
        kept_pt = np.where(p4[..., 0] > 0, np.hypot(p4[..., 1], p4[..., 2]), -1.0)  # (n, N)
        # float32 may round two near-equal pTs apart (~1e-7): only a gap beyond the tolerance
        # counts
        softer = np.flatnonzero(rest_pt.max(1) > kept_pt.min(1) * (1 + ORDER_TOLERANCE))
        if len(softer):
            row, n = softer[0], p4.shape[1]
            kept, dropped = int(kept_pt[row].argmin()), n + int(rest_pt[row].argmax())
            if kept_pt[row, kept] < 0:
                raise UsageError(
                    f"{self.where}: row {start + row} has constituent {dropped} (pT "
                    f"{rest_pt[row].max():g}) after a padding row (constituent {kept} is all "
                    f"zeros), yet only the first {n} are read (--max-constituents {n}); put "
                    f"each jet's constituents first, by decreasing pT, and the padding after")
            raise UsageError(
                f"{self.where}: row {start + row} is not ordered by pT: constituent {dropped} "
                f"(pT {rest_pt[row].max():g}) is harder than constituent {kept} (pT "
                f"{kept_pt[row].min():g}), yet only the first {n} are read "
                f"(--max-constituents {n}); order each jet's constituents by decreasing pT")

    def _missing(self, missing: list[str], present: set[str]) -> str:
        """What the missing columns say: a file of fewer constituents than are read (all the
        columns of constituents 0..k-1, none after) is told so, with what to do."""
        k = 0
        while k < MAX_CONSTITUENTS and {f"{c}_{k}" for c in ("E", "PX", "PY", "PZ")} <= present:
            k += 1
        n = len(self.columns) // 4
        if 0 < k and missing == self.columns[4 * k:]:
            return (f"holds {k} constituents per jet (columns E_0..PZ_{k - 1}), fewer than the "
                    f"{n} read (--max-constituents {n}); train with --max-constituents {k} or "
                    f"fewer, or add zero columns (padding) up to PZ_{n - 1}")
        return (f"missing columns {first_few(missing)} (a jets file has E_i, PX_i, "
                f"PY_i, PZ_i for i < {MAX_CONSTITUENTS} and {LABEL_COLUMN})")

    def _range(self, start: int, stop: int | None) -> tuple[int, int]:
        stop = self.nrows if stop is None else stop
        if not 0 <= start <= stop <= self.nrows:
            raise UsageError(f"{self.where}: jets {start}..{stop} are out of range (the file "
                             f"has {self.nrows:,} jets)")
        return start, stop

    def read(self, start: int = 0, stop: int | None = None, *,
             whole: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Rows start..stop-1 as (p4 (n, max_constituents, 4) float32, labels (n,) int64).

        ``whole=False`` reads fewer columns than a jet has (``read_labels``), so a jet without
        a constituent among them is not refused as empty."""
        start, stop = self._range(start, stop)
        frame = self.store.select(KEY, start=start, stop=stop)
        values = self._numbers(frame, start)  # (n, 4·nc)
        if not values.flags.writeable:  # a read-only view (pandas' copy-on-write)
            values = values.copy()
        labels = frame.iloc[:, self.positions[-1]].to_numpy()
        bad = np.argwhere(~np.isfinite(values))
        if len(bad):
            row, col = bad[0]
            kind = "NaN" if np.isnan(values[row, col]) else "inf"
            raise UsageError(f"{self.where}: column {self.columns[col]} row {start + row} "
                             f"is {kind}")
        # E <= 0 is how the files mark padding (``constituent_mask``: E > 0), so a negative
        # energy was silently dropped as padding: refuse it where it enters
        negative = np.argwhere(values[:, 0::4] < 0)  # (hits, 2): row, constituent
        if len(negative):
            row, i = negative[0]
            raise UsageError(f"{self.where}: column E_{i} row {start + row} is "
                             f"{float(values[row, 4 * i]):g} (an energy must be >= 0; a zero "
                             f"row is padding)")
        p4 = values.reshape(len(values), -1, 4)  # (n, nc, 4)
        self._check_constituents(p4, start, whole)
        if whole:  # not for the labels alone (``read_labels``)
            self._check_hardest(frame, p4, start)
        return p4, self._labels(labels, start)

    def _numbers(self, frame, start: int, positions=None, names=None) -> np.ndarray:
        """The momentum columns as float32 (n, 4·nc) (or the columns at ``positions``, named
        ``names``); a value that is not a number (text in a column of objects) is a
        ``UsageError`` naming its column and row."""
        positions = self.positions[:-1] if positions is None else positions
        momenta = frame.iloc[:, positions]
        try:
            return momenta.to_numpy(dtype=np.float32)
        except (TypeError, ValueError):
            pass
        for col, name in enumerate(self.columns if names is None else names):
            column = momenta.iloc[:, col]
            wrong = np.flatnonzero(_pandas().to_numeric(column, errors="coerce").isna()
                                   & column.notna())
            if len(wrong):
                raise UsageError(f"{self.where}: column {name} row {start + wrong[0]} is "
                                 f"{column.iloc[wrong[0]]!r} (expected a number)") from None
        raise UsageError(f"{self.where}: rows {start}..{start + len(frame) - 1} hold a "
                         f"momentum that is not a number")

    def _check_constituents(self, p4: np.ndarray, start: int, whole: bool) -> None:
        """Refuse a zero energy beside a nonzero momentum, an energy below the momentum, and
        (``whole``) a jet without a constituent."""
        moving = np.argwhere((p4[..., 0] == 0) & (p4[..., 1:] != 0).any(-1))  # E = 0, p != 0
        if len(moving):
            row, i = moving[0]
            c = int(np.flatnonzero(p4[row, i, 1:])[0]) + 1
            raise UsageError(f"{self.where}: column E_{i} row {start + row} is 0 but "
                             f"{self.columns[4 * i + c]} is {float(p4[row, i, c]):g} (a zero "
                             f"energy marks padding, whose row is all zeros)")
        # a particle has E >= |p| (E² = |p|² + m²); float32 rounds a massless one's E and p
        # apart by ~1e-7, so only a shortfall beyond SPACELIKE_TOLERANCE is refused
        momentum = np.sqrt(np.square(p4[..., 1:], dtype=np.float64).sum(-1))  # (n, nc)
        short = np.argwhere(p4[..., 0] < momentum * (1 - SPACELIKE_TOLERANCE))
        if len(short):
            row, i = short[0]
            raise UsageError(f"{self.where}: column E_{i} row {start + row} is "
                             f"{float(p4[row, i, 0]):g}, below the constituent's momentum "
                             f"|p| = {momentum[row, i]:g} (a particle has E >= |p|)")
        empty = np.flatnonzero(~(p4[..., 0] > 0).any(-1)) if whole else []
        if len(empty):
            raise UsageError(f"{self.where}: row {start + empty[0]} has no constituents (every "
                             f"energy E_0..E_{p4.shape[1] - 1} is 0)")

    def _labels(self, labels: np.ndarray, start: int) -> np.ndarray:
        wrong = np.flatnonzero(~np.isin(labels, (0, 1)))  # NaN too
        if len(wrong):
            value = labels[wrong[0]]  # a NumPy number, or a Python str in an object column
            raise UsageError(f"{self.where}: column {LABEL_COLUMN} row {start + wrong[0]} is "
                             f"{getattr(value, 'item', lambda: value)()!r} (expected 0 or 1)")
        return labels.astype(np.int64)


def _open_store(path: Path, what: str = ""):
    """``pandas.HDFStore(path, "r")``, or a ``UsageError`` naming ``what`` (the flag) and the
    file, saying why not (a missing one in ``not_found``'s words, as every command's)."""
    pd = _pandas()
    import tables

    where = f"{what} {path}".strip()
    if not path.exists():
        raise not_found(what, path)
    if path.is_dir():
        raise UsageError(f"{where}: is a directory, not a jets file")
    try:
        if not tables.is_hdf5_file(str(path)):
            raise UsageError(f"{where}: not an HDF5 file (a jets file is a pandas HDF file, "
                             f"e.g. the reference's train.h5)")
        return pd.HDFStore(path, mode="r")
    except (OSError, tables.HDF5ExtError) as exc:
        raise UsageError(f"{where}: cannot be read as HDF5 ({exc.__class__.__name__})") from None


def read_settings(path: str | Path) -> dict[str, Any] | None:
    """The generator settings stored by ``write_jets``, or None (e.g. a reference file).

    Raises:
        UsageError: the file is missing or not HDF5, or has no key ``table``.

    Examples:
        >>> write_jets("jets.h5", np.ones((1, 1, 4)), [0])
        >>> read_settings("jets.h5") is None
        True
    """
    store = _open_store(Path(path))
    with store:
        if f"/{KEY}" not in store.keys():
            raise UsageError(f"{path}: no key '{KEY}'")
        attrs = store.get_storer(KEY).attrs
        return json.loads(attrs[SETTINGS_ATTR]) if SETTINGS_ATTR in attrs else None


def count_jets(path: str | Path, what: str = "", *,
               max_constituents: int = MAX_CONSTITUENTS) -> int:
    """The number of jets (rows) in a jets file, read from its metadata; ``what`` (the flag it
    came from) starts the messages; the columns of ``max_constituents`` must be there.

    Raises:
        UsageError: as ``check_jet_file`` for the file's structure (not its values).
    """
    with _JetFile(path, what, max_constituents) as jets:
        return jets.nrows


def read_jets(path: str | Path, start: int = 0, stop: int | None = None, *,
              max_constituents: int = MAX_CONSTITUENTS,
              what: str = "") -> tuple[np.ndarray, np.ndarray]:
    """Jets ``start`` .. ``stop - 1`` of a file (only those rows are read from disk).

    Args:
        path: a jets file (reference layout, "table" or "fixed" pandas format).
        start, stop: the row range; ``stop=None`` is the end of the file.
        max_constituents: keep the first (hardest) this many constituents of each jet.
        what: the flag the file came from, to start the messages ("--input").

    Returns:
        (p4, labels): p4 (n, max_constituents, 4) float32 [E, px, py, pz] in GeV, zero rows for
        padding; labels (n,) int64, 1 = top.

    Raises:
        UsageError: a missing or unreadable file, missing columns, rows out of range, or a
            NaN/inf momentum, a negative energy, an energy below |p|, a jet without
            constituents or a label other than 0/1 in the rows read (column and row named).

    Examples:
        >>> p4 = np.zeros((3, 2, 4)); p4[:, 0] = [[50, 30, 0, 40], [10, 6, 8, 0], [5, 3, 0, 4]]
        >>> write_jets("jets.h5", p4, [1, 0, 1])
        >>> p4, labels = read_jets("jets.h5", 1, 3, max_constituents=2)
        >>> p4.shape, p4[0, 0].tolist(), labels.tolist()
        ((2, 2, 4), [10.0, 6.0, 8.0, 0.0], [0, 1])
    """
    with _JetFile(path, what, max_constituents) as jets:
        return jets.read(start, stop)


def read_labels(path: str | Path, start: int = 0, stop: int | None = None) -> np.ndarray:
    """The labels (n,) int64 of jets ``start`` .. ``stop - 1``, read a chunk at a time (the
    "fixed" format cannot read one column alone), so memory stays at one chunk.

    Raises:
        UsageError: as ``read_jets``.
    """
    with _JetFile(path, max_constituents=1) as jets:
        start, stop = jets._range(start, stop)
        parts = [jets.read(a, min(a + SCAN_CHUNK, stop), whole=False)[1]
                 for a in range(start, stop, SCAN_CHUNK)]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def iter_jets(path: str | Path, chunk_size: int, *,
              max_constituents: int = MAX_CONSTITUENTS) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Stream a file's jets in order, ``chunk_size`` at a time, holding one chunk in memory.

    The file is opened (and its structure checked) when this is called; each chunk is read and
    checked as the loop reaches it. The chunks together equal ``read_jets(path)``.

    Yields:
        (p4 (n, max_constituents, 4) float32, labels (n,) int64), n = chunk_size except for
        the last chunk.

    Raises:
        ValueError: chunk_size < 1.
        UsageError: as ``read_jets`` (for a bad value: when its chunk is read).

    Examples:
        >>> write_jets("jets.h5", np.full((5, 1, 4), [5.0, 3.0, 0.0, 4.0]), [0, 1, 0, 1, 1])
        >>> [labels.tolist() for _, labels in iter_jets("jets.h5", 2)]
        [[0, 1], [0, 1], [1]]
    """
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    jets = _JetFile(path, max_constituents=max_constituents)

    def chunks():
        with jets:
            for a in range(0, jets.nrows, chunk_size):
                yield jets.read(a, min(a + chunk_size, jets.nrows))

    return chunks()


def jet_digests(p4: np.ndarray) -> np.ndarray:
    """(n,) uint64: a 64-bit digest (BLAKE2b) of each jet's momenta as read, so that two files'
    jets are compared without holding them (8 bytes a jet).

    Examples:
        >>> p4 = np.zeros((3, 2, 4), np.float32); p4[:, 0] = [5, 3, 0, 4]; p4[2, 0, 1] = -3
        >>> d = jet_digests(p4); bool(d[0] == d[1]), bool(d[0] == d[2])
        (True, False)
    """
    rows = np.ascontiguousarray(p4).reshape(len(p4), -1)
    joined = b"".join(hashlib.blake2b(row.tobytes(), digest_size=8).digest() for row in rows)
    return np.frombuffer(joined, dtype=np.uint64)


def shared_jets(trained: np.ndarray, held: np.ndarray, what: str, *,
                first_row: int = 0, chosen: tuple[str, str] | None = None) -> str | None:
    """The warning (``attnlab.data.overlap``'s words) for a held-out file ``what`` with jets
    (``held``: their ``jet_digests``, in file order, from row ``first_row``) that training has
    too (``trained``), or None when it has none. ``chosen`` (``overlap.chosen_by``'s):
    ``trained`` is instead the validation part that chose the weights.

    Examples:
        >>> shared_jets(np.array([1, 2], np.uint64), np.array([3, 2, 2], np.uint64),
        ...             "--test t.h5")  # doctest: +ELLIPSIS
        'warning: --test t.h5: 2 of its 3 rows have an input ... (first: row 1), so ...'
    """
    shared = np.flatnonzero(np.isin(held, trained))
    if not len(shared):
        return None
    return shared_note(len(shared), len(held), f"row {first_row + shared[0]}", what=what,
                       chosen=chosen)


def check_jet_file(path: str | Path, what: str = "--data", *,
                   max_constituents: int = MAX_CONSTITUENTS,
                   digests: list[np.ndarray] | None = None) -> int:
    """Check a whole jets file, reading it a chunk at a time; return its number of jets.

    Checked: the file exists and is HDF5 with the key ``table``; the columns E_i, PX_i, PY_i,
    PZ_i (i < max_constituents) and is_signal_new are there; no momentum is NaN or inf; no
    energy is negative, nor zero beside a nonzero momentum (zero rows are padding), nor below
    its constituent's |p|; every jet has a constituent; every label is 0 or 1; there is at
    least one jet, and both classes.

    Args:
        path: the file.
        what: the flag it came from, to start the messages ("--test").
        max_constituents: the constituents that will be read (the columns checked).
        digests: when given, receives the ``jet_digests`` of every chunk, in file order.

    Returns:
        The number of jets.

    Raises:
        UsageError: one line naming ``what``, the file, and the column and row at fault.

    Examples:
        >>> write_jets("jets.h5", np.full((3, 1, 4), [5.0, 3.0, 0.0, 4.0]), [1, 0, 1])
        >>> check_jet_file("jets.h5")
        3
        >>> write_jets("tops.h5", np.full((3, 1, 4), [5.0, 3.0, 0.0, 4.0]), [1, 1, 1])
        >>> check_jet_file("tops.h5", what="--test")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        attnlab.errors.UsageError: --test tops.h5: only one class (is_signal_new = 1 for all 3...
    """
    with _JetFile(path, what, max_constituents) as jets:
        if jets.nrows == 0:
            raise UsageError(f"{jets.where}: no jets")
        signal = 0
        for a in range(0, jets.nrows, SCAN_CHUNK):
            p4, labels = jets.read(a, min(a + SCAN_CHUNK, jets.nrows))
            signal += int(labels.sum())
            if digests is not None:
                digests.append(jet_digests(p4))
        if signal in (0, jets.nrows):
            raise UsageError(f"{jets.where}: only one class ({LABEL_COLUMN} = {int(signal > 0)} "
                             f"for all {jets.nrows:,} jets); training and testing need top (1) "
                             f"and QCD (0) jets")
        return jets.nrows

