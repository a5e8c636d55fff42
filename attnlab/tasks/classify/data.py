"""The files of ``attnlab train classify``: reading the user's rows, the per-class train / val /
test splits, and the labels of held-out files checked against training.

Why a module of its own: the spec's ``validate`` reads the files (a data error must stop the
command before the run directory is written) and the runtime trains, evaluates and predicts on
what it read; both call ``load_splits``. So this module is the part of the data code that
imports no torch: its own imports are the standard library and ``attnlab.data.tables``; only
``--set-column`` files, whose sets are (T, F) tensors, need ``attnlab.data.feature_sets`` and
with it torch. Turning the examples into tensors (tokeniser, padded batches) is the runtime's
(``runtime.py``).

The split, for each option ``key`` in (test, val) not given as a file: within each class (labels
sorted, so the draw is the same on every machine), shuffle with ``random.Random(--seed)`` and hold
out ``round(f · n_class)`` examples, never a class's last one, where f is ``--{key}-fraction``
rescaled to what is still left of ``--data``: fractions are of the whole file.

Examples:
    >>> import random
    >>> kept, held = _split({"a": [0, 1, 2, 3], "b": [4, 5]}, 0.5, random.Random(0))
    >>> len(held), sorted(kept + held) == list(range(6))
    (3, True)
"""
from __future__ import annotations

import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...data.overlap import chosen_by, shared_inputs
from ...data.label_forms import OneSpelling, other_form
from ...data.tables import CHUNK_ROWS, KINDS, check_digest, file_format, place, places, read_table
from ...errors import UsageError
from .labels import class_order, finite_number, label_set, objective_of, parse_label
from ...runs import check_data_files, record_data_files

if TYPE_CHECKING:
    from ...run_config import RunSettings

__all__ = ["load_splits", "read_and_pin", "read_examples", "example_chunks", "checked_sets", "check_labels", "classes_of",
           "untrained_classes", "missing_value_classes", "number_twins", "class_warnings",
           "DATA_FILES"]

DATA_FILES = ("data", "test", "val")  # the options that name data files


def files_of(cfg: RunSettings) -> dict[str, str | None]:
    """The run's data files by option name (None where not given), as ``attnlab.runs``'
    pinning and checking of data files take them."""
    return {"data": cfg.data, "test": cfg.test, "val": cfg.val}


def read_examples(cfg: RunSettings, key: str, path: str, features: list[str] | None = None, *,
                  pinned: bool = False):
    """The ``(input, label)`` examples of the file ``path`` — (text, label) rows, or
    ((T, F) tensor, label) sets with ``--set-column`` — their line numbers, the file, and the
    SHA-256 of the bytes read.

    Args:
        cfg: the run's typed config (its columns, ``set_column``, ``feature_columns``,
            ``data_sha256``).
        key: the option naming the file: "data", "test" or "val" (errors name ``--key``).
        path: the file.
        features: the feature columns a held-out set file must have (those of ``--data``).
        pinned: the file is one of the run's own, so its bytes must be the ones config.yaml's
            ``data_sha256`` recorded, when it recorded them.

    Raises:
        UsageError: the file is missing, unreadable, lacks a column, or changed since recorded.
    """
    if cfg.set_column:
        # only here: sets are tensors, and reading texts must not load torch
        from ...data.feature_sets import parse_feature_columns, read_feature_sets

        found = read_feature_sets(path, set_column=cfg.set_column, label_column=cfg.label_column,
                                  what=f"--{key}", spelled=cfg.json_decimals_as_written,
                                  feature_columns=features or parse_feature_columns(cfg.feature_columns))
        examples = found
    else:
        found = read_table(path, **_table_options(cfg, key))
        examples = _labelled(cfg, key, found, path)
    _one_spelling(examples, found.lines, path, _forms(cfg, key, found.path))
    if pinned:
        check_digest(found.path, found.sha256, (cfg.data_sha256 or {}).get(key), what=f"--{key}")
    return examples, found.lines, found.path, found.sha256


def example_chunks(cfg: RunSettings, key: str, path: str, features: list[str] | None = None,
                   *, rows: int = CHUNK_ROWS, checked=None):
    """``read_examples``' examples of the file ``path``, ``rows`` at a time: ``(examples,
    their lines, the file, the SHA-256 of its bytes read so far)`` per chunk, a text file read
    as its rows come (``table_chunks``), a file of sets (its ``features`` named) ``rows`` sets
    at a time (``feature_set_chunks``, its first reading skipped where ``checked``, a
    ``CheckedSets``, gives its answer); its checks (a label in two Unicode forms included)
    made across the chunks as over the whole file."""
    if cfg.set_column:
        from ...data.feature_sets import feature_set_chunks

        forms = _forms(cfg, key, Path(path))
        for found in feature_set_chunks(path, set_column=cfg.set_column,
                                        label_column=cfg.label_column, feature_columns=features,
                                        what=f"--{key}", spelled=cfg.json_decimals_as_written,
                                        sets=rows, checked=checked):
            _one_spelling(found, found.lines, path, forms)
            yield found, found.lines, found.path, found.sha256
        return
    from ...data.tables import table_chunks

    forms = _forms(cfg, key, Path(path))
    for chunk in table_chunks(path, **_table_options(cfg, key), rows=rows):
        examples = _labelled(cfg, key, chunk, path)
        _one_spelling(examples, chunk.lines, path, forms)
        yield examples, chunk.lines, chunk.path, chunk.sha256


def checked_sets(cfg: RunSettings, key: str, path: str, features: list[str],
                 labels: set[str] | None):
    """The file of sets ``path`` of ``--key`` read once, every row checked (``check_set_rows``)
    and every set's label as ``example_chunks`` and ``check_labels`` (against ``labels``)
    check it, no set built: the ``CheckedSets`` to give ``example_chunks`` (``checked=``), so
    that a file checked, then scored, is read twice in all."""
    from ...data.feature_sets import check_set_rows

    checked = check_set_rows(path, set_column=cfg.set_column, label_column=cfg.label_column,
                             feature_columns=features, what=f"--{key}",
                             spelled=cfg.json_decimals_as_written)
    found, where = Path(path), list(checked.labels.values())  # (label, first line), in order
    sets, lines = [(None, label) for label, _ in where], [line for _, line in where]
    _one_spelling(sets, lines, found, _forms(cfg, key, found))
    check_labels(sets, lines, found, labels, key)
    return checked


def _table_options(cfg: RunSettings, key: str) -> dict[str, Any]:
    """How ``read_table`` and ``table_chunks`` read the (text, label) rows of ``--key``."""
    # a list is read whatever the objective, so that parse_label can say --multi-label;
    # an empty --multi-label label is the empty label set (parse_label), as a Parquet [] is
    return {"columns": [cfg.text_column, cfg.label_column], "what": f"--{key}",
            "lists": (cfg.label_column,), "spelled": cfg.json_decimals_as_written,
            "allow_empty_values": (cfg.label_column,) if cfg.multi_label else False}


def _labelled(cfg: RunSettings, key: str, table, path) -> list[tuple[str, Any]]:
    """The (text, label) examples of a table's rows, each label parsed (``parse_label``)."""
    text, label = cfg.text_column, cfg.label_column
    objective = objective_of(cfg.multi_label, cfg.regression)
    return [(row[text], parse_label(row[label], objective, cfg.label_sep,
                                    f"--{key} {table.path} {where}"))
            for row, where in zip(table, places(path, table.lines))]


def _forms(cfg: RunSettings, key: str, path) -> OneSpelling | None:
    """What sees the labels of one file (None for numbers): a class name in two Unicode
    forms would be two classes."""
    return None if cfg.regression else OneSpelling(f"--{key} {path}",
                                                   f"column {cfg.label_column!r}")


def _one_spelling(examples, lines: list[int], path, forms: OneSpelling | None) -> None:
    """Each label of ``examples`` (at ``lines`` of ``path``) seen by ``forms``."""
    if forms is None:
        return
    for (_, label), line in zip(examples, lines):
        for name in label_set(label):
            forms.see(name, lambda: place(path, line))


def _split(indices_by_label: dict[str, list[int]], fraction: float, rng: random.Random):
    """Hold out ``fraction`` of each class (never a class's last example): (kept, held out)."""
    kept, held = [], []
    for label in sorted(indices_by_label):
        idx = list(indices_by_label[label])
        rng.shuffle(idx)
        n = min(round(fraction * len(idx)), len(idx) - 1)
        held += idx[:n]
        kept += idx[n:]
    return sorted(kept), sorted(held)


def check_labels(examples, lines, path, labels: set[str] | None, key: str) -> None:
    """``UsageError`` naming the file and line of the first example whose label (one of its
    labels, --multi-label) is not in ``labels`` (those seen in training): the model has no
    output for it. ``labels`` None (--regression): nothing to check."""
    if labels is None:
        return
    for (_, found), line in zip(examples, lines):
        label = next((c for c in label_set(found) if c not in labels), None)
        if label is not None:
            known = ", ".join(sorted(labels)[:10]) + (", ..." if len(labels) > 10 else "")
            twin = other_form(label, labels) or _same_number(label, labels)
            raise UsageError(f"--{key} {path} {place(path, line)}: label {label!r} never seen in "
                             f"training (labels: {known}){twin}")


def _same_number(label: str, labels: set[str]) -> str:
    """The end of a "never seen in training" message for a number that a training label
    writes otherwise ('100.0' where training has '1e2', as two tools write one float); ""
    when none does. A label is used as written, so they are two classes."""
    value = finite_number(label)
    twin = None if value is None else next(
        (k for k in sorted(labels) if finite_number(k) == value), None)
    if twin is None:
        return ""
    return (f"; training has {twin!r}, the same number written otherwise (a label is used as "
            f"written): write each number one way")


def _classes(cfg: RunSettings, pairs, path) -> tuple[set[str] | None, dict[Any, list[int]]]:
    """(the classes of --data, None under --regression; the rows' indices by the group each
    split holds out its share of): a class each for one label per row, so that every class
    keeps its share; one group of all rows for label sets and numbers, which a per-class draw
    cannot keep whole.

    Raises:
        UsageError: a single class (or, --regression, a single value) in the label column.
    """
    objective = objective_of(cfg.multi_label, cfg.regression)
    if objective == "regression":
        values = {lab for _, lab in pairs}
        if len(values) < 2:
            raise UsageError(f"--data {path}: column {cfg.label_column!r} has a single value "
                             f"({next(iter(values))!r}); --regression needs at least 2")
        return None, {"": list(range(len(pairs)))}
    labels = {c for _, lab in pairs for c in label_set(lab)}
    if len(labels) < 2:
        has = f"a single class ({next(iter(labels))!r})" if labels else "no label in any row"
        raise UsageError(f"--data {path}: column {cfg.label_column!r} has {has}; a classifier "
                         f"needs at least 2")
    if objective == "multi":
        return labels, {"": list(range(len(pairs)))}
    by_label: dict[Any, list[int]] = {}
    for i, (_, lab) in enumerate(pairs):
        by_label.setdefault(lab, []).append(i)
    return labels, by_label


def classes_of(splits: dict[str, Any]) -> list[str]:
    """The classes of the splits, in ``class_order``: those of --data, since a held-out file's
    are checked to be among them and a held-out share of --data is in one split or another (a
    class whose every row of label sets was drawn for testing still has an output)."""
    return sorted({c for key in ("train", "val", "test") for _, lab in splits[key]
                   for c in label_set(lab)}, key=class_order)


def untrained_classes(splits: dict[str, Any]) -> str | None:
    """The warning naming the classes of --data that no training row has, or None. Under
    --multi-label the held-out shares are drawn from all rows (not per class), so a rare
    class's every row may be drawn for the test or validation split: the model then has an
    output for it that never sees a positive example."""
    trained = {c for _, lab in splits["train"] for c in label_set(lab)}
    classes = classes_of(splits)
    missing = [c for c in classes if c not in trained]
    if not missing:
        return None
    names = ", ".join(map(repr, missing[:10])) + (", ..." if len(missing) > 10 else "")
    return (f"warning: the training split has no row of {len(missing)} of the {len(classes)} "
            f"classes ({names}): each of their rows was drawn for the test or validation split, "
            f"so the model has an output for them that never learns; add rows of them, or give "
            f"--test and --val files")


# how tools write a missing value: R's write.csv NA, pandas' astype(str) nan, SQL NULL, Excel
# #N/A; "none" is left out, a class name of its own in many label sets
MISSING_SPELLINGS = ("NA", "N/A", "#N/A", "<NA>", "nan", "NaN", "NAN", "NULL", "null")


def missing_value_classes(splits: dict[str, Any]) -> str | None:
    """The warning naming the classes spelled as a missing value is (``MISSING_SPELLINGS``),
    or None. A label used as written, such a class is trained as one of its own: what a user
    means when the rows have a class of that name, but not when they have no label at all."""
    found = [c for c in classes_of(splits) if c in MISSING_SPELLINGS]
    if not found:
        return None
    return (f"warning: the class {', '.join(map(repr, found))} may be a missing label, as it "
            f"is often written (R writes NA, pandas nan, SQL NULL); it is trained as a class of "
            f"its own: remove the rows that have no label, or keep them if it is a class")


def number_twins(splits: dict[str, Any], json_numbers: bool = False) -> str | None:
    """The warning naming classes that may be one number written two ways: an integer and a
    decimal of the same value ('1' and '1.0', as a file of integers and one of floats give
    it), or None. A label is used as written, so they are two classes. Two decimals ('3.1'
    and '3.10': versions, sections) or two integers ('01' and '1': codes) are not named,
    but for ``json_numbers`` (the classes are of a JSON Lines file read as written, whose
    numbers 2.5 and 2.50, or 1e2 and 100.0, are one number) two decimals are (JSON strings
    "3.1" and "3.10" too: the label texts no longer say which were numbers).

    Examples:
        >>> number_twins({"train": [("a", "1"), ("b", "1.0"), ("c", "3.1"), ("d", "3.10")],
        ...               "val": [], "test": []})
        "warning: classes that may be one number written two ways ('1' and '1.0') are trained as different classes; write each number one way if they are one class"
    """
    by_value: dict[float, list[str]] = {}
    for c in classes_of(splits):
        value = finite_number(c)
        if value is not None:
            by_value.setdefault(value, []).append(c)
    twins = [names for names in by_value.values() if len(names) > 1 and (
             json_numbers or any(n.lstrip("+-").isdigit() for n in names))
             and not all(n.lstrip("+-").isdigit() for n in names)]
    if not twins:
        return None
    said = "; ".join(" and ".join(map(repr, names)) for names in twins[:5])
    return (f"warning: classes that may be one number written two ways ({said}) are trained "
            f"as different classes; write each number one way if they are one class")


def class_warnings(cfg: dict[str, Any], splits: dict[str, Any]) -> list[str]:
    """The warnings about the classes of a run's splits, said when it starts: classes no
    training row has (--multi-label), spelled as a missing value, or one number twice."""
    if cfg.get("regression"):
        return []
    # the classes are those of --data (a held-out file's are checked to be among them)
    json_numbers = bool(cfg.get("json_decimals_as_written")) and file_format(
        cfg["data"]) == "jsonl"
    found = (untrained_classes(splits) if cfg.get("multi_label") else None,
             missing_value_classes(splits), number_twins(splits, json_numbers))
    return [note for note in found if note]


def load_splits(cfg: RunSettings, *, digests: dict[str, str] | None = None, val_file: bool = True,
                notes: list[str] | None = None) -> dict[str, list[tuple[Any, str]]]:
    """The (text, label) pairs of the train / val / test splits — ((T, F) tensor, label) sets
    with ``--set-column``, and then also ``"features"``, the feature columns' names. A label
    is a class name, a tuple of them (--multi-label) or a number (--regression): ``labels.py``.

    Args:
        cfg: the run's typed config (files, columns, ``seed``, ``val_fraction``,
            ``test_fraction``).
        digests: when given, receives the SHA-256 of the bytes read from each file, by option
            ("data", "test", "val").
        notes: when given, receives the notes of rows with no label (``unlabelled_rows``) and
            a warning per held-out split with texts of the training split too
            (``attnlab.data.overlap``): a --test or --val file, or rows drawn from a --data
            file that repeats a row.
        val_file: False: a --val FILE is not read (``evaluate``: no test row depends on it).

    Raises:
        UsageError: on data errors (no ``--data``, a single class, too few rows to hold out a
            split, an unseen label in a held-out file), and bytes not config.yaml's digest.
    """
    sets = cfg.set_column
    if not cfg.data:
        raise UsageError(f"--data FILE is required: {KINDS} with columns "
                         f"{sets or cfg.text_column!r} and {cfg.label_column!r}")
    digests = {} if digests is None else digests
    pairs, lines, path, digests["data"] = read_examples(cfg, "data", cfg.data, pinned=True)
    features = getattr(pairs, "features", None)  # held-out files must have the same features
    labels, by_label = _classes(cfg, pairs, path)
    rng = random.Random(cfg.seed)
    splits: dict[str, Any] = {}
    train_idx = list(range(len(pairs)))
    left = 1.0  # the fraction of --data not yet held out: fractions are of the whole file
    # a held-out split's lines, its file, and how a warning names it
    held_lines: dict[str, tuple[list[int], Any, str]] = {}
    for key, given, fraction in (("test", cfg.test, cfg.test_fraction),
                                 ("val", cfg.val, cfg.val_fraction)):
        if given:
            if key == "test" or val_file:
                splits[key], (held, held_path) = _held_out_file(cfg, key, given, features,
                                                                labels, digests)
                held_lines[key] = held, held_path, f"--{key} {held_path}"
            continue
        keep = set(train_idx)
        subset = {lab: [i for i in idx if i in keep] for lab, idx in by_label.items()}
        train_idx, held_idx = _split(subset, min(1.0, fraction / left), rng)
        left -= fraction
        if not held_idx:
            raise UsageError(f"--data {path}: too few {'sets' if sets else 'rows'} ({len(pairs)}) "
                             f"to hold out a {key} split; add rows or give --{key} FILE")
        splits[key] = [pairs[i] for i in held_idx]
        held_lines[key] = [lines[i] for i in held_idx], path, f"the {key} rows of --data {path}"
    splits["train"] = [pairs[i] for i in train_idx]
    if notes is not None:
        notes += _unlabelled_notes(cfg, (pairs, lines, path), splits, held_lines)
        if not sets:
            notes += _trained_inputs(splits, held_lines) + _chosen_inputs(cfg, splits, held_lines)
    if sets:
        splits["features"] = features
    return splits


def no_label(pairs, lines, path) -> tuple[int, str | None]:
    """How many of ``pairs`` (at ``lines`` of the file ``path``) have no label (the empty
    label set of --multi-label), and the place of the first ("line 3"; None when none has)."""
    empty = [line for (_, label), line in zip(pairs, lines) if label == ()]
    return len(empty), (place(path, empty[0]) if empty else None)


def unlabelled_rows(key: str, path, rows: int, empty: int, first: str | None) -> str | None:
    """The note for the ``empty`` of the ``rows`` rows of ``--key path`` with no label (the
    empty label set: every class no), the first at ``first`` (``no_label``); None when every
    row has one. A row left without a label by mistake would otherwise train, or be scored,
    as a row of no class without a word.

    >>> unlabelled_rows("data", "d.csv", 4, 1, "line 3")[:53]
    'note: --data d.csv: 1 of its 4 rows have no label (fi'
    """
    if not empty:
        return None
    return (f"note: --{key} {path}: {empty} of its {rows} rows have no label "
            f"(first: {first}); --multi-label reads each as every class no")


def _unlabelled_notes(cfg: RunSettings, data: tuple, splits: dict[str, Any],
                      held_lines: dict[str, tuple[list[int], Any, str]]) -> list[str]:
    """``unlabelled_rows``' notes of --data (``data``: its pairs, lines and path) and of each
    --test or --val FILE read (``held_lines``' entries of a file, not of rows of --data)."""
    files = [("data", *data)] + [(key, splits[key], *held_lines[key][:2])
                                 for key in ("test", "val") if getattr(cfg, key)
                                 and key in held_lines]
    found = (unlabelled_rows(key, path, len(pairs), *no_label(pairs, lines, path))
             for key, pairs, lines, path in files)
    return [note for note in found if note]


def _trained_inputs(splits: dict[str, Any], held_lines: dict[str, tuple[list[int], Any, str]]
                    ) -> list[str]:
    """The warning per held-out split (``held_lines``: its lines, its file, its name) with
    texts that the training split has too (``attnlab.data.overlap``)."""
    found = (shared_inputs((x for x, _ in splits["train"]), [x for x, _ in splits[key]],
                           places(path, lines), what=what)
             for key, (lines, path, what) in held_lines.items())
    return [note for note in found if note]


def _chosen_inputs(cfg: RunSettings, splits: dict[str, Any],
                   held_lines: dict[str, tuple[list[int], Any, str]]) -> list[str]:
    """The warning for test texts that the validation split has too when it chooses the
    weights (--keep-best) or stops the run (--patience): ``attnlab.data.overlap``."""
    if "val" not in held_lines or "test" not in held_lines:
        return []
    lines, path, what = held_lines["test"]
    chosen = chosen_by(held_lines["val"][2], keep_best=cfg.keep_best, patience=cfg.patience)
    note = chosen and shared_inputs((x for x, _ in splits["val"]), [x for x, _ in splits["test"]],
                                    places(path, lines), what=what, chosen=chosen)
    return [note] if note else []


def _held_out_file(cfg: RunSettings, key: str, path: str, features, labels: set[str] | None,
                   digests: dict[str, str]) -> tuple[list, tuple[list[int], Any]]:
    """(the examples of the --test or --val FILE ``path``, (their lines, the file)), checked
    against the labels of --data and config.yaml's digest; its SHA-256 into ``digests``."""
    held, lines, held_path, digests[key] = read_examples(cfg, key, path, features, pinned=True)
    check_labels(held, lines, held_path, labels, key)
    return list(held), (lines, held_path)


def read_and_pin(cfg: dict[str, Any], typed: Callable[[dict[str, Any]], RunSettings],
                 said: list[str] | None = None) -> dict[str, list[tuple[Any, str]]]:
    """``validate``'s reading of the files: the splits (``load_splits`` of ``typed(cfg)``, the
    settings dict as the task's run config), with each file's SHA-256 recorded in the settings
    dict's ``data_sha256`` (saved with config.yaml: evaluate and --resume check it). The bytes
    trained on must be the ones pinned, and on --resume the ones the run started with. The
    warnings on the data (when the run starts, not on --resume) go into ``said``, for the
    caller to print once its own checks pass (a refusal stays one line); printed now if None.
    """
    paths = {key: cfg.get(key) for key in DATA_FILES}
    resumed = bool(cfg.get("resume") and cfg.get("data_sha256"))
    if resumed:  # first: its message says which file changed since the run started
        check_data_files(paths, cfg["data_sha256"], purpose="resume")
    if not cfg.get("resume"):  # a run resumed keeps its reading (``ClassifyDerived``), and a
        # run from --init RUN takes RUN's (``ClassifyTask.init_settings``)
        cfg["json_decimals_as_written"] = bool(cfg.get("json_decimals_as_written", True)
                                               if cfg.get("init") else True)
    digests: dict[str, str] = {}
    notes: list[str] = []
    splits = load_splits(typed(cfg), digests=digests, notes=notes)  # data errors now, before
    # the run directory
    notes += class_warnings(cfg, splits)
    if not resumed:  # the settings dict, before the run config is frozen
        cfg.update(record_data_files(paths))
    for key, digest in digests.items():
        check_digest(cfg[key], digest, cfg["data_sha256"].get(key), what=f"--{key}")
    if not resumed:  # said when the run starts, not again on --resume
        if said is None:
            print_notes(notes)
        else:
            said += notes
    return splits


def print_notes(notes: list[str]) -> None:
    """Each warning on standard error, a line each."""
    for note in notes:
        print(note, file=sys.stderr, flush=True)
