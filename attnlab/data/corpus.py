"""Text corpora as memory-mapped token files, for corpora larger than memory.

Shapes: B batch, T block (window) length, N tokens in a split.

``prepare`` tokenises text files once, streaming them in chunks, into a directory:

    train.bin   the first (1 - val_fraction) of the text's tokens, raw uint16 (or uint32)
    val.bin     the rest (held out: val_loss, val_perplexity)
    tokenizer.json, meta.json (vocab_size, dtype, token counts, files)

``TokenWindows`` reads (input, target) windows straight from such a file through ``np.memmap``:
the operating system pages in only the windows touched, so a 100 GB corpus trains in a few MB
of memory (as nanoGPT does with its ``train.bin``).

Identity ("Trust: no silent wrong result"). Token ids mean nothing without the tokeniser that
made them, so a corpus replaced under a run's feet would give a different ``val_loss`` without
any warning. Hashing a multi-GB ``train.bin`` at every ``evaluate`` would be slow, so ``prepare``
computes the SHA-256 of every token file *while writing it* (and of tokenizer.json and of each
source text as it reads it) and stores them in ``meta.json["sha256"]``. meta.json is written
last (the commit: a directory without it is not a corpus), so the digest of meta.json, a file of
a few hundred bytes, identifies the whole corpus; ``corpus_identity`` returns it together with
tokenizer.json's (which identifies the tokeniser also when meta.json holds no digests: see
docs/compatibility.md). A run records it when it starts and ``evaluate`` / ``--resume``
compare it (``attnlab.tasks.lm``). ``read_meta``
also checks, cheaply, that the token files have the sizes meta.json states and that
tokenizer.json is the one it names. The token files' digests in meta.json let a user verify the
content in full (``sha256sum train.bin``) when they suspect a file was edited in place. Both
live in ``corpus_meta`` (no numpy, no torch: ``attnlab train`` checks --data with them before
loading either) and are re-exported here.

``prepare`` never overwrites: a non-empty ``out_dir`` is refused unless ``force=True``
(``attnlab prepare --force``), and even then only a directory that holds a prepared corpus
(meta.json) and nothing but the files ``prepare`` writes is replaced.
"""
from __future__ import annotations

import codecs
import hashlib
import os
import re
import sys
import unicodedata
from array import array
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from itertools import islice
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from ..errors import UsageError
from ..paths import check_output, hold, is_special_file, not_found
from ..runs import naming, sync
from ..settings import CorpusSettings, check_argument
from ..tokenizers import (DEFAULT_FORM, TOKENIZER_KINDS, Tokenizer, pieces_notes,
                          vocab_too_small)
# the readers that import no numpy or torch, re-exported (``from attnlab.data.corpus import
# read_meta`` works)
from .corpus_meta import CORPUS_FILES, SPLITS, corpus_identity, read_meta
from .overlap import shared_note
from .tables import COLUMNAR, decode_utf8, file_format

__all__ = ["prepare", "encode_file", "iter_text_chunks", "read_meta", "corpus_identity",
           "TokenWindows", "TOKENIZERS", "SPLITS", "CORPUS_FILES"]

TOKENIZERS = TOKENIZER_KINDS  # the one registry of tokenizer kinds (attnlab.tokenizers)
CHUNK_CHARS = 1 << 20  # characters read at a time
BPE_FIT_CHARS = 1 << 13  # ... when fitting BPE (see _one_tokenizer_thread)
TEXT_COLUMN = "text"  # the column of a table read by default
# how much of its neighbours a chunk is encoded between (``_encoded``): a token is rarely
# longer than a few words
_CONTEXT_CHARS = 256
# characters of a chunk that byte-level BPE encodes at a time (``_encode_text``)
BPE_ENCODE_CHARS = 1 << 12


def iter_text_chunks(paths: Sequence[str | Path], chunk_chars: int = CHUNK_CHARS, *,
                     digests: list | None = None, text_column: str = TEXT_COLUMN
                     ) -> Iterator[tuple[int, str]]:
    """Yield (file index, text) pieces of at most ``chunk_chars`` characters, file by file.

    A piece ends before the last run of white space it holds when there is one, so a word is
    never cut in two and keeps the white space before it: the word and byte-level BPE
    tokenisers (attnlab's and GPT-2's) start a piece with the space before a word, so encoding
    piece by piece gives the ids of the whole text. The rest starts the next piece. Joining a
    file's pieces gives the file back exactly.

    A table (``attnlab.data.tables.file_format``: a CSV, TSV, JSON Lines or Parquet file or a
    Hugging Face datasets directory) gives the texts of its column ``text_column``, row by row,
    read a line (or a batch of rows) at a time, never whole;
    each row is a document of its own (``prepare`` puts the EOS id between rows, as between
    files), and a row of no text ("") is no document and is skipped.

    Args:
        digests: when given, ``digests[i]`` becomes the SHA-256 (hex) of file i's bytes as read;
            of a directory, ``attnlab.runs.tree_digest``.
        text_column: the column of a table to read.

    Raises:
        UsageError: naming a file that is missing, a directory, a symbolic-link loop,
            unreadable, not UTF-8 text or holding a NUL byte; a table without ``text_column``,
            or whose column is not text (a JSON value that is not a string), or a row that
            cannot be read (a malformed JSON line or CSV row; naming its line).
    """
    for (i, _), text in _documents(paths, chunk_chars, digests, text_column):
        yield i, text


def _documents(paths, chunk_chars: int, digests: list | None, text_column: str
               ) -> Iterator[tuple[tuple[int, int], str]]:
    """``iter_text_chunks``' pieces, each keyed by its document: (file index, row index; 0 for
    a text file), so that ``_encoded`` knows where one document ends."""
    if chunk_chars < 2:
        raise ValueError(f"chunk_chars must be >= 2, got {chunk_chars}")
    for i, path in enumerate(paths):
        if not Path(path).exists() or file_format(path) is not None:  # a table
            yield from _table_documents(i, Path(path), chunk_chars, digests, text_column)
        else:
            yield from (((i, 0), text) for text in _text_file(Path(path), chunk_chars, digests))


def _cut(text: str) -> int:
    """Where a piece of ``text`` ends: before its last run of white space (a word keeps the
    space before it), or at its end when that run would leave less than half of it."""
    last = max(text.rfind(" "), text.rfind("\n"))
    cut = len(text[:last].rstrip()) if last >= 0 else 0  # where its run starts
    return len(text) if cut < len(text) // 2 else cut  # no space: cut anyway


def _text_file(path: Path, chunk_chars: int, digests: list | None) -> Iterator[str]:
    """The pieces of a UTF-8 text file, read as bytes and decoded here, so that an error names
    the byte of the file (a text-mode reader's count restarts every 8 KiB). A UTF-8
    byte-order mark is no text (Windows Notepad's "UTF-8 with BOM") and is dropped; a file
    that is UTF-16, or holds a NUL byte in its first 64 KiB (binary, or UTF-16 without its
    mark, whose every other byte is NUL and would decode as "valid" UTF-8), is refused."""
    h = hashlib.sha256()
    carry, read = "", 0
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with open(path, "rb") as f:
            while True:
                raw = f.read(chunk_chars - len(carry))
                h.update(raw)
                block = decode_utf8(decoder, raw, read, str(path))
                read += len(raw)
                text = carry + block
                if not raw:  # end of file
                    if text:
                        yield text
                    break
                if not block:  # only part of a character so far
                    continue
                cut = _cut(text)
                if cut:  # (a lone character waits for the next read)
                    yield text[:cut]
                carry = text[cut:]
    except FileNotFoundError:
        raise not_found("", path) from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory; give text files") from None
    except OSError as e:  # a symbolic-link loop, no permission, ...
        raise UsageError(f"{path}: cannot read the file ({e.strerror or e})") from None
    if digests is not None:
        digests.append(h.hexdigest())


def _table_documents(i: int, path: Path, chunk_chars: int, digests: list | None,
                     text_column: str) -> Iterator[tuple[tuple[int, int], str]]:
    """The documents of a table's ``text_column``, each keyed by (file index, row): a Parquet
    file or datasets directory read a batch of rows at a time, a CSV, TSV or JSON Lines file a
    line at a time (``RowsFile``: whose JSON texts must be strings)."""
    from .columnar import ColumnarFile, split_hint
    from .tables import RowsFile

    if not path.exists():
        split_hint(path, "")  # DIR/test of a DatasetDict without that split: its splits
        raise not_found("", path)
    hint = "; name it with --text-column"
    if file_format(path) in COLUMNAR:
        table = ColumnarFile(path, [text_column], str(path), hint=hint)
        rows = ((row, text) for first, batch in table.batches()  # rows from 0, as files
                for row, text in enumerate(batch[text_column], start=first - 1))
    else:
        table = RowsFile(path, [text_column], str(path), hint, texts=(text_column,))
        rows = ((line, row[text_column]) for line, row in table.rows())
    for row, text in rows:
        while len(text) > chunk_chars:  # a long document: pieces as a text file's
            cut = _cut(text[:chunk_chars])
            yield (i, row), text[:cut]
            text = text[cut:]
        if text:
            yield (i, row), text
    if digests is not None:
        digests.append(table.sha256)


@contextmanager
def _one_tokenizer_thread():
    """Keep the Rust ``tokenizers`` library on the calling thread while preparing.

    With its thread pool, and its BPE trainer fed 1 MB pieces, the peak memory of
    ``attnlab prepare --tokenizer bpe`` grew with the corpus; on one thread, with
    ``BPE_FIT_CHARS`` pieces for fitting, it stays flat from 5 to 100 MB of text, and preparing
    is faster too (benchmarks/RESULTS.md, "Numbers once quoted in the code").
    """
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if before is None:
            del os.environ["TOKENIZERS_PARALLELISM"]
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


def _fit_tokenizer(paths, kind: str, vocab_size: int | None, chunk_chars: int, text_column: str):
    from ..tokenizers import BPETokenizer, CharTokenizer, WordTokenizer

    if kind == "bpe":  # small pieces: large ones made the trainer's peak grow with the corpus
        chunk_chars = min(chunk_chars, BPE_FIT_CHARS)
    texts = (text for _, text in iter_text_chunks(paths, chunk_chars, text_column=text_column))
    if kind == "char":
        return CharTokenizer.fit(texts, vocab_size=vocab_size)
    if kind == "word":
        return WordTokenizer.fit(texts, vocab_size=vocab_size)
    return BPETokenizer.fit(texts, **({} if vocab_size is None else {"vocab_size": vocab_size}))


def _encoded(paths, tok, chunk_chars: int, split_at: int | None = None, digests=None,
             text_column: str = TEXT_COLUMN, rows: "RepeatedRows | None" = None,
             marked: "AddedTokenTexts | None" = None) -> Iterator[tuple[str, list[int]]]:
    """(split, token ids) pieces of the files, encoded chunk by chunk, with the EOS id between
    documents (files, and a table's rows: a boundary, in the split where the new one starts);
    character ``split_at`` starts the validation split (None: everything is "train").

    A checkpoint's own tokenizer (kind "hf") reads each chunk between the end of the one
    before it and the start of the one after (``HFTokenizer.encode_piece``), so the ids are
    those of the whole document, and a token goes to the split where it starts; a document
    starts with what the tokenizer puts before every text (Llama's and Mistral's bos; nothing
    for GPT-2 and Qwen), as their pretraining put it there. ``rows``, when given, is told each
    piece (``RepeatedRows.add``), and so is ``marked`` (``AddedTokenTexts.add``)."""
    seen, last, before = 0, None, ""
    for doc, text, after in _with_next(_documents(paths, chunk_chars, digests, text_column)):
        split = "train" if split_at is None or seen < split_at else "val"
        if doc != last:
            if last is not None:
                yield split, [tok.eos_id]
            last, before = doc, ""
        if rows is not None:
            rows.add(doc, split, text)
        if marked is not None:
            marked.add(doc, text)
        at = split_at - seen if split_at is not None and seen < split_at < seen + len(text) \
            else None  # the split inside the chunk
        if at is not None and tok.kind != "char":  # a word's pieces are of the whole word
            # a checkpoint's pieces must meet however far back the word starts
            at = _word_start(text, at, near=None if tok.kind == "hf" else _CONTEXT_CHARS)
        while at and unicodedata.combining(text[at]):  # a letter keeps its accent (NFD text):
            at -= 1  # apart, the char tokenizer reads neither as the letter it makes
        if tok.kind == "hf" and at is None:
            yield split, tok.encode_piece(text, before, after)
            before = (before + text)[-_CONTEXT_CHARS:]
        elif tok.kind == "hf":  # two pieces: a token goes to the split where it starts
            yield "train", tok.encode_piece(text[:at], before,
                                            (text[at:] + after)[:_CONTEXT_CHARS])
            before = (before + text[:at])[-_CONTEXT_CHARS:]
            yield "val", tok.encode_piece(text[at:], before, after)
            before = (before + text[at:])[-_CONTEXT_CHARS:]
        elif at is not None:
            yield "train", _encode_text(tok, text[:at])
            yield "val", _encode_text(tok, text[at:])
        else:
            yield split, _encode_text(tok, text)
        seen += len(text)


def _encode_text(tok, text: str) -> list[int]:
    """``tok.encode(text)``, the same ids; byte-level BPE's from pieces of about
    ``BPE_ENCODE_CHARS`` characters (``_word_pieces``) given to ``tok.encode_batch`` at once.

    The Rust library encodes a chunk of 1 MB as one string more slowly than the same text in
    pieces of a few thousand characters (benchmarks/RESULTS.md, "bpe_prepare"), and encoding
    was most of ``attnlab prepare --tokenizer bpe``'s time. A piece ends where a chunk may
    (``_cut``), so its ids are those of the whole text.
    """
    if tok.kind != "bpe" or len(text) <= BPE_ENCODE_CHARS:
        return tok.encode(text)
    return [i for ids in tok.encode_batch(_word_pieces(text, BPE_ENCODE_CHARS)) for i in ids]


def _word_pieces(text: str, size: int) -> list[str]:
    """``text`` in pieces that join to it, each cut before a run of spaces or line breaks, as
    ``_cut`` cuts (never inside a word: a piece runs past ``size`` until such a run starts).

    Examples:
        >>> _word_pieces("one two  three four", 8)
        ['one two', '  three', ' four']
        >>> _word_pieces("abcdefghij k", 4)
        ['abcdefghij', ' k']
    """
    pieces, start = [], 0
    while len(text) - start > size:
        cut = _run_before(text, start, start + size)
        if cut is None:  # no run in reach: the piece ends at the next one (or the text's end)
            cut = _run_before(text, start, _next_run(text, start + size))
        if cut is None:
            break
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


# The white space of the byte-level bpe pre-tokenizer's rule (GPT-2's regex, whose \s is
# Unicode's White_Space): Python's str.isspace() less U+001C..U+001F, which Python counts as
# space and the rule does not ("!\x1f" is one pre-token of the rule's, so no cut may fall in it)
BPE_SPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
             "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def _run_before(text: str, start: int, end: int) -> int | None:
    """Where the last run of spaces or line breaks before ``end`` starts (white space before
    it included, as ``_cut``, as the bpe rule reads it: ``BPE_SPACE``), if after ``start``."""
    last = max(text.rfind(" ", start, end), text.rfind("\n", start, end))
    if last <= start:
        return None
    cut = start + len(text[start:last].rstrip(BPE_SPACE))
    return cut if cut > start else None


def _next_run(text: str, at: int) -> int:
    """Just past the first space or line break at or after ``at`` (the text's end if none)."""
    found = [i for i in (text.find(" ", at), text.find("\n", at)) if i >= 0]
    return min(found) + 1 if found else len(text)


def _word_start(text: str, at: int, near: int | None = None) -> int:
    """Where the run of white space before the word that holds ``text[at]`` starts (``at``
    itself in a piece with no white space before it): where the word and bpe tokenisers and a
    checkpoint's start a token in the whole text too, as at a chunk's cut (``_cut``). A split
    at any other character can fall inside a word (word: two pieces never seen, each unk) or
    a run of spaces longer than the context read beside each piece, where a checkpoint's two
    pieces' encodings need not meet (a character twice, or lost).

    White space more than ``near`` characters back (the word and bpe tokenisers':
    ``_CONTEXT_CHARS``) does not move it: a text written without spaces keeps its split where
    the share of characters puts it, rather than give the validation split the whole chunk.

    Examples:
        >>> _word_start("one two   three", 12), _word_start("one two   three", 5)
        (7, 3)
        >>> _word_start("title\\n" + "字" * 1000, 900, near=256)
        900
    """
    last = max(text.rfind(" ", 0, at + 1), text.rfind("\n", 0, at + 1),
               text.rfind("\t", 0, at + 1))
    start = len(text[:last].rstrip()) if last >= 0 else at
    return start if 0 < start and (near is None or at - start <= near) else at


def _with_next(pieces: Iterator[tuple[tuple[int, int], str]]
               ) -> Iterator[tuple[tuple[int, int], str, str]]:
    """Each (document, text) piece with the text that follows it in its document, up to
    ``_CONTEXT_CHARS`` ("" at a document's end): where ``_encoded`` reads the end of a token
    that starts in the piece. Pieces are held back until that much text follows them."""
    held: deque[tuple[tuple[int, int], str]] = deque()
    for doc, text in pieces:
        if held and held[0][0] != doc:  # a new document: the held ones end theirs
            while held:
                yield _release(held)
        held.append((doc, text))
        while len(held) > 1 and sum(len(t) for _, t in islice(held, 1, None)) >= _CONTEXT_CHARS:
            yield _release(held)
    while held:
        yield _release(held)


def _release(held: deque) -> tuple[tuple[int, int], str, str]:
    doc, text = held.popleft()
    return doc, text, "".join(t for _, t in held)[:_CONTEXT_CHARS]


@contextmanager
def _naming_write_errors(path: str | Path):
    """A write that fails inside (a full disk, ``ulimit -f``) names ``path``: the write to an
    open file names none, and the command line blamed standard output for it."""
    try:
        yield
    except OSError as e:
        raise naming(e, path) from None


def _encode_splits(paths, tok, out: Path, dtype, split_at: int, chunk_chars: int,
                   sources: list, text_column: str, rows: "RepeatedRows",
                   marked: "AddedTokenTexts | None" = None) -> tuple[dict, dict, dict]:
    """Encode the files into ``out/.{train,val}.bin.tmp``; character ``split_at`` starts the
    validation split. Returns the token count, the unk count (counted as encoded, as
    ``encode_file`` counts it: no second pass over a token file that may be larger than memory)
    and the SHA-256 of each split's file (hashed as it is written); ``sources`` receives the
    digest of each text file as read."""
    counts = dict.fromkeys(SPLITS, 0)
    unknown = dict.fromkeys(SPLITS, 0)
    hashes = {s: hashlib.sha256() for s in SPLITS}
    with _naming_write_errors(out), ExitStack() as stack:
        files = {s: stack.enter_context(open(out / f".{s}.bin.tmp", "wb")) for s in SPLITS}
        for split, ids in _encoded(paths, tok, chunk_chars, split_at, sources, text_column,
                                   rows, marked):
            data = np.asarray(ids, dtype=dtype).tobytes()
            files[split].write(data)
            hashes[split].update(data)
            counts[split] += len(ids)
            unknown[split] += ids.count(tok.unk_id)
            del ids, data  # not kept while the next chunk is encoded (up to 36 MB of ids per MB)
    return counts, unknown, {f"{s}.bin": h.hexdigest() for s, h in hashes.items()}


def encode_file(paths: Sequence[str | Path], tokenizer, out_path: str | Path, *,
                dtype: str = "uint16", chunk_chars: int = CHUNK_CHARS,
                text_column: str = TEXT_COLUMN) -> int:
    """Encode text files with an already fitted tokeniser into one token file (EOS ids between
    files), streaming as ``prepare`` does; ``TokenWindows`` reads it. Returns the token count.

    When more than half of the tokens are unk (a char or word tokeniser that never saw the
    text's pieces: Greek given to a run fitted on English), a note on stderr says so, as
    ``prepare`` says it of the validation split when given such a tokeniser (of one it fits,
    it gives the share of unk whatever it is: ``unk_note``): a model scored on such a text
    predicts its one unk token again and again, and its loss would pass for one on the text.

    Raises:
        UsageError: naming a file that is missing or not UTF-8 text.

    Examples:
        >>> from attnlab.tokenizers import load_tokenizer
        >>> _ = Path("input.txt").write_text("to be or not to be\\n" * 20)
        >>> _ = Path("other.txt").write_text("not to be\\n")
        >>> _ = prepare(["input.txt"], "data", tokenizer="char")
        >>> encode_file(["other.txt"], load_tokenizer("data/tokenizer.json"), "other.bin")
        10
    """
    count = unknown = 0
    with _one_tokenizer_thread(), _naming_write_errors(out_path), open(out_path, "wb") as f:
        for _, ids in _encoded(paths, tokenizer, chunk_chars, text_column=text_column):
            np.asarray(ids, dtype=dtype).tofile(f)
            count += len(ids)
            unknown += ids.count(tokenizer.unk_id)
            del ids  # as in _encode_splits
    if tokenizer.kind in ("char", "word"):  # (a checkpoint's unk may be its eos: GPT-2's)
        # (characters 0: the note on long words is of the text a tokeniser is fitted on)
        _say_pieces_notes(tokenizer, characters=0, tokens=count, unknown=unknown,
                          what=", ".join(map(str, paths)))
    return count


def prepare(paths: Sequence[str | Path], out_dir: str | Path, *,
            tokenizer: str | Tokenizer = "char", vocab_size: int | None = None,
            val_fraction: float = CorpusSettings.val_fraction,
            chunk_chars: int = CHUNK_CHARS, force: bool = False, text_column: str = TEXT_COLUMN
            ) -> dict:
    """Tokenise text files into ``out_dir/{train,val}.bin``, ``tokenizer.json`` and ``meta.json``.

    Two streaming passes (one fits the tokeniser and counts characters, one encodes chunk by
    chunk): memory does not grow with the corpus. Files, and a table's rows, are joined with
    the EOS id between them. The last ``val_fraction`` of the characters is the validation
    split, from the start of its word (``_word_start``; char's before a combining accent).
    A tokeniser given as an object (``attnlab prepare --tokenizer DIR``) is used as it is.

    Everything is written under temporary names, renamed into place once complete, meta.json
    last: a failed run never half replaces a corpus (a kill leaves no meta.json, refused).

    Args:
        paths: UTF-8 text files; tables: CSV, TSV, JSON Lines or Parquet files or datasets
            directories (``iter_text_chunks``).
        out_dir: the directory to write (created if needed), empty or missing unless ``force``.
        tokenizer: "char", "word" or "bpe" (fitted on the files), or a ``Tokenizer`` already
            fitted (its ``kind`` is recorded in meta.json).
        vocab_size: cap (char/word) or target size (bpe, default 1000) of the vocabulary;
            None with a fitted tokeniser.
        val_fraction: share of the text held out, in (0, 0.5] (``CorpusSettings``).
        chunk_chars: characters read at a time.
        force: replace the prepared corpus in ``out_dir``; only a directory with meta.json that
            holds nothing but the files prepare writes is replaced (nothing else is deleted).
        text_column: the column of the texts in a table.

    Returns:
        The metadata written to ``meta.json``: also ``sha256`` (of train.bin, val.bin and
        tokenizer.json) and ``files_sha256`` (of each text file as read).

    Raises:
        UsageError: for a missing/non-UTF-8/empty file, bad options, a corpus too small to hold
            out a validation split, an ``out_dir`` that is not empty (without ``force``) or that
            holds files prepare did not write, an input file inside ``out_dir``, two inputs of
            the same bytes, or a text file that changed while it was being read.
        ValueError: a ``val_fraction`` outside (0, 0.5], naming the argument.

    Examples:
        >>> _ = Path("input.txt").write_text("to be or not to be\\n" * 20)
        >>> meta = prepare(["input.txt"], "data/shakespeare", tokenizer="char")
        >>> meta["train_tokens"] + meta["val_tokens"]
        380
    """
    _check_options(paths, tokenizer, vocab_size, val_fraction)
    out = _check_out_dir(out_dir, paths, force)
    read_first: list[str] = []
    total, not_nfc = _count_characters(paths, chunk_chars, read_first, text_column)
    with _held(out, lambda held: _check_out_dir(out_dir, paths, force, held=held)):
        meta = _write_corpus(paths, out, tokenizer, vocab_size, val_fraction, chunk_chars, total,
                             read_first, text_column)
    _say_form(paths, not_nfc, tokenizer, meta)
    return meta


@contextmanager
def _held(out: Path, check):
    """``out``, made if missing, held for this prepare (``paths.hold``) and ``check``-ed again
    once held (another prepare of it may have finished meanwhile; ``check(False)`` where the
    file system has no locks), while the body writes it; what the body wrote under temporary
    names goes if it fails (not, where nothing was held, those found before it wrote: they
    may be another prepare's). Two prepares of one --out started together (each task of a
    sweep preparing the corpus it trains on) wrote into the same temporary files, and the
    second's commit removed the first's meta.json: the one that said "prepared" left no
    corpus, the others a traceback."""
    created = not out.exists()
    lock, tried, checked = None, False, False
    try:  # (from the mkdir: a SIGTERM just after it left the directory made behind)
        out.mkdir(parents=True, exist_ok=True)
        lock = hold(out, "--out", "prepare")  # (refused: nothing here is this prepare's)
        tried = True
        check(lock is not None)
        checked = True
        yield
    except BaseException as e:
        if lock is not None or checked:
            _remove_temporary(out, created)
        elif not tried and created and not isinstance(e, UsageError):  # stopped before hold:
            _remove_temporary(out, created)  # only the empty directory it made goes
        raise
    finally:
        if lock is not None:
            os.close(lock)


def _say_form(paths, not_nfc: list[int], tokenizer: str | Tokenizer, meta: dict) -> None:
    """The note that files of ``paths`` (``not_nfc``: their indices) are not in the Unicode
    form the tokeniser reads them in (NFC), whose corpus decodes to other code points."""
    form = DEFAULT_FORM if isinstance(tokenizer, str) else tokenizer.normalize
    if form == DEFAULT_FORM and not_nfc:
        print(f"note: {form_note([paths[i] for i in not_nfc], meta['tokenizer'])}",
              file=sys.stderr, flush=True)


_TEMPORARY = (".train.bin.tmp", ".val.bin.tmp", ".tokenizer.json.tmp")


def _check_options(paths, tokenizer, vocab_size: int | None, val_fraction: float) -> None:
    if isinstance(tokenizer, Tokenizer):
        if vocab_size is not None:
            raise UsageError(f"--vocab-size {vocab_size}: the {tokenizer.kind} tokenizer given "
                             f"has its own vocabulary of {tokenizer.vocab_size:,}; drop the flag")
        if tokenizer.eos_id is None and (len(paths) > 1 or any(
                file_format(p) is not None for p in paths)):
            raise UsageError(f"the {tokenizer.kind} tokenizer given has no end-of-text token to "
                             f"put between the files (or a table's rows); give one text file")
    elif tokenizer not in TOKENIZERS:
        raise UsageError(f"--tokenizer must be one of {', '.join(TOKENIZERS)}, got {tokenizer!r}")
    elif small := vocab_too_small(tokenizer, vocab_size):  # before a pass over the corpus
        raise UsageError(small)
    check_argument(CorpusSettings, "val_fraction", val_fraction)
    if not paths:
        raise UsageError("no input files given")
    for path in paths:  # a pipe (`prepare <(zcat corpus.gz)`) read twice is empty the second
        if is_special_file(path):  # time ("changed while it was being prepared")
            raise not_found("", path)


def _count_characters(paths, chunk_chars: int, digests: list[str], text_column: str
                      ) -> tuple[int, list[int]]:
    """The first pass: the files' character count (UsageError if 0, or if two files are the
    same) and the indices of the files with text not in NFC (``form_note``); ``digests``
    receives the SHA-256 of each file as read, to be compared with the second pass's."""
    total, not_nfc = 0, []
    for i, text in iter_text_chunks(paths, chunk_chars, digests=digests, text_column=text_column):
        total += len(text)
        if (not not_nfc or not_nfc[-1] != i) and not unicodedata.is_normalized(DEFAULT_FORM, text):
            not_nfc.append(i)
    if total == 0:
        raise UsageError(f"the input files hold no text: {', '.join(map(str, paths))}")
    _refuse_repeated(paths, digests)
    return total, not_nfc


def form_note(paths: list, kind: str) -> str:
    """The line saying that the text of ``paths`` is not all in NFC, so that a corpus read in
    NFC (every tokenizer ``prepare`` fits: ``attnlab.tokenizers``, "Unicode forms") decodes to
    other code points than the files hold: the same text to Unicode, not the same bytes.

    Examples:
        >>> form_note(["a.txt", "b.txt", "c.txt"], "bpe").split(" (a letter")[0]
        'a.txt (and 2 more files) holds text not in NFC'
    """
    n = len(paths) - 1
    more = f" (and {n} more file{'s' if n > 1 else ''})" if n else ""
    return (f"{paths[0]}{more} holds text not in NFC (a letter and its accent as two code "
            f"points, as macOS and some editors write them): the {kind} tokenizer reads it in "
            f"NFC, the same text to Unicode, so the corpus decodes to that form, not to the "
            f"file's own code points")


_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def _refuse_repeated(paths, digests: list[str]) -> None:
    """Refuse two inputs of the same bytes (a file given twice, through a link, or copied): the
    model would train on it twice, and where the validation split (the end of the last file)
    reaches one of them, its val_loss would be of text the model trained on."""
    first: dict[str, int] = {}
    for i, digest in enumerate(digests):
        if digest == _EMPTY_SHA256:
            continue
        if digest in first:
            same = "is given twice" if paths[first[digest]] == paths[i] else \
                f"holds the same bytes as {paths[first[digest]]}"
            raise UsageError(f"{paths[i]} {same}: the model would train on its text twice, "
                             f"or be validated on text it trained on; give each text once")
        first[digest] = i


def _remove_temporary(out: Path, created: bool) -> None:
    """After a failed or refused prepare: its temporary files go, and ``out`` too if this
    prepare created it and it is empty, so nothing is left behind."""
    for name in _TEMPORARY:
        (out / name).unlink(missing_ok=True)
    if created and out.is_dir() and not any(out.iterdir()):
        out.rmdir()


def _check_out_dir(out_dir: str | Path, paths, force: bool, *,
                   held: bool | None = None) -> Path:
    """``out_dir`` as a Path, or refused where nothing can be written (``check_output``), or
    where it would overwrite what the user did not ask to replace. Checked as given: an empty
    ``--out ""`` was ``Path("")``, the current directory, which an empty one let it fill.
    One that holds only the temporary files of a prepare killed while writing (SIGKILL, out
    of memory) is taken as empty: they were called "a prepared corpus", to be replaced with
    --force; once ``held`` (no prepare writes there now) they are removed, saying so; where
    nothing could be held (``held=False``: no file locks, NFS) they are refused, named, for
    the user to remove (they may be those of a prepare writing there now)."""
    out = check_output(out_dir, "--out", directory=True)
    inside = os.path.realpath(out)  # (not Path.resolve: it raises on a symbolic-link loop)
    for path in paths:  # `prepare data/c/meta.json --out data/c --force` would eat its input
        if os.path.dirname(os.path.realpath(path)) == inside:
            raise UsageError(f"--out {out} holds the input file {path}; write the corpus to "
                             f"another directory")
    if not out.exists():
        return out
    entries = sorted(p.name for p in out.iterdir())
    left = [n for n in entries if n in _TEMPORARY
            or (n.startswith(".meta.json.") and n.endswith(".tmp"))]
    if len(left) == len(entries):  # (none, or only what a killed prepare left)
        if held and left:
            _remove_killed(out, left)
        elif held is False and left:
            raise UsageError(f"--out {out} holds {', '.join(left)}, left by a prepare that was "
                             f"stopped while writing it, or written by one running now (this "
                             f"file system has no locks to tell which); remove them if no "
                             f"attnlab prepare is writing {out}, and prepare again")
        return out
    foreign = [n for n in entries if n not in CORPUS_FILES and n not in left]
    if foreign:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise UsageError(f"--out {out} already holds {foreign[0]}{more}, which `attnlab prepare` "
                         f"did not write; choose another --out (nothing was changed)")
    if "meta.json" not in entries:  # (with or without --force: it is no corpus to replace)
        raise UsageError(_unfinished(out, entries, left))
    if not force:
        raise UsageError(f"--out {out} already holds a prepared corpus; add --force to replace "
                         f"it (runs trained on it will then refuse to evaluate or resume), or "
                         f"choose another --out")
    return out


def _unfinished(out: Path, entries: list[str], left: list[str]) -> str:
    """Why ``out``, holding ``entries`` (files of prepare's names, ``left`` its temporary ones)
    but no meta.json, is refused: a prepare killed as it moved its files into place (after
    the old meta.json went, before the new one was written) leaves this; so does another tool
    (nanoGPT's train.bin). Neither is removed: a user's token files may have taken days."""
    stopped = "a prepare stopped while moving its files into place"
    what = (f"left by {stopped}; remove them and prepare again" if left else
            f"{stopped} leaves this (so may another tool, e.g. nanoGPT's train.bin); if a "
            f"stopped prepare left them, remove them and prepare again")
    return (f"--out {out} holds {', '.join(entries)} but no meta.json: {what}, or choose "
            f"another --out (nothing was changed)")


def _remove_killed(out: Path, left: list[str]) -> None:
    """Remove ``left``, the temporary files in ``out`` of a prepare killed while writing,
    naming them and their size in one line."""
    size = sum((out / name).stat().st_size for name in left)
    for name in left:
        (out / name).unlink(missing_ok=True)
    print(f"note: --out {out}: removed {', '.join(left)} ({size:,} bytes), left by a prepare "
          f"that was stopped while writing it", file=sys.stderr, flush=True)


def _write_corpus(paths, out: Path, kind: str | Tokenizer, vocab_size, val_fraction: float,
                  chunk_chars: int, total: int, read_first: list[str], text_column: str) -> dict:
    from ..runs import write_json

    fitted = isinstance(kind, str)  # (a tokeniser given is not fitted here: kind becomes its kind)
    with _one_tokenizer_thread():  # the BPE library would otherwise read ahead and hold the text
        if isinstance(kind, Tokenizer):
            tok, kind = kind, kind.kind
        else:
            try:
                tok = _fit_tokenizer(paths, kind, vocab_size, chunk_chars, text_column)
            except ValueError as e:
                raise UsageError(f"--vocab-size: {e}") from None
        dtype = np.uint16 if tok.vocab_size <= 2**16 else np.uint32
        out.mkdir(parents=True, exist_ok=True)
        read_again: list[str] = []
        rows = RepeatedRows(paths, tok.normalized)
        marked = AddedTokenTexts.of(paths, tok)
        counts, unknown, digests = _encode_splits(
            paths, tok, out, dtype, int(total * (1 - val_fraction)), chunk_chars, read_again,
            text_column, rows, marked)
    for path, first, again in zip(paths, read_first, read_again):
        if first != again:  # the tokeniser was fit on, and the split placed in, other text
            raise UsageError(f"{path} changed while it was being prepared; prepare it again "
                             f"once it is complete (nothing was changed in --out {out})")
    if counts["val"] < 2 or counts["train"] < 2:
        raise UsageError(f"the corpus of {', '.join(map(str, paths))} is too small to split "
                         f"({counts['train']} train and {counts['val']} val tokens); give more "
                         f"text")
    try:
        tok.save(out / ".tokenizer.json.tmp")
    except OSError as e:  # (a full disk) named as the file the user asked for, not the
        e.filename = str(out / "tokenizer.json")  # temporary one, which is removed
        raise
    # (a small file: read whole, not in runs.file_digest's 1 MiB blocks, which would be the
    # largest allocation of the whole prepare)
    digests["tokenizer.json"] = hashlib.sha256((out / ".tokenizer.json.tmp").read_bytes()).hexdigest()
    meta = {"tokenizer": kind, "vocab_size": tok.vocab_size, "dtype": np.dtype(dtype).name,
            "train_tokens": counts["train"], "val_tokens": counts["val"],
            "characters": total, "val_fraction": val_fraction,
            "files": [str(p) for p in paths], "files_sha256": read_again, "sha256": digests}
    # The commit: the old meta.json goes first (from here until the new one is written the
    # directory is no corpus at all, never a mix of the old meta.json and new token files).
    with _naming_write_errors(out):  # on the disk before they are renamed: a machine that
        # crashed just after could leave a train.bin of zeros that meta.json vouches for
        for s in SPLITS:
            sync(out / f".{s}.bin.tmp")
    (out / "meta.json").unlink(missing_ok=True)
    for s in SPLITS:
        (out / f".{s}.bin.tmp").replace(out / f"{s}.bin")
    (out / ".tokenizer.json.tmp").replace(out / "tokenizer.json")
    write_json(out / "meta.json", meta)
    if kind in ("char", "word"):  # (a checkpoint's unk may be its eos: GPT-2's)
        _notes_on_pieces(tok, meta, unknown, vocab_size, fitted=fitted)
    if (warning := rows.warning()):
        print(warning, file=sys.stderr, flush=True)
    if marked is not None and (note := marked.note()):
        print(note, file=sys.stderr, flush=True)
    return meta


class AddedTokenTexts:
    """Where a corpus's text holds a special added token's text (``HFTokenizer.added_texts``:
    the eos token's ``</s>`` or ``<|endoftext|>``, a chat template's ``<|im_end|>``; not an
    ordinary one, as Gemma's ``<td>``, which an HTML page holds as meant), which a
    checkpoint's tokenizer reads as that token, as transformers reads it, not as text: a
    literal ``<|endoftext|>`` in a scraped page ends a document in the middle of a line, with
    no word. (nanoGPT encodes such text as text, ``encode_ordinary``; attnlab reads it as
    transformers does, as ``generate`` reads a prompt, and says so once: the first place by
    file and line, and how many.) A text file's lines are counted piece by piece; a table's
    document is named by its line (row). A piece is cut before white space only where it has
    some (minified JSON, a long run of CJK text has none, and is cut anywhere), and the
    tokenizer reads the document across the cut (``HFTokenizer.encode_piece``): a marker cut
    in two is found in the end of the piece before (at least the longest marker's length)
    joined to the new piece, and counted in the piece where it ends.

    Examples:
        >>> import re
        >>> marked = AddedTokenTexts(["a.txt"], re.compile("</s>"), eos="</s>")
        >>> marked.add((0, 0), "one\\ntwo </s> three\\n")
        >>> marked.note()[:62]
        'note: a.txt line 2 holds the text of an added token (</s>, the'
        >>> marked.add((0, 0), "three<"), marked.add((0, 0), "/s>four"), marked.found
        (None, None, 2)
    """

    def __init__(self, paths, pattern: "re.Pattern[str]", *, eos: str | None = None) -> None:
        self.paths, self.pattern, self.eos = [str(p) for p in paths], pattern, eos
        self.doc: tuple[int, int] | None = None
        self.lines = self.found = 0
        self.tail = ""  # the end of the document's piece before, where a marker may start
        # at least the longest marker's length less one: the pattern is ``added_texts``'
        # alternation of escaped texts, none longer than the whole (Llama 3's 256: ~9,000
        # characters kept of a 1 MiB piece)
        self.keep = len(pattern.pattern)
        self.first: tuple[str, str] | None = None  # (where, the added token's text)

    @classmethod
    def of(cls, paths, tok) -> "AddedTokenTexts | None":
        """The watcher of ``tok``'s added tokens: None for attnlab's own tokenizers, which
        read every text as text, and for a checkpoint's without an added token."""
        pattern = tok.added_texts(special=True) if tok.kind == "hf" else None
        if pattern is None:
            return None
        eos = tok.tokenizer.id_to_token(tok.eos_id) if tok.eos_id is not None else None
        return cls(paths, pattern, eos=eos)

    def add(self, doc: tuple[int, int], text: str) -> None:
        """A piece ``text`` of document ``doc`` (file index, row; 0 for a text file)."""
        if doc != self.doc:
            self.doc, self.lines, self.tail = doc, 0, ""
        joined = self.tail + text  # lines counted from the start of the tail
        lines = self.lines - self.tail.count("\n")
        for match in self.pattern.finditer(joined):
            if match.end() <= len(self.tail):  # (counted with the piece before)
                continue
            self.found += 1
            if self.first is None:
                i, row = doc
                fmt = file_format(self.paths[i])
                line = lines + joined.count("\n", 0, match.start()) + 1
                where = (f"line {line}" if fmt is None else
                         f"{'row' if fmt in COLUMNAR else 'line'} {row}")
                self.first = f"{self.paths[i]} {where}", match.group()
        self.lines += text.count("\n")
        self.tail = joined[-self.keep:]

    def note(self) -> str | None:
        """The note, or None when no text holds an added token's."""
        if self.first is None:
            return None
        (where, text), n = self.first, self.found
        what = ", the eos token: it ends a document there" if text == self.eos else ""
        return (f"note: {where} holds the text of an added token ({text}{what}), which the "
                f"checkpoint's tokenizer reads as that token, as transformers does, not as "
                f"text ({n} place{'' if n == 1 else 's'} in the corpus); write it otherwise "
                f"where it is meant as text")


class RepeatedRows:
    """Rows of a table that start in the validation split and that the training split holds
    too, word for word once in ``normalized``'s form (the tokeniser's: a row in NFD is the
    same row to it as in NFC): a scraped corpus repeats rows, and ``val_loss`` of rows the
    model trained on is lower than of new text, without a word (two files of the same bytes are
    refused by ``_refuse_repeated``; rows are warned of, as ``attnlab train`` warns of a
    ``--test`` file sharing rows with the training data: ``overlap.shared_note``).

    A row is known by an 8-byte digest of its text, kept in an ``array`` (8 bytes a training
    row, not a set's ~75): every training row comes before the first validation row, so the
    digests are sorted once there and each validation row is looked up by binary search.

    Examples:
        >>> rows = RepeatedRows(["c.jsonl"])
        >>> for row, split, text in [(1, "train", "a b"), (2, "train", "c"), (3, "val", "a b")]:
        ...     rows.add((0, row), split, text)
        >>> rows.warning()  # doctest: +ELLIPSIS
        'warning: the validation split (val_loss): 1 of its 1 rows have an input that a training row has too (first: c.jsonl line 3), so its ...'
    """

    def __init__(self, paths, normalized=lambda text: text) -> None:
        self.paths = [str(p) for p in paths]
        self.normalized = normalized
        self.train = array("Q")
        self.sorted: np.ndarray | None = None
        self.val = self.shared = 0
        self.first: str | None = None
        self.doc, self.split, self.hash = None, "train", None

    def add(self, doc: tuple[int, int], split: str, text: str) -> None:
        """A piece ``text`` of document ``doc`` (file index, row; row 0 of a text file, read
        whole), in ``split`` where it starts; a document is in the split where it starts."""
        if doc != self.doc:
            self._end()
            self.doc, self.split, self.hash = doc, split, hashlib.blake2b(digest_size=8)
        self.hash.update(self.normalized(text).encode("utf-8", "surrogatepass"))

    def _end(self) -> None:
        if self.doc is None:
            return
        digest = int.from_bytes(self.hash.digest(), "little")
        if self.split == "train":
            self.train.append(digest)
            return
        if self.sorted is None:  # the first validation row: no training row comes after it
            self.sorted = np.frombuffer(self.train, dtype=np.uint64)  # (a view: no copy)
            self.sorted.sort()
        self.val += 1
        at = int(np.searchsorted(self.sorted, np.uint64(digest)))
        if at < len(self.sorted) and self.sorted[at] == digest:
            self.shared += 1
            if self.first is None:
                i, row = self.doc
                path = self.paths[i]
                fmt = file_format(path)  # (None: a text file, one document: no "line 0")
                self.first = f"{path} (the whole file)" if fmt is None else \
                    f"{path} {'row' if fmt in COLUMNAR else 'line'} {row}"

    def warning(self) -> str | None:
        """The warning line, or None when no row of the validation split is a training row."""
        self._end()
        self.doc = None
        if not self.shared:
            return None
        return shared_note(self.shared, self.val, self.first,
                           what="the validation split (val_loss)")


def _notes_on_pieces(tok: Tokenizer, meta: dict, unknown: dict, vocab_size: int | None, *,
                     fitted: bool) -> None:
    """What of the corpus a char or word tokeniser does not serve, on stderr. One fitted on the
    corpus (``fitted``; ``vocab_size`` its cap) has seen every piece, so each unk is one the cap
    left out: their share of each split (``unk_note``). One given (a run's, fitted on other
    text, whose vocabulary no flag changes) gets ``pieces_notes``' line on the validation
    split's unk, as ``encode_file`` says it of a text; both get its long words."""
    total = meta["characters"]
    characters = total - int(total * (1 - meta["val_fraction"]))  # as _write_corpus splits
    tokens = {s: meta[f"{s}_tokens"] for s in SPLITS}
    if fitted and (note := unk_note(tok, vocab_size, unknown, tokens)):
        print(f"note: {note}", file=sys.stderr, flush=True)
    # (a fitted one's unk=0: the share of unk is said above, of both splits)
    _say_pieces_notes(tok, characters=characters, tokens=meta["val_tokens"],
                      unknown=0 if fitted else unknown["val"],
                      what="the validation split")


def unk_note(tok: Tokenizer, vocab_size: int | None, unknown: dict, tokens: dict) -> str | None:
    """The line saying how much of a prepared corpus is unk, or None where none is.

    A char or word tokeniser ``prepare`` fits on the corpus has seen every piece of it, so each
    unk is a piece ``--vocab-size`` left out: text the model never reads and ``decode`` gives
    back as U+FFFD. Said whatever the share (a vocabulary cap that turns a sixth of the text
    into one token was said by nothing below half of the validation split).

    Examples:
        >>> from attnlab.tokenizers import WordTokenizer
        >>> tok = WordTokenizer.fit(["a b c"], vocab_size=6)
        >>> unk_note(tok, 6, {"train": 9, "val": 0}, {"train": 1000, "val": 100})
        "--vocab-size 6 leaves pieces of the text out of the word vocabulary: 0.8% of the corpus's 1,100 tokens are unk (train 0.9%, val 0%), which the model learns as one token and decode writes as U+FFFD; raise --vocab-size, or use --tokenizer bpe (no unk)"
    """
    total = sum(unknown.values())
    if not total:
        return None
    count = sum(tokens.values())
    splits = ", ".join(f"{s} {_share(unknown[s], tokens[s])}" for s in SPLITS)
    return (f"--vocab-size {vocab_size} leaves pieces of the text out of the {tok.kind} "
            f"vocabulary: {_share(total, count)} of the corpus's {count:,} tokens are unk "
            f"({splits}), which the model learns as one token and decode writes as U+FFFD; "
            f"raise --vocab-size, or use --tokenizer bpe (no unk)")


def _share(part: int, whole: int) -> str:
    """``part / whole`` as a percentage that is never "0%" for a part that is not 0.

    Examples:
        >>> _share(1, 100_000), _share(0, 10), _share(1, 3)
        ('<0.1%', '0%', '33.3%')
    """
    if not part:
        return "0%"
    share = part / whole
    return "<0.1%" if share < 0.001 else f"{share:.1%}".replace(".0%", "%")


def _say_pieces_notes(tok: Tokenizer, **counts) -> None:
    """``pieces_notes(tok, **counts)``, each on stderr as a note."""
    import sys

    for note in pieces_notes(tok, **counts):
        print(f"note: {note}", file=sys.stderr, flush=True)


class TokenWindows(Dataset):
    """(input, target) windows of a memory-mapped token file: target = input shifted by one.

    Window i starts at token i·stride. With stride 1 (training) every offset is a window and a
    random sampler draws windows anywhere in the corpus; with stride = block_size (evaluation)
    the windows tile the file without overlap. Only the touched windows are ever read.

    Args:
        path: a ``.bin`` file written by ``prepare``.
        block_size: window length T.
        dtype: the file's numpy dtype ("uint16" or "uint32", from meta.json).
        stride: tokens between consecutive windows (default: block_size).

    Raises:
        UsageError: if the file holds fewer than block_size + 1 tokens.

    Shape:
        item: (input (T,), target (T,)), int64.

    Examples:
        >>> _ = Path("input.txt").write_text("to be or not to be\\n" * 20)
        >>> meta = prepare(["input.txt"], "data", tokenizer="char")
        >>> ds = TokenWindows("data/train.bin", 128, dtype=meta["dtype"], stride=1)
        >>> x, y = ds[0]; bool((x[1:] == y[:-1]).all())
        True
    """

    def __init__(self, path: str | Path, block_size: int, *, dtype: str = "uint16",
                 stride: int | None = None) -> None:
        self.path, self.block_size = Path(path), block_size
        self.dtype = np.dtype(dtype)
        self.stride = stride or block_size
        self.num_tokens = self.path.stat().st_size // self.dtype.itemsize
        if self.num_tokens < block_size + 1:
            raise UsageError(f"{self.path} holds {self.num_tokens} tokens, fewer than a window "
                             f"of --block-size {block_size} + 1; lower --block-size")
        self._data: np.memmap | None = None

    @property
    def data(self) -> np.memmap:
        # opened lazily, so DataLoader workers each open their own map instead of pickling one
        if self._data is None:
            self._data = np.memmap(self.path, dtype=self.dtype, mode="r")
        return self._data

    def __getstate__(self):
        return {**self.__dict__, "_data": None}

    def __len__(self) -> int:
        return (self.num_tokens - self.block_size - 1) // self.stride + 1

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not -len(self) <= i < len(self):
            raise IndexError(f"window {i} out of range [0, {len(self)})")
        start = (i % len(self)) * self.stride
        window = torch.from_numpy(self.data[start : start + self.block_size + 1].astype(np.int64))
        return window[:-1], window[1:]  # (T,), (T,)
