"""Text corpora as memory-mapped token files, for corpora larger than memory.

Shapes: B batch, T block (window) length, N tokens in a split.

``prepare`` tokenises text files once, streaming them in chunks, into a directory:

    train.bin   the first (1 - val_fraction) of the text's tokens, raw uint16 (or uint32)
    val.bin     the rest (held out: val_loss, val_perplexity)
    tokenizer.json, meta.json (vocab_size, dtype, token counts, files)

``TokenWindows`` reads (input, target) windows straight from such a file through ``np.memmap``:
the operating system pages in only the windows touched, so a 100 GB corpus trains in a few MB
of memory (as nanoGPT does with its ``train.bin``).
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from ..errors import UsageError

__all__ = ["prepare", "encode_file", "iter_text_chunks", "read_meta", "TokenWindows",
           "TOKENIZERS", "SPLITS"]

TOKENIZERS = ("char", "word", "bpe")
SPLITS = ("train", "val")
CHUNK_CHARS = 1 << 20  # characters read at a time
BPE_FIT_CHARS = 1 << 13  # ... when fitting BPE (see _one_tokenizer_thread)


def iter_text_chunks(paths: Sequence[str | Path], chunk_chars: int = CHUNK_CHARS
                     ) -> Iterator[tuple[int, str]]:
    """Yield (file index, text) pieces of at most ``chunk_chars`` characters, file by file.

    A piece ends after the last white space it holds when there is one, so a word is never cut
    in two (word and BPE tokenisers see whole words); the rest starts the next piece. Joining
    a file's pieces gives the file back exactly.

    Raises:
        UsageError: naming a file that is missing or not UTF-8 text.
    """
    if chunk_chars < 2:
        raise ValueError(f"chunk_chars must be >= 2, got {chunk_chars}")
    for i, path in enumerate(paths):
        path = Path(path)
        if not path.is_file():
            raise UsageError(f"file not found: {path}")
        carry = ""
        try:
            with open(path, encoding="utf-8", newline="") as f:
                while True:
                    block = f.read(chunk_chars - len(carry))
                    text = carry + block
                    if not block:  # end of file
                        if text:
                            yield i, text
                        break
                    cut = max(text.rfind(" "), text.rfind("\n"))
                    cut = len(text) if cut < len(text) // 2 else cut + 1  # no space: cut anyway
                    yield i, text[:cut]
                    carry = text[cut:]
        except UnicodeDecodeError as e:
            raise UsageError(f"{path} is not UTF-8 text ({e.reason} at byte {e.start})") from None


@contextmanager
def _one_tokenizer_thread():
    """Keep the Rust ``tokenizers`` library on the calling thread while preparing.

    With its thread pool, and its BPE trainer fed 1 MB pieces, the peak memory of
    ``attnlab prepare --tokenizer bpe`` grew with the corpus: 557, 630 and 719 MiB for 5, 50
    and 100 MB of text. On one thread, with ``BPE_FIT_CHARS`` pieces for fitting: 446, 445
    and 473 MiB, and the 50 MB file took 36 s instead of 57 s (2 cores, 2026-11-22).
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


def _fit_tokenizer(paths, kind: str, vocab_size: int | None, chunk_chars: int):
    from ..tokenizers import BPETokenizer, CharTokenizer, WordTokenizer

    if kind == "bpe":  # small pieces: large ones made the trainer's peak grow with the corpus
        chunk_chars = min(chunk_chars, BPE_FIT_CHARS)
    texts = (text for _, text in iter_text_chunks(paths, chunk_chars))  # streamed, not stored
    if kind == "char":
        return CharTokenizer.fit(texts, vocab_size=vocab_size)
    if kind == "word":
        return WordTokenizer.fit(texts, vocab_size=vocab_size)
    return BPETokenizer.fit(texts, **({} if vocab_size is None else {"vocab_size": vocab_size}))


def _encoded(paths, tok, chunk_chars: int, split_at: int | None = None
             ) -> Iterator[tuple[str, list[int]]]:
    """(split, token ids) pieces of the files, encoded chunk by chunk, with the EOS id between
    files (a document boundary, in the split where the new file starts); character
    ``split_at`` starts the validation split (None: everything is "train")."""
    seen, last_file = 0, 0
    for i, text in iter_text_chunks(paths, chunk_chars):
        split = "train" if split_at is None or seen < split_at else "val"
        if i != last_file:
            yield split, [tok.eos_id]
            last_file = i
        if split_at is not None and seen < split_at < seen + len(text):  # split inside the chunk
            yield "train", tok.encode(text[: split_at - seen])
            yield "val", tok.encode(text[split_at - seen :])
        else:
            yield split, tok.encode(text)
        seen += len(text)


def _encode_splits(paths, tok, out: Path, dtype, split_at: int, chunk_chars: int) -> dict:
    """Encode the files into ``out/.{train,val}.bin.tmp``; character ``split_at`` starts the
    validation split. Returns the token count of each split."""
    counts = dict.fromkeys(SPLITS, 0)
    files = {s: open(out / f".{s}.bin.tmp", "wb") for s in SPLITS}
    try:
        for split, ids in _encoded(paths, tok, chunk_chars, split_at):
            np.asarray(ids, dtype=dtype).tofile(files[split])
            counts[split] += len(ids)
            del ids  # not kept while the next chunk is encoded (up to 36 MB of ids per MB)
    finally:
        for f in files.values():
            f.close()
    return counts


def encode_file(paths: Sequence[str | Path], tokenizer, out_path: str | Path, *,
                dtype: str = "uint16", chunk_chars: int = CHUNK_CHARS) -> int:
    """Encode text files with an already fitted tokeniser into one token file (EOS ids between
    files), streaming as ``prepare`` does; ``TokenWindows`` reads it. Returns the token count.

    Raises:
        UsageError: naming a file that is missing or not UTF-8 text.

    Example:
        >>> n = encode_file(["other.txt"], load_tokenizer("data/tokenizer.json"), "other.bin")
    """
    count = 0
    with _one_tokenizer_thread(), open(out_path, "wb") as f:
        for _, ids in _encoded(paths, tokenizer, chunk_chars):
            np.asarray(ids, dtype=dtype).tofile(f)
            count += len(ids)
            del ids  # as in _encode_splits
    return count


def prepare(paths: Sequence[str | Path], out_dir: str | Path, *, tokenizer: str = "char",
            vocab_size: int | None = None, val_fraction: float = 0.1,
            chunk_chars: int = CHUNK_CHARS) -> dict:
    """Tokenise text files into ``out_dir/{train,val}.bin``, ``tokenizer.json`` and ``meta.json``.

    Two streaming passes over the files: one fits the tokeniser (and counts characters), one
    encodes chunk by chunk and appends to the token files, so memory use does not grow with the
    corpus. Files are concatenated with the tokeniser's EOS id between them (a document
    boundary). The last ``val_fraction`` of the characters is the validation split.

    Args:
        paths: UTF-8 text files.
        out_dir: the directory to write (created if needed).
        tokenizer: "char", "word" or "bpe".
        vocab_size: cap (char/word) or target size (bpe, default 1000) of the vocabulary.
        val_fraction: share of the text held out, in (0, 0.5].
        chunk_chars: characters read at a time.

    Returns:
        The metadata written to ``meta.json``.

    Raises:
        UsageError: for a missing/non-UTF-8/empty file, bad options, or a corpus too small to
            hold out a validation split.

    Example:
        >>> meta = prepare(["input.txt"], "data/shakespeare", tokenizer="char")
        >>> meta["train_tokens"] + meta["val_tokens"]
    """
    if tokenizer not in TOKENIZERS:
        raise UsageError(f"--tokenizer must be one of {', '.join(TOKENIZERS)}, got {tokenizer!r}")
    if not 0 < val_fraction <= 0.5:
        raise UsageError(f"val_fraction must be in (0, 0.5], got {val_fraction}")
    if not paths:
        raise UsageError("no input files given")
    total = 0
    for _, text in iter_text_chunks(paths, chunk_chars):
        total += len(text)
    if total == 0:
        raise UsageError(f"the input files hold no text: {', '.join(map(str, paths))}")
    with _one_tokenizer_thread():  # the BPE library would otherwise read ahead and hold the text
        try:
            tok = _fit_tokenizer(paths, tokenizer, vocab_size, chunk_chars)
        except ValueError as e:
            raise UsageError(f"--vocab-size: {e}") from None
        dtype = np.uint16 if tok.vocab_size <= 2**16 else np.uint32
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        counts = _encode_splits(paths, tok, out, dtype, int(total * (1 - val_fraction)),
                                chunk_chars)
    if counts["val"] < 2 or counts["train"] < 2:
        for s in SPLITS:
            (out / f".{s}.bin.tmp").unlink(missing_ok=True)
        raise UsageError(f"the corpus is too small to split ({counts['train']} train and "
                         f"{counts['val']} val tokens); give more text")
    for s in SPLITS:
        (out / f".{s}.bin.tmp").replace(out / f"{s}.bin")
    tok.save(out / "tokenizer.json")
    meta = {"tokenizer": tokenizer, "vocab_size": tok.vocab_size, "dtype": np.dtype(dtype).name,
            "train_tokens": counts["train"], "val_tokens": counts["val"],
            "characters": total, "val_fraction": val_fraction,
            "files": [str(p) for p in paths]}
    from ..runs import write_json

    write_json(out / "meta.json", meta)
    return meta


def read_meta(data_dir: str | Path, *, what: str = "--data") -> dict:
    """``meta.json`` of a prepared directory; ``UsageError`` naming the directory otherwise."""
    data_dir = Path(data_dir)
    path = data_dir / "meta.json"
    if not path.is_file():
        raise UsageError(f"{what} {data_dir} is not a prepared corpus (no meta.json); "
                         f"run `attnlab prepare FILE... --out {data_dir}`")
    meta = json.loads(path.read_text(encoding="utf-8"))
    for split in SPLITS:
        if not (data_dir / f"{split}.bin").is_file():
            raise UsageError(f"{what} {data_dir} has no {split}.bin; prepare it again")
    return meta


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

    Example:
        >>> ds = TokenWindows("data/train.bin", 128, dtype="uint16", stride=1)
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
