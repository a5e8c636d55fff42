"""The files of ``attnlab train tag``: sentences of words, each word with a BIO tag.

Three formats, told apart by the path (``file_kind``):

    CoNLL (any other extension: .conll, .txt, .iob, ...)     JSON Lines (.jsonl, .ndjson)
    John  NNP  B-PER                                         {"tokens": ["John", "lives"],
    lives VBZ  O                                              "tags": ["B-PER", "O"]}
                                      (a blank line ends a sentence)

A CoNLL line is one word and its fields, separated by white space; the word is the first field
and the tag the last (``--tag-column N``: the N-th, counting from 0). Every line of a file has
the same number of fields; ``-DOCSTART-`` lines (CoNLL-2003's document breaks) are skipped. A
JSON Lines row has a list of words and a list of tags of the same length (``--tokens-column``,
``--tags-column`` name them). A Parquet file or a Hugging Face ``datasets`` directory
(``attnlab.data.columnar``) holds the same two columns, lists of text per row (the tags may be
a ``datasets`` ``Sequence`` of ``ClassLabel``: read as their names), checked as JSON Lines rows
are, each message naming the row.

Tags are BIO (IOB2): ``O``, or ``B-TYPE`` / ``I-TYPE`` with a non-empty type. ``PER`` alone,
``I-`` without a type or ``E-PER`` (IOBES) are refused, naming the file, the line and the tag:
entity scores read the prefix, and a tag they cannot read would be scored as something else.
Light: no torch, so the spec's ``validate`` reads the files before the run directory exists.

The split, for each of test and val not given as a file: the sentences of ``--data`` shuffled
with ``random.Random(--seed)``, and ``round(fraction · n)`` of them held out (at least one; the
fractions are of the whole file); a drawn sentence with a tag that no training sentence has
stays in training (``_keep_new_tags_in_training``).

Examples:
    >>> bio_problem("B-PER"), bio_problem("PER")
    (None, "tag 'PER' is not BIO: use O, B-TYPE or I-TYPE")
"""
from __future__ import annotations

import hashlib
import json
import random
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...data.label_forms import OneSpelling, other_form
from ...data.overlap import SharedCount, chosen_by, shared_inputs
from ...data.tables import (CHUNK_ROWS, COLUMNAR, check_digest, file_format,
                             parse_json_line, place, places, text_lines)
from ...errors import UsageError
from ...paths import not_found
from ...runs import check_data_files, record_data_files

if TYPE_CHECKING:
    from ...run_config import RunSettings

__all__ = ["Sentences", "read_sentences", "sentence_chunks", "bio_problem", "load_splits", "read_and_pin",
           "files_of", "known_tags", "check_tags", "check_entities", "read_file", "file_kind",
           "held_out_notes", "no_entity_note", "checked_chunks", "split_name",
           "shared_sentences", "JSONL_SUFFIXES", "DATA_FILES"]

JSONL_SUFFIXES = (".jsonl", ".ndjson")
DATA_FILES = ("data", "test", "val")
DOCSTART = "-DOCSTART-"
_BIO = re.compile(r"[BI]-\S+")


def file_kind(path: str | Path) -> str:
    """How ``read_sentences`` reads ``path``: ``"jsonl"`` (by its extension), ``"columnar"`` (a
    .parquet file or a datasets directory) or ``"conll"`` (anything else)."""
    if Path(path).suffix.lower() in JSONL_SUFFIXES:
        return "jsonl"
    return "columnar" if file_format(path) in COLUMNAR else "conll"


def bio_problem(tag: str) -> str | None:
    """Why ``tag`` is not a BIO tag, or None when it is one (``O``, ``B-X``, ``I-X``)."""
    if tag == "O" or _BIO.fullmatch(tag):
        return None
    return f"tag {tag!r} is not BIO: use O, B-TYPE or I-TYPE"


@dataclass
class Sentences:
    """The sentences of one file: ``words[i]`` and ``tags[i]`` (lists of the same length),
    ``lines[i]`` the line sentence i starts at (a columnar file's row), and the SHA-256 of
    the bytes read."""

    path: Path
    words: list[list[str]] = field(default_factory=list)
    tags: list[list[str]] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    sha256: str = ""

    def subset(self, rows: list[int]) -> "Sentences":
        """The sentences ``rows``, in that order."""
        return Sentences(self.path, [self.words[i] for i in rows],
                         [self.tags[i] for i in rows], [self.lines[i] for i in rows],
                         self.sha256)

    def __len__(self) -> int:
        return len(self.words)


def _check_tag(tag: str, where: str) -> str:
    problem = bio_problem(tag)
    if problem:
        raise UsageError(f"{where}: {problem}")
    return tag


def _check_width(fields: list[str], column: int, where: str) -> None:
    """A CoNLL file's first line: the word and a tag in field ``column`` (0 is the word)."""
    if len(fields) < 2:  # a comma-separated line is one field: CSV is not read here
        comma = (" (not by commas: a file that is not JSON Lines, Parquet or datasets is read "
                 "as CoNLL)" if "," in fields[0] else "")
        raise UsageError(f"{where}: 1 field ({fields[0][:40]!r}); a CoNLL line needs the word "
                         f"and its tag, separated by white space{comma}")
    if column >= len(fields):
        raise UsageError(f"{where}: {len(fields)} fields, so no field {column} (--tag-column "
                         f"{column}, counting the word as 0)")


def _spaced_word(*lines: str) -> str:
    """Why two lines of a tab-separated file differ in fields, where a tab-separated cell of
    one of them holds a space (``New York<TAB>B-LOC``): the fields are split at any white
    space, so such a word is two fields."""
    for line in lines:
        cells = line.strip().split("\t")
        spaced = next((c.strip() for c in cells if len(c.split()) > 1), None)
        if len(cells) > 1 and spaced:
            return (f" (fields are split at any white space, so {spaced[:40]!r} is "
                    f"{len(spaced.split())} fields; a word that holds a space can be given in "
                    f"JSON Lines)")
    return ""


def _conll_sentences(lines, path: Path, what: str, tag_column: int | None):
    """(words, tags, line it starts at) of each sentence of a CoNLL file's numbered lines."""
    width, words, tags, start, first = None, [], [], 0, ""
    for number, line in lines:
        fields = line.split()
        where = f"{what} {path} line {number}"
        if fields and fields[0] == DOCSTART:
            fields = []
        if not fields:
            if words:
                yield words, tags, start
            words, tags = [], []
            continue
        if width is None:
            width, first = len(fields), line
            column = width - 1 if tag_column is None else tag_column
            _check_width(fields, column, where)
        elif len(fields) != width:
            count = (f"{len(fields)} fields" if len(fields) > 1
                     else "1 field (a word without its tag)")
            raise UsageError(f"{where}: {count} where the file's first line has "
                             f"{width}{_spaced_word(line, first)}")
        if not words:
            start = number
        words.append(fields[0])
        tags.append(_check_tag(fields[column], where))
    if words:
        yield words, tags, start


def _strings(value: Any, name: str, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise UsageError(f"{where}: field {name!r} must be a list of non-empty strings, got "
                         f"{json.dumps(value)[:40]}")
    return value


def _row_sentence(words: Any, tags: Any, columns: tuple[str, str], where: str
                  ) -> tuple[list[str], list[str]] | None:
    """One JSON Lines or columnar row's sentence, checked: lists of non-empty strings of one
    length, BIO tags (None for a row without words)."""
    tokens, tags_key = columns
    words, tags = _strings(words, tokens, where), _strings(tags, tags_key, where)
    if len(words) != len(tags):
        raise UsageError(f"{where}: {len(words)} {tokens} but {len(tags)} {tags_key}")
    if not words:
        return None
    return [w.strip() for w in words], [_check_tag(t, where) for t in tags]


def _jsonl_sentences(lines, path: Path, what: str, columns: tuple[str, str]):
    """(words, tags, line) of each sentence of a JSON Lines file's numbered lines."""
    tokens, tags_key = columns
    for number, line in lines:
        if not line.strip():
            continue
        where = f"{what} {path} line {number}"
        row = parse_json_line(line, where)
        if not isinstance(row, dict) or tokens not in row or tags_key not in row:
            have = ", ".join(row) if isinstance(row, dict) else type(row).__name__
            raise UsageError(f"{where}: needs fields {tokens!r} and {tags_key!r} (has: "
                             f"{have or 'none'})")
        twice = [c for c in row.duplicates if c in columns]
        if twice:  # a plain json.loads would keep the last one and say nothing
            raise UsageError(f"{where}: field {twice[0]!r} appears twice in one object; keep "
                             f"one so it is clear which value to use")
        sentence = _row_sentence(row[tokens], row[tags_key], columns, where)
        if sentence:
            yield *sentence, number


def _open_columnar(path: Path, what: str, columns: tuple[str, str]):
    """The Parquet file or datasets directory ``path``, opened (``open_columnar``)."""
    from ...data.columnar import open_columnar, split_hint

    if not path.exists() and not path.is_symlink():
        split_hint(path, what)  # DIR/test of a DatasetDict without a test split
        raise not_found(what, path)
    return open_columnar(path, list(columns), what=what, lists=columns,
                         hint="; name them with --tokens-column and --tags-column")


def _columnar_sentences(source, path: Path, what: str, columns: tuple[str, str]):
    """(words, tags, row) of each sentence of an open columnar file, a batch at a time."""
    for first, batch in source.batches():
        for i, (words, tags) in enumerate(zip(*(batch[c] for c in columns))):
            sentence = _row_sentence(words, tags, columns, f"{what} {path} row {first + i}")
            if sentence:
                yield *sentence, first + i


def _noting_text(lines, seen: list[bool]):
    """``lines`` as they are, ``seen`` given True once one holds more than white space."""
    for number, line in lines:
        if not seen and line.strip():
            seen.append(True)
        yield number, line


def sentence_chunks(path: str | Path, *, what: str = "--data", tag_column: int | None = None,
                    columns: tuple[str, str] = ("tokens", "tags"), rows: int = CHUNK_ROWS
                    ) -> Iterator[Sentences]:
    """The sentences of a CoNLL, JSON Lines or columnar file (see the module doc), ``rows``
    at a time, the file read as its lines (a columnar file's batches) come: each chunk a
    ``Sentences`` whose ``sha256`` is the digest of the bytes read so far (the file's, once
    the last chunk is out). What is held grows with the chunk, not the file.

    Args:
        path: the file.
        what: its flag, to start each message.
        tag_column: CoNLL: the field holding the tag (0 is the word); None: the last.
        columns: JSON Lines, Parquet, datasets: the fields of the words and of the tags.
        rows: the sentences of a chunk.

    Raises:
        UsageError: one line naming the file (and the line), once its line is read: missing
            or unreadable, not UTF-8, a line with another number of fields, a tag not in BIO
            form or spelled in two Unicode forms, words and tags of different lengths, no
            sentence at all; a columnar file without the columns, or whose columns do not
            hold lists of text (``attnlab.data.columnar``).

    Examples:
        >>> _ = Path("two.conll").write_text("John B-PER\\nran O\\n\\nParis B-LOC\\n")
        >>> [(c.words, c.lines) for c in sentence_chunks("two.conll", rows=1)]
        [([['John', 'ran']], [1]), ([['Paris']], [4])]
    """
    path, kind = Path(path), file_kind(path)
    seen: list[bool] = []  # a text file: whether a line holds more than white space
    if kind == "columnar":
        source = _open_columnar(path, what, columns)
        sentences, digest = _columnar_sentences(source, path, what, columns), \
            (lambda: source.sha256)
    else:
        hasher = hashlib.sha256()
        lines = _noting_text(text_lines(path, hasher, what=what), seen)
        sentences = (_jsonl_sentences(lines, path, what, columns) if kind == "jsonl"
                     else _conll_sentences(lines, path, what, tag_column))
        digest = hasher.hexdigest
    forms = OneSpelling(f"{what} {path}", "the tags")  # a tag in two Unicode forms: two tags
    chunk = Sentences(path)
    for words, tags, line in sentences:
        if len(chunk) == rows:  # given once another sentence comes: the last, at the end
            chunk.sha256 = digest()
            yield chunk
            chunk = Sentences(path)
        for tag in tags:
            forms.see(tag, lambda: f"the sentence at {place(path, line)}")
        chunk.words.append(words), chunk.tags.append(tags), chunk.lines.append(line)
    if not chunk.words:
        raise UsageError(f"{what} {path}: no sentence ({_why_none(kind, bool(seen))})")
    chunk.sha256 = digest()  # the whole file's
    yield chunk


def read_sentences(path: str | Path, *, what: str = "--data", tag_column: int | None = None,
                   columns: tuple[str, str] = ("tokens", "tags")) -> Sentences:
    """The sentences of a CoNLL, JSON Lines or columnar file, all of them:
    ``sentence_chunks``' one chunk (with its arguments, checks and messages)."""
    whole, = sentence_chunks(path, what=what, tag_column=tag_column, columns=columns,
                             rows=sys.maxsize)
    return whole


def _why_none(kind: str, text: bool) -> str:
    """Why a file gave no sentence: empty (no ``text``: no line holds more than white space),
    or what its lines hold that is no sentence."""
    if kind != "columnar" and not text:
        return "the file is empty"
    if kind == "conll":  # every other line is a word, or refused
        return f"its only lines are {DOCSTART} lines, which are skipped"
    return "no row holds a word"


def known_tags(part: Sentences) -> set[str]:
    """The tags a model trained on ``part`` has an output for: its tags, and ``O``."""
    return {t for tags in part.tags for t in tags} | {"O"}


def check_entities(train: Sentences, *, resume: bool = False) -> None:
    """Refuse a training split whose every tag is ``O``: its model would say ``O`` for every
    word, and its run would report an accuracy near 1 beside an entity F1 of 0. Most often the
    tags are read from the wrong field, so the message names the flag that picks it (``resume``:
    a run made before such a file was refused, which goes on with its own settings, so the
    message says to start a new run). (A --data sentence with a tag is never held out alone:
    ``_keep_new_tags_in_training``.)"""
    if known_tags(train) != {"O"}:
        return
    field = "--tag-column N" if file_kind(train.path) == "conll" else "--tags-column NAME"
    why = (f"--data {train.path}: every tag is 'O' (no entity in its {len(train)} training "
           f"sentences)")
    if resume:
        raise UsageError(f"--resume: {why}, so the run's model can only say O (a run made "
                         f"before train tag refused such a file); start a new run with another "
                         f"--out, with {field} if the tags are in another field")
    raise UsageError(f"{why}, so a tagger has nothing to learn; are the tags in another field "
                     f"({field})?")


def check_tags(part: Sentences, known: set[str], key: str) -> None:
    """A tag of ``part`` (the file of option ``key``) that training never saw: the model has no
    output for it. Refused naming the file, the line of the sentence and the tag."""
    for tags, line in zip(part.tags, part.lines):
        for tag in tags:
            if tag not in known:
                shown = ", ".join(sorted(known)[:10]) + (", ..." if len(known) > 10 else "")
                raise UsageError(f"--{key} {part.path} {place(part.path, line)}: tag {tag!r} "
                                 f"never seen in training (tags: {shown})"
                                 f"{other_form(tag, known)}")


def shared_sentences(train: Sentences, part: Sentences, what: str,
                     chosen: tuple[str, str] | None = None) -> str | None:
    """``attnlab.data.overlap``'s warning for the held-out sentences ``part`` (named ``what``)
    of which some have the words of a training sentence (``chosen``: of the validation split
    that chose the weights, ``overlap.chosen_by``)."""
    return shared_inputs((tuple(w) for w in train.words), [tuple(w) for w in part.words],
                         places(part.path, part.lines), what=what, chosen=chosen)


def split_name(key: str, part: Sentences, given: bool) -> str:
    """How a warning names the held-out split ``key``: its file (``given``), or the sentences
    drawn from --data."""
    return f"--{key} {part.path}" if given else f"the {key} sentences of --data {part.path}"


def no_entity_note(tags: set[str], what: str, prefix: str) -> str | None:
    """The warning for held-out sentences (named ``what``, their ``known_tags`` ``tags``)
    without an entity (every tag ``O``): their entity scores (``prefix``: "val_", "test_") are
    0 whatever the model tags (recall is 0 of 0 entities, precision 0 of those it finds: 0/0
    reads as 0, as in ``scoring``)."""
    if tags != {"O"}:
        return None
    return (f"warning: {what}: no entity (every tag is 'O'), so {prefix}f1, {prefix}precision "
            f"and {prefix}recall are 0 whatever the model tags")


def held_out_notes(cfg: dict[str, Any], splits: dict[str, Sentences]) -> list[str]:
    """The warnings of the held-out splits when the run starts (not on --resume): sentences
    that the training split has too (a --val or --test file, or the sentences drawn from a
    --data file that repeats a sentence: that split's scores are partly of trained
    sentences), test sentences that the validation split has too when it chooses the weights
    (--keep-best, --patience: the test scores are optimistic), and no entity at all (its
    entity scores are 0 whatever the model tags).

    Raises:
        UsageError: --keep-best or --patience on an entity score (--monitor) of a validation
            split without an entity: it is 0 at every validation, so nothing is compared.
    """
    if cfg.get("resume"):
        return []
    notes = []
    name = {key: split_name(key, splits[key], bool(cfg.get(key))) for key in ("val", "test")}
    for key, what in name.items():
        notes.append(shared_sentences(splits["train"], splits[key], what))
        notes.append(no_entity_note(known_tags(splits[key]), what, f"{key}_"))
        if key == "val" and notes[-1]:
            _check_monitor(cfg, what)
    chosen = chosen_by(name["val"], keep_best=bool(cfg.get("keep_best")),
                       patience=cfg.get("patience"))
    if chosen:  # test sentences that chose the weights
        notes.append(shared_sentences(splits["val"], splits["test"], name["test"], chosen))
    return [note for note in notes if note]


def _check_monitor(cfg: dict[str, Any], val: str) -> None:
    """Refuse --keep-best or --patience on an entity score of a validation split (``val``,
    its name) without an entity: the score is 0 at every validation."""
    monitor, patience = cfg.get("monitor", "val_loss"), cfg.get("patience")
    named = "--keep-best" if cfg.get("keep_best") else f"--patience {patience}"
    if monitor in ("val_f1", "val_precision", "val_recall") and (cfg.get("keep_best")
                                                                  or patience):
        raise UsageError(f"--monitor {monitor}: {val}: no entity (every tag is 'O'), so "
                         f"{monitor} is 0 at every validation and {named} would compare "
                         f"nothing; give a --val FILE with entities, or --monitor val_loss")


def checked_chunks(cfg: RunSettings, path: str, rows: int = CHUNK_ROWS
                   ) -> tuple[Callable[[], Iterator[Sentences]], int, str, list[str | None]]:
    """``evaluate --data``'s first pass over the file ``path``: every sentence read and
    checked (``sentence_chunks``; a tag that training never saw refused, ``check_tags``),
    none kept, so that a bad line anywhere is refused before any sentence is scored. Returns
    (a function that reads its chunks of ``rows`` sentences again, how many sentences there
    are, the file's digest, the warnings ``held_out_notes`` gives a held-out file: sentences
    that training has, re-drawn from the run's files (none said where those changed or moved
    since: nothing to compare with), and no entity)."""
    def read() -> Iterator[Sentences]:
        return sentence_chunks(path, what="--data", tag_column=cfg.tag_column,
                               columns=(cfg.tokens_column, cfg.tags_column), rows=rows)

    known, tags, total = set(cfg.tags), set(), 0
    try:
        shared = SharedCount(tuple(w) for w in load_splits(cfg, val_file=False)["train"].words)
    except UsageError:
        shared = None
    for part in read():
        check_tags(part, known, "data")
        tags |= known_tags(part)
        total += len(part)
        if shared is not None:
            shared.see([tuple(w) for w in part.words], lambda: places(part.path, part.lines))
    what = f"--data {part.path}"
    return read, total, part.sha256, [shared and shared.note(what),
                                      no_entity_note(tags, what, "test_")]


def files_of(cfg: RunSettings) -> dict[str, str | None]:
    """The run's data files by option name (None where not given)."""
    return {"data": cfg.data, "test": cfg.test, "val": cfg.val}


def read_file(cfg: RunSettings, key: str, path: str) -> Sentences:
    """``read_sentences`` of the file of option ``key`` with the run's column settings."""
    return read_sentences(path, what=f"--{key}", tag_column=cfg.tag_column,
                          columns=(cfg.tokens_column, cfg.tags_column))


def load_splits(cfg: RunSettings, *, digests: dict[str, str] | None = None,
                val_file: bool = True) -> dict[str, Sentences]:
    """The train / val / test sentences (see the module doc for the split); ``digests``, when
    given, receives each file's SHA-256 by option. ``val_file=False``: a --val FILE is not
    read (``evaluate``: no test sentence depends on it), and the splits have no "val".

    Raises:
        UsageError: no --data, too few sentences to hold out a split, a file whose bytes are
            not those config.yaml's ``data_sha256`` recorded, and what ``read_sentences``
            refuses.
    """
    if not cfg.data:
        raise UsageError("--data FILE is required: a CoNLL file (a word and its tag per line), "
                         "or JSON Lines, Parquet or a datasets directory with 'tokens' and "
                         "'tags'")
    digests = {} if digests is None else digests
    recorded = cfg.data_sha256 or {}
    data = read_file(cfg, "data", cfg.data)
    check_digest(data.path, data.sha256, recorded.get("data"), what="--data")
    digests["data"] = data.sha256
    rng = random.Random(cfg.seed)
    order = list(range(len(data)))
    rng.shuffle(order)
    splits: dict[str, Sentences] = {}
    held: dict[str, list[int]] = {}  # the sentences of --data drawn for test and val
    for key, given, fraction in (("test", cfg.test, cfg.test_fraction),
                                 ("val", cfg.val, cfg.val_fraction)):
        if given and key == "val" and not val_file:
            continue
        if given:
            splits[key] = read_file(cfg, key, given)
            check_digest(splits[key].path, splits[key].sha256, recorded.get(key), what=f"--{key}")
            digests[key] = splits[key].sha256
            continue
        n = max(1, round(fraction * len(data)))
        if n >= len(order):
            raise UsageError(f"--data {data.path}: too few sentences ({len(data)}) to hold out "
                             f"a {key} split; add sentences or give --{key} FILE")
        held[key], order = sorted(order[:n]), order[n:]
    _keep_new_tags_in_training(data, held, order)
    for key, rows in held.items():
        if not rows:
            raise UsageError(f"--data {data.path}: too few sentences ({len(data)}) to hold out "
                             f"a {key} split whose tags training also has; add sentences or "
                             f"give --{key} FILE")
        splits[key] = data.subset(rows)
    splits["train"] = data.subset(sorted(order))
    return splits


def _keep_new_tags_in_training(data: Sentences, held: dict[str, list[int]],
                               train: list[int]) -> None:
    """Move back to ``train`` each sentence drawn for a held-out split (``held``, test first)
    that has a tag no training sentence has: the model would have no output for that tag, so
    the run would be refused (naming a --test or --val the user never gave). So a rare tag's
    first sentence trains, as classify keeps a class's last example in training; its later
    sentences may still be held out. Draws without such a sentence are unchanged."""
    known = known_tags(data.subset(train))
    for key, rows in held.items():
        kept = []
        for i in rows:
            if set(data.tags[i]) <= known:
                kept.append(i)
            else:
                train.append(i)
                known |= set(data.tags[i])
        held[key] = kept


def read_and_pin(cfg: dict[str, Any], typed: Callable[[dict[str, Any]], RunSettings]
                 ) -> dict[str, Sentences]:
    """``validate``'s reading of the files: the splits, each file's SHA-256 recorded in the
    settings dict's ``data_sha256`` (a resumed run: checked against it first)."""
    paths = {key: cfg.get(key) for key in DATA_FILES}
    resumed = bool(cfg.get("resume") and cfg.get("data_sha256"))
    if resumed:
        check_data_files(paths, cfg["data_sha256"], purpose="resume")
    digests: dict[str, str] = {}
    splits = load_splits(typed(cfg), digests=digests)
    if not resumed:
        cfg.update(record_data_files(paths))
    for key, digest in digests.items():
        check_digest(cfg[key], digest, cfg["data_sha256"].get(key), what=f"--{key}")
    return splits
