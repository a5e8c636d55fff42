"""Tokenisers: characters, words, and byte-level BPE (via the ``tokenizers`` library).

Every tokeniser shares one interface and four fixed special ids, so models and tokenisers
agree without configuration:

    pad 0   sos 1   eos 2   unk 3        (ordinary tokens start at 4)

- ``Cls.fit(texts, **options)`` learns a vocabulary; ``encode(text, add_special_tokens=False)``
  gives ids (``[sos] + ids + [eos]`` with ``add_special_tokens=True``); ``decode(ids)`` gives
  text back, dropping pad/sos/eos and writing unk as U+FFFD (the Unicode replacement character).
- ``save(path)`` writes one JSON file (``{"type": "char" | "word" | "bpe", ...}``);
  ``Cls.load(path)`` and ``load_tokenizer(path)`` read it back.

What round-trips exactly (``decode(encode(t)) == t``, for ``t`` in NFC; see "Unicode forms"):
- ``CharTokenizer``: any text whose characters (Unicode code points) were seen in ``fit``.
- ``WordTokenizer``: any text whose pieces were seen in ``fit``. Text is cut into pieces that
  cover every character — words and single punctuation marks carry the one space before them
  (``" world"``), other runs of white space are pieces of their own — so joining the pieces
  gives the text back (the GPT-2 pre-tokenisation scheme, applied to whole words).
- ``BPETokenizer``: *any* text. It is byte-level (Radford et al., 2019): the 256 bytes are all
  in the vocabulary, so nothing is ever unknown, and white space is kept inside the pieces.
  Text that happens to spell a special token (``"<pad>"``) is encoded as ordinary bytes, never
  as the special id, so user text cannot inject control tokens.
Unseen symbols in the char and word tokenisers map to ``unk_id`` (and decode to U+FFFD). BPE
keeps the characters of the text it was fit on (``"characters"`` in its file), so that
``unknown`` can name those a text adds: their bytes have ids, but a model may never have
learnt them.

Unicode forms: ``fit`` brings every text to NFC (composed characters, ``normalize="NFC"``)
before it learns, and the tokeniser does the same to every text it encodes, so "é" typed as
one code point or as "e" + a combining accent (NFD: macOS file names, some editors) gives the
same ids. The form is saved in the file (``"normalize": "NFC"``); a file written without the
key (before attnlab normalised) encodes text as given, so an old run keeps its ids.
Decoding gives the text the ids stand for: text written in NFC (what most keyboards and
files hold) comes back as written; other text comes back in NFC, the same text to Unicode
(canonically equivalent: "e" + U+0301 as "é", the Angstrom sign U+212B as "Å").
"""
from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from .errors import UsageError
from .runs import atomic_write, read_json

__all__ = ["Tokenizer", "CharTokenizer", "WordTokenizer", "BPETokenizer", "load_tokenizer",
           "TOKENIZER_KINDS", "in_form",
           "SPECIAL_TOKENS", "PAD_ID", "SOS_ID", "EOS_ID", "UNK_ID"]

SPECIAL_TOKENS = ("<pad>", "<sos>", "<eos>", "<unk>")
PAD_ID, SOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
UNK_TEXT = "\ufffd"  # what an unknown id decodes to
FORMAT_VERSION = 1
# The Unicode normal forms a tokeniser may apply before encoding; NFC is what ``fit`` chooses.
NORMAL_FORMS = ("NFC", "NFD", "NFKC", "NFKD")
DEFAULT_FORM = "NFC"

# A word or one punctuation mark, each with the single space before it; runs of other white
# space stay separate so that the space before a word is always attached to the word.
_WORD_PIECES = re.compile(r" ?\w+| ?[^\w\s]|\s+(?!\S)|\s+")


class Tokenizer:
    """The shared interface. Subclasses set ``kind`` and implement the abstract methods.

    Attributes:
        pad_id, sos_id, eos_id, unk_id: 0, 1, 2, 3 in every tokeniser.
        vocab_size: number of ids, special ones included.
        normalize: the Unicode normal form applied to text before encoding ("NFC" for a
            tokeniser fit now), or None: text as given (a file saved without the choice).
    """

    kind = ""
    pad_id, sos_id, eos_id, unk_id = PAD_ID, SOS_ID, EOS_ID, UNK_ID
    normalize: str | None = None
    # what ``unknown``'s pieces are to the model, in ``unknown_note``'s line
    unknown_means = "pieces unknown to this model, each read as unk"

    def normalized(self, text: str) -> str:
        """``text`` in this tokeniser's normal form (as given when it has none).

        Examples:
            >>> CharTokenizer.fit(["caf\u00e9"]).normalized("cafe\u0301") == "caf\u00e9"
            True
        """
        return in_form(self.normalize, text)

    @classmethod
    def fit(cls, texts: Iterable[str], **options) -> "Tokenizer":
        raise NotImplementedError

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    def __len__(self) -> int:
        return self.vocab_size

    def _encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of ``text``; with ``add_special_tokens``, wrapped in sos ... eos.

        Raises:
            TypeError: if ``text`` is not a string.
        """
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, got {type(text).__name__}")
        ids = self._encode(self.normalized(text))
        return [self.sos_id, *ids, self.eos_id] if add_special_tokens else ids

    def encode_batch(self, texts: Iterable[str], add_special_tokens: bool = False) -> list[list[int]]:
        """``encode`` for each text (BPE does it in parallel in Rust)."""
        return [self.encode(t, add_special_tokens) for t in texts]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """Text of ``ids``: pad/sos/eos are dropped (kept as ``<pad>`` ... when
        ``skip_special_tokens=False``); unk is written as U+FFFD."""
        raise NotImplementedError

    # how many of the last characters of a decoded text the ids after it may still change
    # (a clean-up of the text: ``HFTokenizer``'s); none for attnlab's tokenisers
    unsettled_chars = 0

    def unsettled(self, ids: list[int]) -> int:
        """How many of the last ``ids`` have a text that the ids after them may still change
        (beyond a character whose bytes are not all there yet, which ``decode`` shows as
        U+FFFD at the text's end): none for attnlab's tokenisers, whose ``decode`` of a prefix
        is the start of the whole's. ``StopStreamer`` prints no text of them yet."""
        return 0

    def tokenize(self, text: str) -> list[str]:
        """The readable piece of text behind each id of ``encode(text)`` (for plot labels)."""
        return [self.decode([i], skip_special_tokens=False) for i in self.encode(text)]

    def labels(self, ids: Iterable[int], skip_special_tokens: bool = True) -> list[str]:
        """The text each id of ``ids`` stands for, read as the sequence (labels of attention
        maps): ``decode`` of each id, special ones as ``decode`` gives them."""
        return [self.decode([i], skip_special_tokens=skip_special_tokens) for i in ids]

    def unknown(self, text: str) -> list[str]:
        """The pieces of ``text`` this tokeniser reads as unk (for byte-level BPE, which has
        no unk: the characters its training text lacked)."""
        return [p for p, i in zip(self.tokenize(text), self.encode(text)) if i == self.unk_id]

    def _payload(self) -> dict:
        raise NotImplementedError

    def save(self, path: str | Path) -> None:
        """Write the tokeniser as one JSON file (atomically)."""
        data = {"type": self.kind, "version": FORMAT_VERSION, **self._payload()}
        atomic_write(path, json.dumps(data, ensure_ascii=False, indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "Tokenizer":
        """Read a tokeniser saved by ``save``; ``UsageError`` naming the file if it is not one
        of this class."""
        tok = load_tokenizer(path)
        if cls is not Tokenizer and not isinstance(tok, cls):
            raise UsageError(f"{path} holds a {tok.kind!r} tokenizer, not {cls.kind!r}")
        return tok

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size})"


class _VocabTokenizer(Tokenizer):
    """A tokeniser with an explicit list of pieces: id i is ``pieces[i]``."""

    def __init__(self, pieces: list[str], *, normalize: str | None = None) -> None:
        if tuple(pieces[:4]) != SPECIAL_TOKENS:
            raise ValueError(f"the first four pieces must be {SPECIAL_TOKENS}, got {pieces[:4]}")
        self.normalize = check_form(normalize)
        self.pieces = list(pieces)
        self.index = {p: i for i, p in enumerate(self.pieces) if i >= len(SPECIAL_TOKENS)}

    @staticmethod
    def split(text: str) -> list[str]:
        raise NotImplementedError

    @classmethod
    def fit(cls, texts: Iterable[str], *, vocab_size: int | None = None, min_freq: int = 1,
            normalize: str | None = DEFAULT_FORM):
        """Learn the pieces of ``texts``, most frequent first (ties: first seen first).

        Args:
            texts: training texts.
            vocab_size: at most this many ids in all, the 4 special ones included.
            min_freq: drop pieces seen fewer times.
            normalize: the Unicode normal form of the texts learnt and encoded (None: as given).

        Raises:
            ValueError: if vocab_size < 5, min_freq < 1 or normalize is not a normal form.
        """
        if vocab_size is not None and vocab_size < len(SPECIAL_TOKENS) + 1:
            raise ValueError(f"vocab_size must be at least {len(SPECIAL_TOKENS) + 1} "
                             f"(4 special ids + 1), got {vocab_size}")
        if min_freq < 1:
            raise ValueError(f"min_freq must be >= 1, got {min_freq}")
        form = check_form(normalize)
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(cls.split(in_form(form, text)))
        # Counter.most_common is stable, so equal counts keep their first-seen order.
        kept = [p for p, n in counts.most_common() if n >= min_freq]
        if vocab_size is not None:
            kept = kept[: vocab_size - len(SPECIAL_TOKENS)]
        return cls(list(SPECIAL_TOKENS) + kept, normalize=form)

    @property
    def vocab_size(self) -> int:
        return len(self.pieces)

    def _encode(self, text: str) -> list[int]:
        return [self.index.get(p, UNK_ID) for p in self.split(text)]

    def tokenize(self, text: str) -> list[str]:
        return self.split(self.normalized(text))  # the text's own pieces, unknown ones included

    def unknown(self, text: str) -> list[str]:
        return [p for p in self.tokenize(text) if p not in self.index]

    def piece_id(self, piece: str) -> int:
        """The id of one whole piece (a tagger's word), in this tokeniser's normal form; unk
        if it was never seen."""
        return self.index.get(self.normalized(piece), UNK_ID)

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self.pieces):
                raise ValueError(f"id {i} is outside the vocabulary [0, {len(self.pieces)})")
            if i == UNK_ID:
                out.append(UNK_TEXT)
            elif i >= len(SPECIAL_TOKENS) or not skip_special_tokens:
                out.append(self.pieces[i])
        return "".join(out)

    def _payload(self) -> dict:
        return {"normalize": self.normalize, "pieces": self.pieces}


class CharTokenizer(_VocabTokenizer):
    """One id per character (Unicode code point).

    Examples:
        >>> tok = CharTokenizer.fit(["hello"])
        >>> tok.decode(tok.encode("hole")), tok.encode("x") == [tok.unk_id]
        ('hole', True)
    """

    kind = "char"

    @staticmethod
    def split(text: str) -> list[str]:
        return list(text)


class WordTokenizer(_VocabTokenizer):
    """One id per word or punctuation mark, each with the space before it (see module doc).

    Examples:
        >>> tok = WordTokenizer.fit(["the cat sat.", "the dog"])
        >>> tok.tokenize("the dog sat.")
        ['the', ' dog', ' sat', '.']
    """

    kind = "word"

    @staticmethod
    def split(text: str) -> list[str]:
        return _WORD_PIECES.findall(text)


class BPETokenizer(Tokenizer):
    """Byte-level byte-pair encoding trained with the Hugging Face ``tokenizers`` library.

    Args:
        tokenizer: a ``tokenizers.Tokenizer`` whose ids 0-3 are ``<pad> <sos> <eos> <unk>``.

    Examples:
        >>> tok = BPETokenizer.fit(["low lower lowest"] * 10, vocab_size=280)
        >>> tok.decode(tok.encode("lowest, ünïcödé!"))
        'lowest, ünïcödé!'
    """

    kind = "bpe"
    unknown_means = ("characters absent from the text the bpe tokenizer was fit on (spelt in "
                     "bytes the model may never have learnt)")

    def __init__(self, tokenizer, *, normalize: str | None = None,
                 characters: str | None = None) -> None:
        self.normalize = check_form(normalize)
        # the characters of the text it was fit on (None: saved before attnlab kept them)
        self.characters = None if characters is None else frozenset(characters)
        ids = [tokenizer.token_to_id(t) for t in SPECIAL_TOKENS]
        if ids != [PAD_ID, SOS_ID, EOS_ID, UNK_ID]:
            raise ValueError(f"special tokens {SPECIAL_TOKENS} must have ids 0-3, got {ids}")
        # Text spelling "<pad>" is ordinary text (not saved in the JSON, so set on every load).
        tokenizer.encode_special_tokens = True
        self.tokenizer = tokenizer

    @classmethod
    def fit(cls, texts: Iterable[str], *, vocab_size: int = 1000, min_freq: int = 2,
            normalize: str | None = DEFAULT_FORM) -> "BPETokenizer":
        """Learn merges until the vocabulary has ``vocab_size`` ids (fewer if the texts run out).

        Args:
            texts: training texts.
            vocab_size: target size; the 4 special ids and the 256 byte symbols come first.
            min_freq: a pair must occur this often to be merged.
            normalize: the Unicode normal form of the texts learnt and encoded (None: as given).

        Raises:
            ValueError: if vocab_size is smaller than 260 (4 special + 256 bytes) or normalize
                is not a normal form.
        """
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import decoders, models, pre_tokenizers, trainers

        alphabet = pre_tokenizers.ByteLevel.alphabet()
        if vocab_size < len(SPECIAL_TOKENS) + len(alphabet):
            raise ValueError(f"vocab_size must be at least {len(SPECIAL_TOKENS) + len(alphabet)} "
                             f"(4 special ids + 256 bytes) for byte-level BPE, got {vocab_size}")
        tok = HFTokenizer(models.BPE(unk_token=SPECIAL_TOKENS[UNK_ID]))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_freq,
                                      special_tokens=list(SPECIAL_TOKENS),
                                      initial_alphabet=alphabet, show_progress=False)
        form = check_form(normalize)
        seen: set[str] = set()
        tok.train_from_iterator(_noting_characters(texts, form, seen), trainer)
        return cls(tok, normalize=form, characters="".join(sorted(seen)))

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Iterable[str], add_special_tokens: bool = False) -> list[list[int]]:
        texts = list(texts)
        if not all(isinstance(t, str) for t in texts):
            raise TypeError("encode_batch() takes strings")
        texts = [self.normalized(t) for t in texts]
        out = [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]
        return [[SOS_ID, *ids, EOS_ID] for ids in out] if add_special_tokens else out

    def tokenize(self, text: str) -> list[str]:
        # A piece holding part of a multi-byte character shows that whole character.
        text = self.normalized(text)
        return [text[a:b] for a, b in self.tokenizer.encode(text, add_special_tokens=False).offsets]

    def labels(self, ids: Iterable[int], skip_special_tokens: bool = True) -> list[str]:
        """The text of each id of ``ids``, as ``tokenize`` shows a text's pieces: a piece that
        holds part of a character's bytes shows that whole character, where its own
        ``decode`` would be U+FFFD (the replacement character) for a piece that is not whole
        UTF-8; a byte that makes no character with its neighbours (an untrained model's lone
        lead byte) is its escape, ``<0xD0>``, as Hugging Face writes a byte token. Special ids
        are as ``decode`` gives them.

        Examples:
            >>> tok = BPETokenizer.fit(["tea for two"] * 5, vocab_size=262)
            >>> ids = tok.encode("two 😀")
            >>> tok.labels(ids) == tok.tokenize("two 😀"), "\ufffd" in tok.labels(ids)
            (True, False)
        """
        return byte_level_labels(
            ids, lambda i: self._bytes(i) if i >= len(SPECIAL_TOKENS) else None,
            lambda i: self.decode([i], skip_special_tokens=skip_special_tokens))

    def _bytes(self, i: int) -> bytes:
        """The bytes id ``i`` (an ordinary one) stands for."""
        piece = self.tokenizer.id_to_token(i)
        if piece is None:
            raise ValueError(f"id {i} is outside the vocabulary [0, {self.vocab_size})")
        return symbol_bytes(piece)

    def unknown(self, text: str) -> list[str]:
        # Every byte has an id, but those of a character never seen in fit may be bytes no
        # training text held, whose embeddings kept their initial values: the model reads
        # them no better than another tokeniser's unk.
        if self.characters is None:
            return []
        return [c for c in self.normalized(text) if c not in self.characters]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"id {bad[0]} is outside the vocabulary [0, {self.vocab_size})")
        # The library would drop unk (a special token); we show it as U+FFFD like the others.
        parts, run = [], []
        for i in ids + [UNK_ID]:
            if i == UNK_ID:
                parts.append(self.tokenizer.decode(run, skip_special_tokens=skip_special_tokens))
                run = []
            else:
                run.append(i)
        return UNK_TEXT.join(parts)

    def _payload(self) -> dict:
        seen = {} if self.characters is None else {"characters": "".join(sorted(self.characters))}
        return {"normalize": self.normalize, **seen,
                "tokenizer": json.loads(self.tokenizer.to_str())}


def _byte_symbols() -> dict[str, int]:
    """The byte each of byte-level BPE's 256 symbols stands for (GPT-2's ``bytes_to_unicode``,
    inverted): a printable byte is its own character; the others are shifted past 255."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("\xa1"), ord("\xac") + 1),
                 *range(ord("\xae"), ord("\xff") + 1)]
    rest = [b for b in range(256) if b not in printable]
    return {**{chr(b): b for b in printable}, **{chr(256 + n): b for n, b in enumerate(rest)}}


_BYTE_OF = _byte_symbols()


def symbol_bytes(piece: str) -> bytes | None:
    """The bytes a byte-level BPE piece (``"Ġthe"``, ``"ðŁĺ"``) stands for, or None for a
    piece that is not of its 256 symbols (a checkpoint's added token, ``"<|im_end|>"``: all
    printable symbols, so such a token is told apart by the caller).

    Examples:
        >>> symbol_bytes("Ġhi"), symbol_bytes("日")
        (b' hi', None)
    """
    return bytes(_BYTE_OF[c] for c in piece) if all(c in _BYTE_OF for c in piece) else None


def byte_level_labels(ids: Iterable[int], piece_bytes: Callable[[int], bytes | None],
                      label_of: Callable[[int], str]) -> list[str]:
    """Labels of a byte-level BPE's ``ids`` (ours, or a checkpoint's: GPT-2's, Qwen's): each
    run of ids that ``piece_bytes`` gives the bytes of is read together (``_byte_labels``); any
    other id (a special one: ``piece_bytes`` gives None) is ``label_of(id)``.

    Examples:
        >>> pieces = {5: b"a\\xf0\\x9f", 6: b"\\x98\\x80"}
        >>> byte_level_labels([5, 6, 2], pieces.get, lambda i: "<eos>")
        ['a😀', '😀', '<eos>']
    """
    ids = [int(i) for i in ids]
    labels = [""] * len(ids)
    run: list[tuple[int, bytes]] = []  # (position, bytes) of a run of ordinary ids
    for at, i in enumerate([*ids, None]):
        piece = None if i is None else piece_bytes(i)
        if piece is not None:
            run.append((at, piece))
            continue
        for (k, _), label in zip(run, _byte_labels([p for _, p in run])):
            labels[k] = label
        run = []
        if i is not None:
            labels[at] = label_of(i)
    return labels


def _byte_labels(pieces: list[bytes]) -> list[str]:
    """For pieces of bytes read one after another, the characters each piece's bytes belong to
    (a character cut between pieces is shown whole on each; a byte that starts no valid
    character is its escape, ``<0xFF>``, as Hugging Face names byte tokens: a row of "�"
    said nothing of which bytes the model wrote).

    Examples:
        >>> _byte_labels([b"a\\xf0\\x9f", b"\\x98\\x80", b"\\xff"])
        ['a😀', '😀', '<0xFF>']
    """
    data = b"".join(pieces)
    owner: list[tuple[int, int]] = []  # for each byte, the (start, end) of its character
    at = 0
    while at < len(data):
        for width in (1, 2, 3, 4):  # UTF-8 characters are 1 to 4 bytes
            try:
                data[at:at + width].decode("utf-8")
            except UnicodeDecodeError:
                continue
            break
        else:
            width = 0
        end = at + max(width, 1)
        owner += [(at, end if width else -1)] * (end - at)
        at = end
    labels, start = [], 0
    for piece in pieces:
        spans = dict.fromkeys(owner[start:start + len(piece)])  # in order, each once
        labels.append("".join(data[a:b].decode("utf-8") if b >= 0 else f"<0x{data[a]:02X}>"
                              for a, b in spans))
        start += len(piece)
    return labels


def _noting_characters(texts: Iterable[str], form: str | None, seen: set[str]
                       ) -> Iterable[str]:
    """``texts`` in the normal form ``form``, each one's characters added to ``seen``."""
    for text in texts:
        text = in_form(form, text)
        seen.update(text)
        yield text


# The one registry of tokeniser kinds: the name (config.yaml's ``tokenizer``, the CLI's
# ``--tokenizer`` choices, tokenizer.json's ``type``) -> its class. A new kind is its class
# plus its entry here.
TOKENIZER_KINDS: dict[str, type[Tokenizer]] = {
    cls.kind: cls for cls in (CharTokenizer, WordTokenizer, BPETokenizer)}

# The smallest vocabulary each kind can fit: its 4 special ids and one piece (char, word), or
# the 256 bytes BPE starts from. ``attnlab train`` refuses a smaller --vocab-size by it.
SMALLEST_VOCAB = {"char": len(SPECIAL_TOKENS) + 1, "word": len(SPECIAL_TOKENS) + 1,
                  "bpe": len(SPECIAL_TOKENS) + 256}


def normalize_setting():
    """The run setting ``normalize``: the Unicode normal form in which a run's own tokenisers
    read text, NFC for a run started now, not a flag. A run whose config.yaml lacks it started
    before attnlab normalised and read text as given (None), so ``--resume``, which fits its
    tokenisers on the training split again, fits them as they were: the ids its checkpoint
    learnt (docs/compatibility.md)."""
    from .settings import setting

    return setting(DEFAULT_FORM, choices=NORMAL_FORMS, optional=True, flag=False, absent=None)


def vocab_too_small(kind: str, vocab_size: int | None) -> str | None:
    """The message refusing ``--vocab-size`` for tokeniser ``kind``, or None where it fits.

    Examples:
        >>> vocab_too_small("bpe", 100)
        '--vocab-size must be an integer >= 260 for --tokenizer bpe, got 100'
    """
    least = SMALLEST_VOCAB.get(kind)
    if vocab_size is None or least is None or vocab_size >= least:
        return None
    return f"--vocab-size must be an integer >= {least} for --tokenizer {kind}, got {vocab_size!r}"


def in_form(form: str | None, text: str) -> str:
    """``text`` in the Unicode normal form ``form`` (one of ``NORMAL_FORMS``), or as given
    when ``form`` is None (a tokeniser saved before attnlab normalised)."""
    return unicodedata.normalize(form, text) if form else text


def check_form(normalize: str | None) -> str | None:
    """``normalize`` if it is None or one of ``NORMAL_FORMS``; else a ValueError naming it."""
    if normalize is not None and normalize not in NORMAL_FORMS:
        raise ValueError(f"normalize must be None or one of {', '.join(NORMAL_FORMS)}, "
                         f"got {normalize!r}")
    return normalize


def load_tokenizer(path: str | Path) -> Tokenizer:
    """The tokeniser saved in ``path`` by any ``save``, as the right class.

    Raises:
        UsageError: naming the file if it is missing, not JSON, or not a tokeniser.

    Examples:
        >>> CharTokenizer.fit(["ab"]).save("tok.json"); load_tokenizer("tok.json")
        CharTokenizer(vocab_size=6)
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"tokenizer file not found: {path}")
    data = read_json(path, what="a JSON tokenizer file")
    kind = data.get("type") if isinstance(data, dict) else None
    if kind not in TOKENIZER_KINDS:
        raise UsageError(f"{path}: unknown tokenizer type {kind!r}; expected one of "
                         f"{', '.join(TOKENIZER_KINDS)}")
    try:
        form = data.get("normalize")  # absent in files written before attnlab normalised
        if kind == "bpe":
            from tokenizers import Tokenizer as HFTokenizer

            inner = HFTokenizer.from_str(json.dumps(data["tokenizer"]))
            return BPETokenizer(inner, normalize=form, characters=data.get("characters"))
        return TOKENIZER_KINDS[kind](data["pieces"], normalize=form)
    except Exception as e:  # KeyError, ValueError, and the Rust side's plain Exception
        raise UsageError(f"{path} is not a valid {kind!r} tokenizer file ({e})") from None


def unknown_note(tokenizer: Tokenizer, texts: list[str], labels: list[str]) -> str | None:
    """A line saying which inputs hold pieces ``tokenizer`` never saw (each read as unk, so the
    model sees less than was written), or None when every piece is known.

    Examples:
        >>> tok = WordTokenizer.fit(["the film was good"])
        >>> unknown_note(tok, ["the film", "the zzz film qqq"], ["TEXT number 1", "TEXT number 2"])
        "TEXT number 2 holds pieces unknown to this model, each read as unk: 'zzz', 'qqq'"
    """
    count, line = _unknown_inputs(tokenizer, texts, labels)
    return line(count) if count else None


def _unknown_inputs(tokenizer: Tokenizer, texts: list[str], labels: list[str]
                    ) -> tuple[int, Callable[[int], str]]:
    """(how many of ``texts`` hold pieces ``tokenizer`` never saw, the line naming the first
    of them and its pieces, given how many inputs in all hold some)."""
    # each piece named once as shown: a word tokeniser's words carry their space, and " zzz"
    # and "zzz" (at the start) would both be shown 'zzz'
    found = [(label, pieces) for label, text in zip(labels, texts)
             if (pieces := list(dict.fromkeys(p.strip() or p for p in tokenizer.unknown(text))))]
    if not found:
        return 0, str
    label, pieces = found[0]
    shown = ", ".join(repr(p) for p in pieces[:5])
    if len(pieces) > 5:
        shown += f" and {len(pieces) - 5} more"

    def line(count: int) -> str:
        more = f" (and {count - 1} more inputs)" if count > 1 else ""
        return f"{label} holds {tokenizer.unknown_means}: {shown}{more}"
    return len(found), line


# a share of unk in held-out tokens worth a note: more than half (a small English CSV's
# validation texts are 10-15% words its training texts lack; a Chinese one's, all of them)
UNKNOWN_NOTE_SHARE = 0.5
LONG_WORD_CHARACTERS = 15  # characters per word token beyond any language written with spaces


def pieces_notes(tokenizer: Tokenizer, *, characters: int, tokens: int, unknown: int,
                 what: str) -> list[str]:
    """Lines saying where a tokeniser fitted on a training split will not serve the model:
    more than ``UNKNOWN_NOTE_SHARE`` of ``what``'s ``tokens`` (held out, ``characters`` long)
    are unk (the vocabulary lacks them: the model learns one token for all of them), or the
    word tokeniser's words are longer than ``LONG_WORD_CHARACTERS`` on average (a text written
    without spaces, which it reads as one word).

    Examples:
        >>> tok = WordTokenizer.fit(["我喜欢这部电影", "我不喜欢"])
        >>> pieces_notes(tok, characters=40, tokens=2, unknown=0, what="the validation split")[0]
        'the word tokenizer read the validation split as 2 tokens of 20 characters each: a text without spaces between words is one long word to it; a char or bpe tokenizer splits it'
    """
    notes = []
    if tokens and unknown > UNKNOWN_NOTE_SHARE * tokens:
        notes.append(f"{unknown / tokens:.0%} of the {tokens:,} tokens of {what} are unk, "
                     f"pieces the {tokenizer.kind} tokenizer fitted on the training text lacks "
                     f"(its vocabulary: {tokenizer.vocab_size:,}): the model learns one token "
                     f"for all of them; a bpe tokenizer has fewer")
    if tokenizer.kind == "word" and tokens and characters / tokens > LONG_WORD_CHARACTERS:
        notes.append(f"the word tokenizer read {what} as {tokens:,} tokens of "
                     f"{characters / tokens:.0f} characters each: a text without spaces between "
                     f"words is one long word to it; a char or bpe tokenizer splits it")
    return notes


def note_pieces(tokenizer: Tokenizer, texts: list[str], what: str) -> None:
    """``pieces_notes`` of held-out ``texts`` (``what``), on standard error."""
    import sys

    ids = [i for row in tokenizer.encode_batch(texts) for i in row]
    for note in pieces_notes(tokenizer, characters=sum(map(len, texts)), tokens=len(ids),
                             unknown=ids.count(tokenizer.unk_id), what=what):
        print(f"note: {note}", file=sys.stderr, flush=True)


def note_unknown(tokenizer: Tokenizer, texts: list[str], labels: list[str]) -> None:
    """``unknown_note``'s line, if any, on standard error as a note (``attnlab.notes.say``:
    once per command, of all its inputs, where the command holds its notes)."""
    from .notes import say

    count, line = _unknown_inputs(tokenizer, texts, labels)
    say("unknown", count, lambda n, _: f"note: {line(n)}", len(texts))


def note_cut(total: int, kept: int, max_len: int, *, what: str = "--input",
             unit: str = "tokens") -> None:
    """A note on standard error when a model reads only the first ``kept`` of an input's
    ``total`` tokens (or words), cut by ``--max-len``: attention maps of them would otherwise
    pass for the whole input's (predict cuts texts so too, as documented, but draws no map)."""
    import sys

    if total > kept:
        print(f"note: {what} has {total:,} {unit}; the model reads the first {kept:,} "
              f"(--max-len {max_len}): the attention maps are of those", file=sys.stderr,
              flush=True)
