"""Sets of feature vectors from the user's own table: one row per element, one set per id.

``attnlab train classify --set-column NAME`` classifies sets (point clouds, particle jets, the
items of a basket) rather than texts. A set has no order, so the file holds it as rows that
share a value in the set column; each row is one element whose features are numbers:

    basket,label,x,y            ->  set "b1" = [[0.5, 1.0], [0.2, -1.0]], label "pos"
    b1,pos,0.5,1.0                  set "b2" = [[-2.0, 0.1]],             label "neg"
    b2,neg,-2.0,0.1
    b1,pos,0.2,-1.0

Rows need not be next to each other; a set's elements keep their file order and sets are
numbered by their first row. Every problem is a ``UsageError`` naming the flag, the file and the
line (and the column, value or set), as ``attnlab.data.tables`` does for texts.

Features are standardised with the training split's per-feature mean and standard deviation
(``feature_stats`` / ``standardise``): a linear input projection trains badly on features of
very different scales, and the same statistics must be applied at evaluation and prediction.

Shapes: T elements of a set, F features per element.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import torch

from ..errors import UsageError
from .label_forms import OneSpelling
from .headers import missing_columns
from .tables import CHUNK_ROWS, check_unique, place, read_table

__all__ = ["FeatureSets", "read_feature_sets", "feature_set_chunks", "check_set_rows",
           "CheckedSets", "parse_feature_columns", "parse_set",
           "feature_stats", "standardise"]


class FeatureSets(list):
    """A list of ``(features (T, F) float tensor, label)``, one per set, in order of first row.

    Attributes:
        path: the file read.
        features: the feature columns, in the order of the F features.
        ids: ``ids[i]`` is set i's value of the set column.
        lines: ``lines[i]`` is the line of set i's first row (for error messages).
        sha256: the SHA-256 of the bytes read (``Table.sha256``).
    """

    def __init__(self, sets, *, path: Path, features: list[str], ids: list[str],
                 lines: list[int], sha256: str = "") -> None:
        super().__init__(sets)
        self.path, self.features, self.ids, self.lines = path, features, ids, lines
        self.sha256 = sha256


def parse_feature_columns(value) -> list[str] | None:
    """``"a,b,c"`` (the flag) or ``["a", "b", "c"]`` (a --config file) -> the names; None stays."""
    if value is None:
        return None
    names = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    names = [n.strip() for n in names]
    if not names or not all(names):
        raise UsageError(f"--feature-columns must be column names separated by commas, got {value!r}")
    check_unique(names, what="--feature-columns")  # 'a,a' would feed feature a in twice
    return names


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise UsageError(f"{where} {text!r} is not a finite number")
    return value


def read_feature_sets(path: str | Path, *, set_column: str, label_column: str,
                      feature_columns: list[str] | None = None, what: str = "--data",
                      spelled: bool = False) -> FeatureSets:
    """Read a file of set elements (any kind ``read_table`` reads) into labelled feature sets.

    Args:
        path: the file (format from the extension, see ``attnlab.data.tables``).
        set_column: rows with the same value here form one set.
        label_column: the set's label; every row of a set must give the same one.
        feature_columns: the features, in order; default every other column of the file.
        what: the flag the file came from, to start error messages.
        spelled: a JSON Lines decimal set id or label is the text the line has (``1e2``),
            not Python's float's (``100.0``): ``read_table``'s.

    Returns:
        A ``FeatureSets``: ``[(tensor (T, F), label), ...]``.

    Raises:
        UsageError: the file errors of ``read_table``; a missing or repeated column (named);
            a column given two roles (e.g. the set column also as a feature); no feature
            column left; a feature value that is not a finite number (line, column, value); a set
            with two labels (line, set, both labels).

    Examples:
        >>> rows = ["cloud,shape,x,y,z", "c1,sphere,0,0,1", "c2,cube,1,1,1", "c1,sphere,0,1,0"]
        >>> _ = Path("points.csv").write_text("\\n".join(rows) + "\\n")
        >>> sets = read_feature_sets("points.csv", set_column="cloud", label_column="shape")
        >>> sets[0][0].shape, sets[0][1], sets.features
        (torch.Size([2, 3]), 'sphere', ['x', 'y', 'z'])
    """
    keys = _roles(set_column, label_column, feature_columns)
    if feature_columns is not None:
        table = read_table(path, keys + list(feature_columns), what=what, spelled=spelled)
    else:
        table = read_table(path, None, what=what, spelled=spelled)
        missing_columns(keys, table.columns, f"{what} {table.path}")
        feature_columns = [c for c in table.columns if c not in keys]
    where = f"{what} {table.path}"
    if not feature_columns:
        raise UsageError(f"{where}: no feature columns (columns: {', '.join(table.columns)}); "
                         f"add some or name them with --feature-columns")
    check = _SetRows(table.path, where, set_column, label_column, list(feature_columns))
    rows: dict[str, list[list[float]]] = {}
    for row, line in zip(table, table.lines):
        key, values = check.see(row, line)
        rows.setdefault(key, []).append(values)
    ids = list(rows)  # dicts keep insertion order: sets in order of their first row
    sets = [(torch.tensor(rows[k], dtype=torch.float32), check.labels[k][0]) for k in ids]  # (T, F) each
    return FeatureSets(sets, path=table.path, features=list(feature_columns), ids=ids,
                       lines=[check.labels[k][1] for k in ids], sha256=table.sha256)


class _SetRows:
    """The rows of a file of sets, checked one at a time (``see``) as ``read_feature_sets``
    checks them: a set id in two Unicode forms, a set with two labels, a feature value that is
    not a finite number. ``labels``: each set's (label, line of its first row), in order of
    first row."""

    def __init__(self, path: Path, where: str, set_column: str, label_column: str,
                 features: list[str]) -> None:
        self.path, self.where, self.features = path, where, features
        self.set_column, self.label_column = set_column, label_column
        self.labels: dict[str, tuple[str, int]] = {}
        self.spelling = OneSpelling(where, f"column {set_column!r}")  # one id in two forms: two sets

    def see(self, row: dict[str, str], line: int) -> tuple[str, list[float]]:
        """(the set id, the feature values) of the row at ``line``, checked."""
        path, where = self.path, self.where
        key, label = row[self.set_column].strip(), row[self.label_column].strip()
        self.spelling.see(key, lambda: place(path, line))
        first = self.labels.setdefault(key, (label, line))
        if first[0] != label:
            raise UsageError(f"{where} {place(path, line)}: set {key!r} has label {label!r} here "
                             f"but {first[0]!r} on {place(path, first[1])}; a set has one label")
        return key, [_number(row[c].strip(), f"{where} {place(path, line)}: column {c!r}: value")
                     for c in self.features]


class CheckedSets(NamedTuple):
    """What a reading that checks every row of a file of sets (``check_set_rows``) keeps:
    ``last``, each set's last line, in order of first row; ``labels``, each set's (label, line
    of its first row), in the same order; ``sha256``, the digest of the bytes read."""

    last: dict[str, int]
    labels: dict[str, tuple[str, int]]
    sha256: str


def check_set_rows(path: str | Path, *, set_column: str, label_column: str,
                   feature_columns: list[str], what: str = "--data",
                   spelled: bool = False) -> CheckedSets:
    """The file of sets ``path`` read once as its rows come (``table_chunks``), every row
    checked by ``read_feature_sets``' rules and none kept: ``UsageError`` at the first bad row,
    else a ``CheckedSets`` to give ``feature_set_chunks`` (``checked=``), so that it reads the
    file once more, not twice.

    Examples:
        >>> rows = ["cloud,shape,x", "c1,ball,0", "c2,cube,1", "c1,ball,2"]
        >>> _ = Path("points.csv").write_text("\\n".join(rows) + "\\n")
        >>> found = check_set_rows("points.csv", set_column="cloud", label_column="shape",
        ...                        feature_columns=["x"])
        >>> found.last, found.labels
        ({'c1': 4, 'c2': 3}, {'c1': ('ball', 2), 'c2': ('cube', 3)})
    """
    from .tables import table_chunks

    keys = _roles(set_column, label_column, feature_columns)
    path = Path(path)
    check = _SetRows(path, f"{what} {path}", set_column, label_column, list(feature_columns))
    last: dict[str, int] = {}  # a key keeps the place of its first row: sets in that order
    for chunk in table_chunks(path, columns=keys + list(feature_columns), what=what,
                              spelled=spelled):
        for row, line in zip(chunk, chunk.lines):
            last[check.see(row, line)[0]] = line
    return CheckedSets(last, check.labels, chunk.sha256)


def feature_set_chunks(path: str | Path, *, set_column: str, label_column: str,
                       feature_columns: list[str], what: str = "--data", spelled: bool = False,
                       sets: int = CHUNK_ROWS,
                       checked: CheckedSets | None = None) -> Iterator[FeatureSets]:
    """``read_feature_sets``' sets of ``path`` (its ``feature_columns``), ``sets`` at a time, in
    the same order, by the same rules, the file read twice as its rows come (``table_chunks``):
    a first pass checks every row and notes each set's last line (``check_set_rows``, or its
    answer given as ``checked``); the second gives each set once its last row is read. What is
    held grows with the chunk and the sets whose rows are spread out, not with a file's rows;
    each chunk's ``sha256`` is the second reading's digest so far (``UsageError`` where a row, a
    set's label or the file's digest is not the first reading's: the file changed).

    Examples:
        >>> rows = ["cloud,shape,x", "c1,ball,0", "c2,cube,1", "c1,ball,2", "c3,cube,3"]
        >>> _ = Path("points.csv").write_text("\\n".join(rows) + "\\n")
        >>> [(c.ids, c.lines) for c in feature_set_chunks(
        ...     "points.csv", set_column="cloud", label_column="shape", feature_columns=["x"],
        ...     sets=2)]
        [(['c1', 'c2'], [2, 3]), (['c3'], [5])]
    """
    from .tables import same_both_readings, table_chunks

    last, checked_labels, first_digest = checked or check_set_rows(
        path, set_column=set_column, label_column=label_column,
        feature_columns=feature_columns, what=what, spelled=spelled)
    path = Path(path)
    check = _SetRows(path, f"{what} {path}", set_column, label_column, list(feature_columns))

    def changed(second: str = "") -> None:  # the rows read now are not the rows checked
        same_both_readings(path, first_digest, second, what=what)

    held: dict[str, list[list[float]]] = {}  # the rows of the sets not yet whole
    order, whole, out = iter(last), set(), _no_sets(path, feature_columns)
    waiting = next(order, None)  # last's keys are in order of first row
    for chunk in table_chunks(path, columns=[set_column, label_column, *feature_columns],
                              what=what, spelled=spelled):
        for row, line in zip(chunk, chunk.lines):
            key = row[set_column].strip()
            if last.get(key, 0) < line:  # a row, or a set, the first reading did not have
                changed()
            held.setdefault(key, []).append(check.see(row, line)[1])
            if last[key] == line:
                whole.add(key)
            while waiting in whole:  # the sets whole, in order of first row
                if len(out) == sets:  # given once another set is whole: the last, at the end
                    out.sha256 = chunk.sha256
                    yield out
                    out = _no_sets(path, feature_columns)
                whole.discard(waiting)
                label, first = check.labels[waiting]
                if (label, first) != checked_labels[waiting]:  # a label never checked
                    changed()
                out.append((torch.tensor(held.pop(waiting), dtype=torch.float32), label))
                out.ids.append(waiting), out.lines.append(first)
                waiting = next(order, None)
    if waiting is not None:  # a set whose last row the second reading did not find
        changed()
    changed(chunk.sha256)
    out.sha256 = chunk.sha256  # the whole file's
    yield out


def _no_sets(path: Path, features: list[str]) -> FeatureSets:
    """A ``FeatureSets`` of no set yet, of ``path``'s ``features``."""
    return FeatureSets([], path=path, features=list(features), ids=[], lines=[])


def _roles(set_column: str, label_column: str, feature_columns: list[str] | None) -> list[str]:
    """The set and label columns, refused where a column is given two roles."""
    if set_column == label_column:
        raise UsageError(f"--set-column and --label-column are both {set_column!r}; a column "
                         f"cannot be both the set id and its label")
    for c in feature_columns or ():
        if c in (set_column, label_column):
            role = "--set-column" if c == set_column else "--label-column"
            raise UsageError(f"--feature-columns: {c!r} is also {role}; a feature must be "
                             f"another column")
    return [set_column, label_column]


def parse_set(text: str, features: list[str]) -> torch.Tensor:
    """``"x1,y1;x2,y2"`` (elements by ';', features by ',') -> a (T, F) tensor; ``UsageError``
    naming the element on a wrong count, an empty element or a value that is not a number.
    One ';' after the last element is allowed; an empty element between two is refused, not
    dropped (a set has no positions, so a dropped element would change the answer unseen).

    Examples:
        >>> parse_set("1,2;3,4;", ["x", "y"]).shape
        torch.Size([2, 2])
        >>> parse_set("1,2;;3,4", ["x", "y"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        attnlab.errors.UsageError: --input: element 2 is empty (nothing between two ';'); ...
    """
    body = text.strip().removesuffix(";")
    elements = body.split(";") if body.strip() else []
    if not elements:
        raise UsageError(f"--input: no elements; give them as 'x1,y1;x2,y2;...' "
                         f"(features {', '.join(features)})")
    out = []
    for i, element in enumerate(elements, start=1):
        if not element.strip():
            raise UsageError(f"--input: element {i} is empty (nothing between two ';'); give each "
                             f"element its {len(features)} values ({', '.join(features)})")
        values = element.split(",")
        if len(values) != len(features):
            raise UsageError(f"--input: element {i} ({element.strip()!r}) has {len(values)} "
                             f"values, expected {len(features)} ({', '.join(features)})")
        out.append([_number(v.strip(), f"--input: element {i}: value") for v in values])
    return torch.tensor(out, dtype=torch.float32)  # (T, F)


def feature_stats(sets: list[torch.Tensor]) -> tuple[list[float], list[float]]:
    """Per-feature mean and standard deviation over every element of ``sets`` (a constant
    feature gets std 1, so standardising leaves it at 0 instead of dividing by zero)."""
    elements = torch.cat(list(sets))  # (sum of T, F)
    std = elements.std(0, unbiased=False) if len(elements) > 1 else torch.ones(elements.shape[1])
    return elements.mean(0).tolist(), torch.where(std > 0, std, torch.ones_like(std)).tolist()


def standardise(sets: list[torch.Tensor], mean: list[float], std: list[float]) -> list[torch.Tensor]:
    """``(x - mean) / std`` of every set, with statistics from ``feature_stats``."""
    mean_t, std_t = torch.tensor(mean), torch.tensor(std)  # (F,)
    return [(x - mean_t) / std_t for x in sets]
