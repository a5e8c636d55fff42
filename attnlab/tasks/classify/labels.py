"""What a classify row's label is, and the class weights of ``--class-weights``: read where the
data enters (light: no torch).

    objective    the label column holds             the model's head          loss
    single       one class name                     K logits, softmax         cross-entropy
    multi        class names joined by --label-sep  K logits, a sigmoid each  binary cross-entropy
                 (or a list: .jsonl, .parquet, datasets)
    regression   a number                           1 output                  mean squared error

``--multi-label`` and ``--regression`` choose the objective (``objective_of``); a label that does
not fit it (an empty set, a word where a number belongs) is refused here, naming the file and
line, before the run directory is written.

``--class-weights balanced`` gives class c the weight n / (K · n_c) over the n training rows
and K classes (scikit-learn's ``compute_class_weight("balanced")``), so that every class
weighs as much in the loss as if the classes were equally common; ``--class-weights FILE``
reads them from a JSON object or a two-column CSV (class, weight).

Examples:
    >>> parse_label(" a| b |a ", "multi", "|", "--data d.csv line 2")
    ('a', 'b')
    >>> balanced_weights(["a", "a", "a", "b"], ["a", "b"])
    {'a': 0.666667, 'b': 2.0}
"""
from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from ...data.label_forms import other_form
from ...data.tables import read_bytes
from ...errors import UsageError

__all__ = ["OBJECTIVES", "objective_of", "parse_label", "label_set", "class_order",
           "balanced_weights", "read_weights", "resolve_class_weights", "LABEL_SEP",
           "finite_number"]

OBJECTIVES = ("single", "multi", "regression")
# the smallest normal and the largest float32 (torch.finfo(torch.float32).tiny and .max): a
# class weight beyond them is 0 (the class left out of the loss) or inf (a NaN loss)
FLOAT32_TINY, FLOAT32_MAX = 1.1754943508222875e-38, 3.4028234663852886e+38
LABEL_SEP = "|"  # --label-sep's default: a comma is common inside class names ("a, b")


def objective_of(multi_label: bool, regression: bool) -> str:
    """The objective of a run's ``--multi-label`` and ``--regression`` (checked not both)."""
    return "multi" if multi_label else "regression" if regression else "single"


def parse_label(raw: str | list[str], objective: str, sep: str, where: str):
    """A label as read from the file (text; --multi-label: text or a list of str, as
    ``read_table(lists=...)`` reads a list) -> the label the objective trains on: the class
    name, the sorted tuple of class names, or the number.

    A --multi-label row with no label (an empty cell, ``[]``) is the empty label set ``()``:
    every class no, as scikit-learn's ``MultiLabelBinarizer`` and Hugging Face's multi-label
    targets read it (the run says how many rows have none: ``data.unlabelled_rows``).

    Raises:
        UsageError: naming ``where`` (file and line): a value that is not a finite number
            under --regression, or a list without --multi-label.
    """
    if objective != "multi" and isinstance(raw, list):
        raise UsageError(f"{where}: label {json.dumps(raw)[:40]} is a list; give --multi-label "
                         f"to train on several labels per row")
    if objective == "single":
        return raw.strip()
    if objective == "regression":
        try:
            value = float(raw)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value):
            raise UsageError(f"{where}: label {raw.strip()!r} is not a finite number "
                             f"(--regression needs a number in every row)")
        return value
    names = raw if isinstance(raw, list) else raw.split(sep)
    return tuple(sorted({name.strip() for name in names if name.strip()}))


def label_set(label) -> tuple[str, ...]:
    """The classes of one row's label (a class name, or a tuple of them)."""
    return label if isinstance(label, tuple) else (label,)


def class_order(name: str) -> tuple:
    """The sort key of the classes' order (the model's outputs, metrics.json's per-class
    entries, the confusion matrix): classes named by a finite number by its value, before the
    others by their text, so that classes 2, 7 and 12 are not ordered 12, 2, 7.

        >>> sorted(["12", "b", "2", "-1", "a", "7", "nan"], key=class_order)
        ['-1', '2', '7', '12', 'a', 'b', 'nan']
    """
    try:
        value = float(name)
    except ValueError:
        return (1, 0.0, name)
    return (0, value, name) if math.isfinite(value) else (1, 0.0, name)


def balanced_weights(train_labels: list[str], labels: list[str]) -> dict[str, float]:
    """n / (K · n_c) per class c of ``labels`` over the training rows (6 digits)."""
    counts = Counter(train_labels)
    n, k = len(train_labels), len(labels)
    return {c: float(f"{n / (k * counts[c]):.6g}") for c in labels}


def read_weights(path: str) -> dict[str, float]:
    """{class: weight} of a .json object or a .csv of two columns (class, weight; a first row
    whose weight is not a number is a header).

    Raises:
        UsageError: naming the file (and line): unreadable, another type, a weight that is not
            a positive finite number, a class given twice.
    """
    where = f"--class-weights {path}"
    data = read_bytes(path, what="--class-weights")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UsageError(f"{where}: not UTF-8 text") from None
    suffix = Path(path).suffix.lower()
    if suffix == ".json":
        try:
            mapping = json.loads(text)
        except json.JSONDecodeError as e:
            raise UsageError(f"{where}: not valid JSON ({e.msg}, line {e.lineno})") from None
        if not isinstance(mapping, dict):
            raise UsageError(f"{where}: expected a JSON object {{class: weight}}, got "
                             f"{type(mapping).__name__}")
        pairs = [(str(k).strip(), v, where) for k, v in mapping.items()]  # as labels are
    elif suffix == ".csv":
        import csv

        rows = [(n, r) for n, r in enumerate(csv.reader(text.splitlines()), start=1) if r]
        if rows and len(rows[0][1]) == 2 and finite_number(rows[0][1][1]) is None:
            rows = rows[1:]  # the header
        for n, row in rows:
            if len(row) != 2:
                raise UsageError(f"{where} line {n}: expected 2 columns (class, weight), got "
                                 f"{len(row)}")
        pairs = [(row[0].strip(), row[1], f"{where} line {n}") for n, row in rows]
    else:
        raise UsageError(f"{where}: unknown file type {Path(path).suffix or '(none)'!r}; use "
                         f".json or .csv")
    weights: dict[str, float] = {}
    for name, value, at in pairs:
        weight = finite_number(value)
        if weight is None or weight <= 0:
            raise UsageError(f"{at}: the weight of class {name!r} must be a positive number, "
                             f"got {value!r}")
        if not FLOAT32_TINY <= weight <= FLOAT32_MAX:  # the loss's float32 would hold 0 or inf
            raise UsageError(f"{at}: the weight of class {name!r}, {value!r}, is outside what "
                             f"the loss's float32 holds ({FLOAT32_TINY:.2g} to "
                             f"{FLOAT32_MAX:.2g}): it would weigh the class as 0 or inf")
        if name in weights:
            raise UsageError(f"{at}: class {name!r} is given twice")
        weights[name] = weight
    return weights


def finite_number(value: Any) -> float | None:
    """A finite float of ``value`` (text or JSON number), else None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def resolve_class_weights(spec: str, train_labels: list[str], labels: list[str]
                          ) -> dict[str, float]:
    """{class: weight} for every class of ``labels``, in their order, from ``--class-weights
    spec`` ("balanced" or a file).

    Raises:
        UsageError: the file lacks a class of the data, or names one the data does not have.
    """
    if spec == "balanced":
        return balanced_weights(train_labels, labels)
    given = read_weights(spec)
    missing = [c for c in labels if c not in given]
    extra = [c for c in given if c not in labels]
    if missing or extra:
        parts = ([f"has no weight for class {', '.join(map(repr, missing[:5]))}"] if missing
                 else []) + ([f"names class {', '.join(map(repr, extra[:5]))}, which the "
                              f"training data does not have"] if extra else [])
        what = "; ".join(parts)
        known = ", ".join(map(repr, labels[:10])) + (", ..." if len(labels) > 10 else "")
        twin = next((other_form(c, labels) for c in extra if other_form(c, labels)), "")
        raise UsageError(f"--class-weights {spec}: {what} (classes: {known}){twin}")
    return {c: given[c] for c in labels}
