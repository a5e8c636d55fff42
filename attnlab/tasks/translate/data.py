"""The text side of ``attnlab train translate``: the pairs of each split, the language checks and
the two tokenisers.

Why a module of its own: the task's spec (``spec.py``) checks the languages and reads a
``--data`` file before a run starts, and the runtime (``runtime.py``) needs the same
splits to train, to ``evaluate`` and to ``translate``; everything here works on text, so it
needs no torch (the tensors are the runtime's). It holds the built-in splits (numbers by
num2words, dates by babel, test and validation items held out from the training stream), the
splits of the user's ``--data``/``--test`` files, the choice and fitting of the two tokenisers
(``TranslationTokenizers``), and the spelling of digits. The spec imports it only inside
``validate``: every ``attnlab`` command builds its parsers from the specs, and need not load
num2words to do so.
"""
from __future__ import annotations

import random
import re
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterator
from typing import Any

from ...data.dates import DatePairs, check_locale, held_out_days
from ...data.numbers import NumberPairs, check_language, held_out_numbers, spell
from ...data.overlap import SharedCount, chosen_by, shared_inputs
from ...data.tables import CHUNK_ROWS, Table, check_digest, places, read_table, table_chunks
from ...errors import UsageError
from ...run_config import RunSettings
from ...runs import check_data_files, pin_data_files
from ...tokenizers import BPETokenizer, CharTokenizer, WordTokenizer, note_unknown

__all__ = ["TARGET_TOKENIZER_FILE", "TranslationTokenizers", "check_languages", "builtin_splits",
           "read_pairs", "file_splits", "check_files", "evaluation_pairs", "spell_digits",
           "resolve_tokenizer", "fit_tokenizer"]

TARGET_TOKENIZER_FILE = "target_tokenizer.json"


@dataclass
class TranslationTokenizers:
    """The source and target tokenisers of a translation run.

    ``encode`` reads source text, ``decode`` writes target text; ``save(path)`` writes the
    source tokeniser to ``path`` and the target one next to it as ``target_tokenizer.json``,
    which ``TranslationTokenizers.load(path)`` reads back.

    The model's inputs are made here, from the tokenisers' own special ids:

    - attnlab's tokenisers (pad 0, sos 1, eos 2): a source is its pieces, a target
      ``[sos, pieces..., eos]``;
    - a Marian checkpoint's (``src`` and ``tgt`` the same ``MarianTokenizer``), as Marian was
      trained: a source is its pieces then ``</s>``, a target ``[pad, pieces..., </s>]``
      (Marian's decoder starts from its pad id), the target's pieces cut by its target
      SentencePiece model.

    A source is read without the spaces around it (``as_source``) when ``strip_sources`` is
    set: a run's ``sources_stripped``, false for a run made before, which trained on them.

    Examples:
        >>> from attnlab.tokenizers import WordTokenizer
        >>> tok = WordTokenizer.fit(["one two"])
        >>> pair = TranslationTokenizers(tok, tok)
        >>> pair.encode_sources(["one two"]), pair.encode_targets(["one two"])
        ([[4, 5]], [[1, 4, 5, 2]])
    """

    src: Any
    tgt: Any
    strip_sources: bool = True

    @property
    def marian(self) -> bool:
        """Whether these are a Marian checkpoint's tokeniser (see the class doc)."""
        return self.src.kind == "marian"

    def encode(self, text: str) -> list[int]:
        """The encoder's input ids of ``text`` (``encode_sources``)."""
        return self.encode_sources([text])[0]

    def decode(self, ids) -> str:
        return self.tgt.decode(ids)

    def read_sources(self, texts: list[str]) -> list[str]:
        """``texts`` as the model reads them: without the spaces around each (``as_source``),
        unless the run trained on them (``strip_sources`` false)."""
        return [as_source(t) for t in texts] if self.strip_sources else list(texts)

    def encode_sources(self, texts: list[str]) -> list[list[int]]:
        """The encoder's input ids of each text (without padding), read as the model reads it
        (``read_sources``)."""
        texts = self.read_sources(texts)
        if self.marian:
            return [self.src.encode(t, add_special_tokens=True) for t in texts]
        return self.src.encode_batch(texts)

    def note_unknown(self, texts: list[str], labels: list[str]) -> None:
        """``attnlab.tokenizers.note_unknown`` of the sources as the model reads them
        (``read_sources``): a tab after a text is not read, so it is not named as unknown."""
        note_unknown(self.src, self.read_sources(texts), labels)

    def source_pieces(self, text: str) -> list[str]:
        """A readable label for each id of ``encode_sources([text])[0]``."""
        pieces = [t.strip() or repr(t) for t in self.src.tokenize(self.read_sources([text])[0])]
        return [*pieces, "</s>"] if self.marian else pieces

    def encode_targets(self, texts: list[str]) -> list[list[int]]:
        """The decoder's ids of each target text: start, pieces, end (teacher forcing reads all
        but the last and predicts all but the first)."""
        if self.marian:
            return [[self.tgt.sos_id, *self.tgt.encode_target(t)] for t in texts]
        return self.tgt.encode_batch(texts, add_special_tokens=True)

    def decoder_input(self, translation: str) -> list[int]:
        """The start id then the pieces of ``translation`` (no end): what the decoder reads while
        it writes ``translation``."""
        if self.marian:
            return [self.tgt.sos_id, *self.tgt.encode_target(translation,
                                                             add_special_tokens=False)]
        return [self.tgt.sos_id, *self.tgt.encode(translation)]

    def save(self, path: str | Path) -> None:
        self.src.save(path)
        self.tgt.save(Path(path).with_name(TARGET_TOKENIZER_FILE))

    @classmethod
    def load(cls, path: str | Path, *, strip_sources: bool) -> TranslationTokenizers:
        """The pair ``save(path)`` wrote (a run directory's ``tokenizer.json`` and its sibling),
        of any kind attnlab saves (a checkpoint's own too: ``load_any_tokenizer``), reading
        sources as the run does (its ``sources_stripped``)."""
        from ...interop.saved import load_any_tokenizer

        return cls(load_any_tokenizer(path),
                   load_any_tokenizer(Path(path).with_name(TARGET_TOKENIZER_FILE)),
                   strip_sources=strip_sources)


def as_source(text: str) -> str:
    """``text`` as a model reads it: without the spaces (tabs, line ends) around it. Byte-level
    BPE and the word and character tokenisers keep spaces as tokens, so "twelve " would read
    as a sentence that ends in a space: one the model never saw (the built-in data and most
    files have none), translated as something else than "twelve" (trailing spaces are easily
    typed, and left in a file of inputs).

    Examples:
        >>> as_source("  twelve \t")
        'twelve'
    """
    return text.strip()


# ---- splits -----------------------------------------------------------------------------
def check_languages(cfg: RunSettings) -> None:
    """``UsageError`` naming ``--src`` or ``--tgt`` when the built-in dataset cannot be written
    in it (numbers: a num2words language; dates: a babel locale)."""
    check = check_locale if cfg.dataset == "dates" else check_language
    for key, language in (("src", cfg.src), ("tgt", cfg.tgt)):
        try:
            check(str(language))
        except ValueError as e:
            raise UsageError(f"--{key}: {e}") from None


def builtin_splits(cfg: RunSettings):
    """(endless training stream, validation pairs, test pairs) of the built-in dataset."""
    if cfg.dataset == "dates":
        test, val = held_out_days(cfg.test_size, cfg.val_size)
        stream = DatePairs(cfg.src, cfg.tgt, exclude=set(test) | set(val), seed=cfg.seed)
    else:
        test, val = held_out_numbers(cfg.max_number, cfg.test_size, cfg.val_size)
        stream = NumberPairs(cfg.src, cfg.tgt, cfg.max_number,
                             exclude=set(test) | set(val), seed=cfg.seed)
    return stream, [stream.pair(n) for n in val], [stream.pair(n) for n in test]


def _pair_columns(cfg: RunSettings) -> list[str]:
    """The run's source and target columns; ``UsageError`` where they are one."""
    if cfg.src_column == cfg.tgt_column:  # the model would learn to copy its input
        raise UsageError(f"--src-column and --tgt-column are both {cfg.src_column!r}; they must "
                         f"name two different columns")
    return [cfg.src_column, cfg.tgt_column]


def _pair_rows(path: str, cfg: RunSettings, what: str) -> Table:
    """The rows of a table file, of the run's source and target columns."""
    return read_table(path, columns=_pair_columns(cfg), what=what)


def pair_chunks(cfg: RunSettings, data: str, rows: int = CHUNK_ROWS
                ) -> Iterator[tuple[list[tuple[str, str]], list[str], Table]]:
    """``evaluate --data FILE``'s pairs, ``rows`` at a time, the file read as they come
    (``table_chunks``): per chunk (its (source, reference) pairs, each named "--data FILE line
    N", the chunk's ``Table``: its lines and the digest of the bytes read so far). A source of
    digits is read as ``attnlab translate`` reads it (``spell_digits``)."""
    for chunk in table_chunks(data, _pair_columns(cfg), what="--data", rows=rows):
        labels = [f"--data {data} {where}" for where in places(data, chunk.lines)]
        sources = spell_digits(cfg, chunk.column(cfg.src_column), labels)
        yield list(zip(sources, chunk.column(cfg.tgt_column), strict=True)), labels, chunk


def trained_sources(cfg: RunSettings) -> SharedCount | None:
    """A count of the rows of ``evaluate --data FILE`` whose source the run trained on (a
    pair of its own --data's training split), seen a chunk at a time (``see_sources``); None
    when the run trained on no file, and when that file moved or changed since: which rows
    were trained on is then unknown."""
    if cfg.data is None:
        return None
    try:
        check_data_files(_files_of(cfg), cfg.data_sha256)
        train = _placed_splits(cfg)[0]
    except UsageError:
        return None
    return SharedCount(_as_read(cfg, [source for (source, _), _ in train]))


def see_sources(count: SharedCount | None, cfg: RunSettings, pairs, chunk: Table) -> None:
    """``count`` (``trained_sources``') of one chunk of ``pair_chunks``."""
    if count is not None:
        count.see(_as_read(cfg, [source for source, _ in pairs]),
                  lambda: places(chunk.path, chunk.lines))


def read_pairs(path: str, cfg: RunSettings, what: str, *, pinned: bool = False
               ) -> list[tuple[str, str]]:
    """The (source, target) rows of a table file; ``what`` names its flag in errors.

    ``pinned``: the file is the run's own ``--data``/``--test``, so its bytes must be the ones
    config.yaml's ``data_sha256`` recorded (when it has), else ``UsageError``: between the
    check at the start and this read, the file changed."""
    return [pair for pair, _ in _placed_pairs(path, cfg, what, pinned=pinned)]


def _placed_pairs(path: str, cfg: RunSettings, what: str, *, pinned: bool = False
                  ) -> list[tuple[tuple[str, str], str]]:
    """``read_pairs``'s pairs, each with its place in the file ("line 7", for warnings)."""
    rows = _pair_rows(path, cfg, what)
    if pinned:
        key = what.lstrip("-")
        check_digest(rows.path, rows.sha256, (cfg.data_sha256 or {}).get(key), what=what)
    return [((r[cfg.src_column], r[cfg.tgt_column]), where)
            for r, where in zip(rows, places(rows.path, rows.lines), strict=True)]


def file_splits(cfg: RunSettings):
    """(train, val, test) pairs of --data (and --test); held-out rows chosen with the seed."""
    return tuple([pair for pair, _ in part] for part in _placed_splits(cfg))


def _placed_splits(cfg: RunSettings):
    """``file_splits``' three parts, each pair with its place in its file."""
    pairs = _placed_pairs(cfg.data, cfg, "--data", pinned=True)
    rows = len(pairs)
    random.Random(cfg.seed).shuffle(pairs)
    test = _placed_pairs(cfg.test, cfg, "--test", pinned=True) if cfg.test else None
    held = max(1, len(pairs) // 10)
    if test is None:
        test, pairs = pairs[:held], pairs[held:]
    val, train = pairs[: min(held, cfg.val_size)], pairs[min(held, cfg.val_size) :]
    if len(train) < 1 or not val:  # --test given: a validation row and one to train on
        held_out, least = ("a validation row", 2) if cfg.test else ("test and validation rows", 3)
        raise UsageError(f"--data {cfg.data} has {rows} row{'' if rows == 1 else 's'}: too few "
                         f"to hold out {held_out} and train on the rest; give at least {least}")
    return train, val, test


def trained_sources_notes(cfg: RunSettings, train, val, test) -> list[str]:
    """The warnings (``attnlab.data.overlap``) for the validation and test pairs whose source a
    training pair has too: a file that repeats a row (or a --test cut from --data) puts copies
    of it on both sides of the split, and the scores then count sentences the model learnt;
    and for the test pairs whose source a validation pair has, when the validation split
    chooses the weights (--keep-best, --patience: the test scores are optimistic). Sources
    are compared as the tokeniser reads them (in the run's Unicode form)."""
    def read(part):
        return _as_read(cfg, [source for (source, _), _ in part])

    val_what = f"the validation rows of --data {cfg.data}"
    test_what = f"--test {cfg.test}" if cfg.test else f"the test rows of --data {cfg.data}"
    chosen = chosen_by(val_what, keep_best=cfg.keep_best, patience=cfg.patience)
    found = [shared_inputs(read(train), read(part), [where for _, where in part], what=what)
             for part, what in ((val, val_what), (test, test_what))]
    if chosen:  # test pairs that chose the weights
        found.append(shared_inputs(read(val), read(test), [where for _, where in test],
                                   what=test_what, chosen=chosen))
    return [note for note in found if note]


def _as_read(cfg: RunSettings, texts: list[str]) -> list[str]:
    """``texts`` as the run's model reads them: in its tokenisers' Unicode form, without the
    spaces around them (``as_source``) unless it trained on them (a run made before)."""
    texts = [as_source(t) for t in texts] if cfg.sources_stripped else texts
    return [unicodedata.normalize(cfg.normalize, t) for t in texts] if cfg.normalize else texts


def _files_of(cfg: RunSettings) -> dict[str, str | None]:
    return {"data": cfg.data, "test": cfg.test}


def check_files(cfg: RunSettings) -> dict[str, Any]:
    """``validate``'s reading of --data (and --test): their pairs split as ``file_splits``
    splits them, so that a malformed file fails before the run starts. Returns what the run
    records of them (``attnlab.runs.pin_data_files``: the paths made absolute, each file's
    SHA-256 under ``data_sha256``, which evaluate and --resume check), for ``validate`` to
    merge into the settings; on --resume, the files checked against those digests (``{}``)."""
    notes = trained_sources_notes(cfg, *_placed_splits(cfg))
    for note in [] if cfg.resume else notes:  # a resumed run warned when it started
        print(note, file=sys.stderr, flush=True)
    return pin_data_files(_files_of(cfg), cfg.data_sha256, resuming=cfg.resume)


def evaluation_pairs(cfg: RunSettings, data: str | None
                     ) -> tuple[list[tuple[str, str]], list[str] | None, str | None]:
    """(the pairs ``attnlab evaluate`` scores, where each is for errors, a warning for after
    the scores): those of ``--data FILE`` when given, each named by its line ("--data FILE
    line 3"), with the warning when rows of FILE have a source the run trained on; else the
    run's own held-out test pairs, unnamed (refused if the run's ``--data`` changed since it
    was trained: the same seed would then hold out other rows). A source of digits is read as
    ``attnlab translate`` reads it (``spell_digits``)."""
    if data is not None:
        pairs, labels, trained = [], [], trained_sources(cfg)
        for part, named, chunk in pair_chunks(cfg, data):
            pairs += part
            labels += named
            see_sources(trained, cfg, part, chunk)
        return pairs, labels, trained and trained.note(f"--data {data}")
    if cfg.data is None:
        return builtin_splits(cfg)[2], None, None
    check_data_files(_files_of(cfg), cfg.data_sha256)
    return file_splits(cfg)[2], None, None


def spell_digits(cfg: RunSettings, texts: list[str], labels: list[str] | None = None
                 ) -> list[str]:
    """With the built-in numbers, a text of digits ("342") is spelled in the source language.

    ``labels`` name the texts in errors (default "text number N").

    Raises:
        UsageError: for digits outside 0 .. max_number - 1, the numbers the run learnt: its
            German for them would be a guess of the wrong size, however fluent.

    Examples:
        >>> from attnlab.tasks import get_task
        >>> spell_digits(get_task("translate").config(max_number=1000), ["342", "seven"])
        ['three hundred and forty-two', 'seven']
    """
    if cfg.data is not None or cfg.dataset != "numbers":
        return texts
    spelled = []
    for i, text in enumerate(texts):
        if not _DIGITS.fullmatch(text):
            spelled.append(text)
            continue
        digits, top = text.strip(), cfg.max_number
        # a longer string of digits is out of range; int() refuses beyond 4,300 digits
        huge = len(digits.lstrip("+-").lstrip("0")) > len(str(top))
        if huge or not 0 <= int(digits) < top:
            name = labels[i] if labels else f"text number {i + 1}"
            shown = digits if len(digits) <= 40 else f"{digits[:20]}… ({len(digits)} characters)"
            raise UsageError(f"{name} ({shown}) is outside the numbers this run was trained "
                             f"on: 0 to {top - 1:,} (max_number {top} in config.yaml)")
        spelled.append(spell(int(digits), cfg.src))
    return spelled


_DIGITS = re.compile(r"\s*[+-]?\d+\s*")  # a sign too: "-5" is digits outside the range


# ---- tokenisers -------------------------------------------------------------------------
# ``auto`` takes words only when at most this share of held-out rows has a word the other
# rows never show (such a word is <unk> to a word tokeniser and cannot be produced).
UNSEEN_ROWS = 0.01


def rows_with_unseen_words(texts: list[str]) -> float:
    """The share of the last tenth of ``texts`` with a word the first nine tenths lack.

    Examples:
        >>> rows_with_unseen_words(["one two", "two one"] * 9 + ["one", "three"])
        0.5
    """
    cut = len(texts) - max(1, len(texts) // 10)
    seen = {w for t in texts[:cut] for w in t.split()}
    held = texts[cut:]
    return sum(any(w not in seen for w in t.split()) for t in held) / max(1, len(held))


def resolve_tokenizer(kind: str, texts: list[str], *, builtin: bool) -> str:
    """``auto``: words for built-in data written as several words from a closed vocabulary
    (English numbers: ~8 words of ~100, none unseen; dates), byte-level BPE otherwise: German
    numbers below a million are one long word, above it several words that held-out rows
    rarely share (98% of rows below 10^7 have an unseen one), and users' text has words the
    training rows never show, which BPE still spells."""
    if kind != "auto":
        return kind
    words = sum(len(t.split()) for t in texts) / max(1, len(texts))
    closed = builtin and words >= 2 and rows_with_unseen_words(texts) <= UNSEEN_ROWS
    return "word" if closed else "bpe"


def fit_tokenizer(kind: str, texts: list[str], vocab_size: int, normalize: str | None = "NFC"):
    """A ``kind`` ("char", "word" or "bpe") tokeniser fit on ``texts``, reading text in the
    Unicode form ``normalize`` (None: as given)."""
    if kind == "bpe":
        return BPETokenizer.fit(texts, vocab_size=vocab_size, normalize=normalize)
    return {"char": CharTokenizer, "word": WordTokenizer}[kind].fit(texts, normalize=normalize)
