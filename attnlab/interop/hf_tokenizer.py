"""A Hugging Face checkpoint's own tokeniser as an attnlab ``Tokenizer`` (``HFTokenizer``).

attnlab's tokenisers share the ids pad 0, sos 1, eos 2, unk 3; a pretrained checkpoint has its
own (GPT-2: ``<|endoftext|>`` 50256 as bos, eos and unk, no pad; BERT: ``[PAD]`` 0, ``[UNK]``
100, ``[CLS]`` 101, ``[SEP]`` 102). ``HFTokenizer`` keeps the checkpoint's ids and gives the ids
that ``transformers``' tokeniser of the same directory gives:

- ``encode(text)`` equals ``tok(text, add_special_tokens=False)["input_ids"]`` and
  ``encode(text, add_special_tokens=True)`` equals ``tok(text)["input_ids"]`` (BERT: ``[CLS]
  ... [SEP]``; GPT-2: nothing added);
- ``encode_pair(text, pair)`` gives ``(input_ids, token_type_ids)`` as ``tok(text, pair)`` does;
- ``decode(ids)`` equals ``tok.decode(ids, skip_special_tokens=True)``.

Which attnlab names the checkpoint's special tokens take: ``sos_id`` is its bos token, else its
``[CLS]``; ``eos_id`` its eos token, else its ``[SEP]``; ``pad_id`` its pad token, else its eos
token (``transformers``' usual stand-in for GPT-2, which has no pad token). The adapter is
built from the fast (``tokenizers``) tokeniser that ``transformers`` loads from the directory,
so it needs ``transformers`` once (``from_transformers``) and only ``tokenizers`` after
``save``/``load``: a run trained from a checkpoint reloads without its source directory. The
checkpoint's chat template travels with it (``chat_template``).
"""
from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import UsageError
from ..tokenizers import Tokenizer, byte_level_labels, symbol_bytes

__all__ = ["HFTokenizer", "SPECIAL_ROLES", "clean_up", "read_saved", "bare_first_word",
           "with_prefix_space", "is_byte_level"]

SPECIAL_ROLES = ("pad", "bos", "eos", "unk", "cls", "sep", "mask")
KIND = "hf"
FORMAT_VERSION = 1

# ``transformers``' clean-up of decoded text (``clean_up_tokenization_spaces``): a space
# before punctuation and English contractions is dropped.
_CLEAN_UP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
             (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


def _written(pattern: str, earlier: tuple[tuple[str, str], ...]) -> list[str]:
    """The texts that a clean-up whose steps before ``pattern``'s are ``earlier`` turns into
    ``pattern``: the steps chain, " ' " -> "'" makes " n ' t" into " n't"."""
    return [pattern, *(text for j, (before, after) in enumerate(earlier) if after in pattern
                       for text in _written(pattern.replace(after, before, 1), earlier[:j]))]


def clean_up(text: str) -> str:
    """``text`` cleaned as ``transformers`` cleans decoded text: no space before punctuation
    or an English contraction.

    Examples:
        >>> clean_up("it 's here , is n't it ?")
        "it's here, isn't it?"
    """
    for before, after in _CLEAN_UP:
        text = text.replace(before, after)
    return text


# the characters at the end of a decoded text that a clean-up may still change when more text
# comes: the longest that a start of a text cleaned into a pattern reads as (" n '" of
# " n ' t", which " n't" makes "n't": 4)
_CLEAN_UP_REACH = max(len(clean_up(text[:end])) for i, (before, _) in enumerate(_CLEAN_UP)
                      for text in _written(before, _CLEAN_UP[:i]) for end in range(len(text)))


def _first(*ids: int | None) -> int | None:
    return next((i for i in ids if i is not None), None)


class HFTokenizer(Tokenizer):
    """A checkpoint's fast tokeniser with its own special ids (see the module doc).

    Args:
        tokenizer: a ``tokenizers.Tokenizer`` (its normaliser, pre-tokeniser, model,
            post-processor and decoder are the checkpoint's).
        specials: role -> id for the roles of ``SPECIAL_ROLES`` the checkpoint has.
        padding_side: ``"right"`` or ``"left"``, where the checkpoint pads a batch.
        clean_up_tokenization_spaces: whether decoded text is cleaned as ``transformers``
            cleans it.
        token_type_ids: whether the model reads ``token_type_ids`` (BERT does, RoBERTa,
            DistilBERT and GPT-2 do not).
        chat_template: the checkpoint's chat template (Jinja text, or transformers' dict of
            named templates), None for a base model: kept so that a run trained from the
            checkpoint renders conversations as it did (``attnlab.interop.chat``) and its
            export writes the template back.
        checkpoint_eos_ids: the eos ids the checkpoint's ``generation_config.json`` (else
            ``config.json``) names, where ``transformers``' ``generate`` stops: kept so that a
            run's chat stops where the checkpoint's does (Qwen2.5-Instruct lists
            ``<|im_end|>`` and ``<|endoftext|>``, Llama 3.1 Instruct three ids).

    Examples:
        >>> from tokenizers import Tokenizer as Fast, models, pre_tokenizers
        >>> fast = Fast(models.WordLevel({"[UNK]": 0, "a": 1, "b": 2}, unk_token="[UNK]"))
        >>> fast.pre_tokenizer = pre_tokenizers.Whitespace()
        >>> tok = HFTokenizer(fast, {"unk": 0})
        >>> tok.encode("a b c"), tok.unk_id
        ([1, 2, 0], 0)
    """

    kind = KIND

    def __init__(self, tokenizer, specials: dict[str, int], *, padding_side: str = "right",
                 clean_up_tokenization_spaces: bool = False, token_type_ids: bool = False,
                 chat_template: str | dict | None = None,
                 checkpoint_eos_ids: Iterable[int] = ()):
        unknown = sorted(set(specials) - set(SPECIAL_ROLES))
        if unknown:
            raise ValueError(f"unknown special roles {unknown}; expected some of {SPECIAL_ROLES}")
        if padding_side not in ("right", "left"):
            raise ValueError(f"padding_side must be 'right' or 'left', got {padding_side!r}")
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self.tokenizer = tokenizer
        self.specials = {k: int(v) for k, v in specials.items() if v is not None}
        self.padding_side = padding_side
        self.clean_up_tokenization_spaces = bool(clean_up_tokenization_spaces)
        self.token_type_ids = bool(token_type_ids)
        self.chat_template = chat_template or None
        self.checkpoint_eos_ids = [int(i) for i in checkpoint_eos_ids]
        s = self.specials
        self.sos_id = _first(s.get("bos"), s.get("cls"))
        self.eos_id = _first(s.get("eos"), s.get("sep"))
        self.pad_id = _first(s.get("pad"), s.get("eos"))
        self.unk_id = s.get("unk")

    @classmethod
    def from_transformers(cls, hf_tokenizer, checkpoint_eos_ids: Iterable[int] = ()
                          ) -> "HFTokenizer":
        """The adapter of a loaded ``transformers`` fast tokeniser (``AutoTokenizer``'s), with
        the ``checkpoint_eos_ids`` of its directory's config.

        Raises:
            ValueError: if ``hf_tokenizer`` has no ``tokenizers`` backend (a slow tokeniser).
        """
        from tokenizers import Tokenizer as Fast

        backend = getattr(hf_tokenizer, "backend_tokenizer", None)
        if backend is None:
            raise ValueError(f"{type(hf_tokenizer).__name__} is not a fast (tokenizers) tokenizer")
        specials = {role: getattr(hf_tokenizer, f"{role}_token_id", None) for role in SPECIAL_ROLES}
        return cls(Fast.from_str(backend.to_str()), specials,
                   padding_side=hf_tokenizer.padding_side,
                   clean_up_tokenization_spaces=_cleans_up(hf_tokenizer),
                   token_type_ids="token_type_ids" in hf_tokenizer.model_input_names,
                   chat_template=getattr(hf_tokenizer, "chat_template", None),
                   checkpoint_eos_ids=checkpoint_eos_ids)

    @property
    def unsettled_chars(self) -> int:
        """The last characters of a decoded text that the ids after it may change: those a
        clean-up (``clean_up_tokenization_spaces``) may still drop a space of."""
        return _CLEAN_UP_REACH if self.clean_up_tokenization_spaces else 0

    @property
    def vocab_size(self) -> int:
        """Every id the tokeniser can give, added tokens included (``len(tok)`` in HF)."""
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def added_texts(self, *, special: bool = False) -> "re.Pattern[str] | None":
        """A pattern of the texts that ``encode`` reads as one added token, not as text: a
        chat template's marker (``<|im_end|>``), the eos token's (``</s>``,
        ``<|endoftext|>``), or another added token, special or not (Qwen's ``<tool_call>``);
        with ``special``, only the special ones and the eos, bos, pad and unk tokens (not
        Gemma's ``<td>`` and ``<h1>``, ordinary added tokens meant to be read as such); the
        longest first, as the tokenizer matches them. Added tokens of blanks alone (the
        runs of spaces some code models add) are left out: they are text. None when there is
        no such token."""
        added = self.tokenizer.get_added_tokens_decoder().items()
        roles = set(self.specials.values())
        texts = sorted((t.content for i, t in added if t.content.strip()
                        and (not special or t.special or i in roles)), key=len, reverse=True)
        # one search per text (Llama 3 has 256 special tokens)
        return re.compile("|".join(map(re.escape, texts))) if texts else None

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of ``text``; with ``add_special_tokens``, what the checkpoint's
        post-processor adds (BERT: ``[CLS] ... [SEP]``), not attnlab's sos ... eos.

        Raises:
            TypeError: if ``text`` is not a string.
        """
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, got {type(text).__name__}")
        return self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def encode_batch(self, texts: Iterable[str],
                     add_special_tokens: bool = False) -> list[list[int]]:
        texts = list(texts)
        if not all(isinstance(t, str) for t in texts):
            raise TypeError("encode_batch() takes strings")
        out = self.tokenizer.encode_batch(texts, add_special_tokens=add_special_tokens)
        return [e.ids for e in out]

    def encode_split(self, text: str, at: int) -> tuple[list[int], list[int]]:
        """``tok(text)``'s ids (the checkpoint's special tokens added), split before the first
        token that holds a character of ``text[at:]``: the ids of a prompt ``text[:at]`` and
        of what follows it, read as one text. Encoded apart, what follows would start a new
        text, and a SentencePiece-style tokenizer (Llama 2's, Mistral's) would put a space
        before it that ``text`` does not have.

        Examples:
            >>> from tokenizers import Tokenizer as Fast, models, normalizers, pre_tokenizers
            >>> fast = Fast(models.WordLevel({"<unk>": 0, "▁": 1, "▁a": 2, "▁b": 3},
            ...                              unk_token="<unk>"))
            >>> fast.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
            ...                                         normalizers.Replace(" ", "▁")])
            >>> fast.pre_tokenizer = pre_tokenizers.Split("▁", "merged_with_next")
            >>> tok = HFTokenizer(fast, {"unk": 0})
            >>> tok.encode_split("a b", 1), tok.encode("a") + tok.encode(" b")
            (([2], [3]), [2, 1, 3])
        """
        e = self.tokenizer.encode(text, add_special_tokens=True)
        n = next((i for i, (_, end) in enumerate(e.offsets) if end > at), len(e.ids))
        return e.ids[:n], e.ids[n:]

    def encode_piece(self, text: str, before: str = "", after: str = "") -> list[int]:
        """The ids of the tokens that start in ``text``, a piece of a longer text read
        between ``before`` (the end of the piece before it) and ``after`` (the start of the
        one after), as ``tok(whole text)`` gives them. With ``before`` empty, ``text`` starts
        the text: its ids lead with what the checkpoint puts before every text
        (``leading_ids``: Llama's and Mistral's bos).

        Why: a SentencePiece-style tokenizer (Llama 2's, Mistral's) puts a "▁" before every
        text it encodes, so a piece encoded alone would start with a space the whole text
        does not have there; and a token may run across the place where two pieces meet.
        Read with its neighbours, and cut where tokens start (as ``encode_split`` cuts a
        prompt from its response), the pieces' ids are the whole text's, each id once.

        Examples:
            >>> from tokenizers import Tokenizer as Fast, models, pre_tokenizers
            >>> fast = Fast(models.WordLevel({"<unk>": 0, "▁ab": 1, "▁b": 2},
            ...                              unk_token="<unk>"))
            >>> fast.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
            >>> tok = HFTokenizer(fast, {"unk": 0})  # "ab" cut in two: "▁ab" once, not "▁b"
            >>> tok.encode_piece("a", after="b"), tok.encode_piece("b", before="a")
            ([1], [])
            >>> tok.encode("b")  # alone
            [2]
        """
        e = self.tokenizer.encode(before + text + after, add_special_tokens=False)
        at, end = len(before), len(before) + len(text)
        # the tokens that start in ``text``: only those near its two ends are looked at (a
        # chunk's whole offsets would cost a tenth of its encoding)
        first, last = 0, len(e.ids)
        while first < last and e.token_to_chars(first)[0] < at:
            first += 1
        while last > first and e.token_to_chars(last - 1)[0] >= end:
            last -= 1
        return [*([] if before else self.leading_ids), *e.ids[first:last]]

    @property
    def leading_ids(self) -> list[int]:
        """The ids the checkpoint's post-processor puts before every text, as ``tok(text)``
        does: Llama's, Llama 3's and Mistral's bos; none for GPT-2 and Qwen (whose tokenizers
        add nothing)."""
        return self._added_around[0]

    @property
    def trailing_ids(self) -> list[int]:
        """The ids the checkpoint's post-processor puts after every text, as ``tok(text)``
        does: BERT's ``[SEP]``, the eos of a tokenizer that asks for it (``add_eos_token``, a
        GGUF file's ``tokenizer.ggml.add_eos_token``); none for most causal models."""
        return self._added_around[1]

    @functools.cached_property
    def _added_around(self) -> tuple[list[int], list[int]]:
        """(``leading_ids``, ``trailing_ids``), read from a probe text's encoding: the special
        tokens before and after its own."""
        e = self.tokenizer.encode("a", add_special_tokens=True)
        pairs = list(zip(e.ids, e.special_tokens_mask))

        def added(pairs):
            return [i for i, _ in itertools.takewhile(lambda pair: pair[1] == 1, pairs)]

        return added(pairs), added(reversed(pairs))[::-1]

    def encode_pair(self, text: str, pair: str | None = None, *,
                    add_special_tokens: bool = True) -> tuple[list[int], list[int]]:
        """``(input_ids, token_type_ids)`` of one text or a pair of texts, as
        ``tok(text, pair)`` gives them (BERT: ``[CLS] a [SEP] b [SEP]`` with types 0 ... 1).

        Examples:
            >>> from tokenizers import Tokenizer as Fast, models, pre_tokenizers
            >>> fast = Fast(models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
            >>> fast.pre_tokenizer = pre_tokenizers.Whitespace()
            >>> HFTokenizer(fast, {"unk": 0}).encode_pair("a", "a")
            ([1, 1], [0, 1])
        """
        e = self.tokenizer.encode(text, pair, add_special_tokens=add_special_tokens)
        return e.ids, e.type_ids

    def encode_for_model(self, texts: Iterable[str], max_length: int
                         ) -> list[tuple[list[int], list[int]]]:
        """``(input_ids, token_type_ids)`` of each text as the model reads it: the
        checkpoint's special tokens added (BERT: ``[CLS] ... [SEP]``), at most ``max_length``
        ids, the text's end cut and the special tokens kept — ``tok(text, truncation=True,
        max_length=max_length)``.

        Raises:
            ValueError: if ``max_length`` cannot hold the special tokens and one more.

        Examples:
            >>> from tokenizers import Tokenizer as Fast, models, pre_tokenizers, processors
            >>> fast = Fast(models.WordLevel({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "a": 3},
            ...                              unk_token="[UNK]"))
            >>> fast.pre_tokenizer = pre_tokenizers.Whitespace()
            >>> fast.post_processor = processors.TemplateProcessing(
            ...     single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
            >>> HFTokenizer(fast, {"unk": 0, "cls": 1, "sep": 2}).encode_for_model(["a a a"], 4)
            [([1, 3, 3, 2], [0, 0, 0, 0])]
        """
        texts = list(texts)
        if not all(isinstance(t, str) for t in texts):
            raise TypeError("encode_for_model() takes strings")
        added = self.tokenizer.num_special_tokens_to_add(False)
        if max_length <= added:
            raise ValueError(f"max_length ({max_length}) must exceed the {added} special "
                             f"tokens the tokenizer adds")
        self.tokenizer.enable_truncation(max_length)  # counts the special tokens too
        try:
            out = self.tokenizer.encode_batch(texts, add_special_tokens=True)
        finally:
            self.tokenizer.no_truncation()
        return [(e.ids, e.type_ids) for e in out]

    def to_transformers(self, *, model_max_length: int | None = None):
        """A ``transformers.PreTrainedTokenizerFast`` that encodes, pads and decodes as this
        tokeniser (and the checkpoint's tokeniser it came from) does: the same fast
        tokeniser, special tokens, padding side and model inputs (``token_type_ids`` only
        where the model reads them). ``AutoTokenizer.from_pretrained`` reads back what its
        ``save_pretrained`` writes. ``model_max_length``, when given, is where
        ``truncation=True`` cuts (without it transformers does not cut at all)."""
        from tokenizers import Tokenizer as Fast
        from transformers import PreTrainedTokenizerFast

        fast = Fast.from_str(self.tokenizer.to_str())
        tokens = {f"{role}_token": fast.id_to_token(i) for role, i in self.specials.items()}
        inputs = ["input_ids", *(["token_type_ids"] if self.token_type_ids else []),
                  "attention_mask"]
        # a BPE tokeniser that cleans up comes from a run saved before checkpoints were read as
        # transformers 5 reads them (which ignores the clean-up for BPE): the export keeps
        # decoding as the run does ("isn't here."), so the two agree
        forced = ({_FORCED_CLEAN_UP: True}
                  if self.clean_up_tokenization_spaces and _bpe(fast) else {})
        theirs = PreTrainedTokenizerFast(
            tokenizer_object=fast, padding_side=self.padding_side, model_input_names=inputs,
            clean_up_tokenization_spaces=self.clean_up_tokenization_spaces, **tokens, **forced,
            **({"model_max_length": model_max_length} if model_max_length else {}))
        theirs.chat_template = self.chat_template
        return theirs

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """Text of ``ids`` as ``transformers`` decodes it (special tokens dropped unless
        ``skip_special_tokens=False``; an unknown piece is its unk token's text).

        Raises:
            ValueError: for an id outside ``[0, vocab_size)``.
        """
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"id {bad[0]} is outside the vocabulary [0, {self.vocab_size})")
        text = self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)
        return clean_up(text) if self.clean_up_tokenization_spaces else text

    def unsettled(self, ids: list[int]) -> int:
        """How many of the last ``ids`` have a text the ids after them may change: with
        SentencePiece's byte fallback (Llama 2's, Mistral's ``<0xNN>`` pieces: a
        ``ByteFallback`` decoder) the last run of byte pieces, which ``tokenizers`` decodes
        together: one U+FFFD for each of its bytes when the run is no UTF-8, so ``<0x12>``
        reads as U+0012 alone and as U+FFFD once ``<0xC0>`` follows it. The special tokens
        ``decode`` skips within the run do not end it. None otherwise (byte-level BPE decodes
        bytes that are no UTF-8 one U+FFFD per invalid sequence, the text before unchanged).

        Examples:
            >>> from tokenizers import Tokenizer as Fast, decoders, models
            >>> fast = Fast(models.BPE({"a": 0, "<0x12>": 1, "<0xC0>": 2}, [], byte_fallback=True))
            >>> fast.decoder = decoders.ByteFallback()
            >>> tok = HFTokenizer(fast, {})
            >>> [ord(c) for c in tok.decode([1])], [ord(c) for c in tok.decode([1, 2])]
            ([18], [65533, 65533])
            >>> tok.unsettled([0, 1, 2]), tok.unsettled([1, 2, 0])
            (2, 0)
        """
        if self._skipped_in_byte_runs is None:
            return 0
        run = 0
        for i in reversed(ids):
            if (i not in self._skipped_in_byte_runs
                    and not _BYTE_PIECE.fullmatch(self.tokenizer.id_to_token(i) or "")):
                break
            run += 1
        return run

    @functools.cached_property
    def _skipped_in_byte_runs(self) -> set[int] | None:
        """The special ids ``decode`` skips, where the decoder reads byte fallback's runs of
        byte pieces (``unsettled``); None for another decoder. Read once: ``unsettled`` is
        asked at every generated token."""
        if _piece_bytes_reader(self.tokenizer) is not fallback_piece_bytes:
            return None
        return {i for i, t in self.tokenizer.get_added_tokens_decoder().items() if t.special}

    def tokenize(self, text: str) -> list[str]:
        return self.tokenizer.encode(text, add_special_tokens=False).tokens

    def labels(self, ids: Iterable[int], skip_special_tokens: bool = True) -> list[str]:
        """The text of each id of ``ids``; of a byte-level checkpoint's (GPT-2's, Qwen's,
        Llama 3's: a ``ByteLevel`` decoder) and of a SentencePiece one with byte fallback
        (Llama 2's, Mistral's: a ``ByteFallback`` decoder, whose ``<0xE6>`` is that byte and
        ``▁`` a space) as ``BPETokenizer.labels`` shows ours: a piece holding part of a
        character's bytes shows that whole character, where its own ``decode`` is U+FFFD, and
        a byte that makes no character its escape (``<0xD0>``). Added and special tokens are
        as ``decode`` gives them."""
        bytes_of = _piece_bytes_reader(self.tokenizer)
        if bytes_of is None:
            return super().labels(ids, skip_special_tokens)
        kept = {*self.tokenizer.get_added_tokens_decoder(), *self.specials.values()}

        def piece_bytes(i: int) -> bytes | None:
            piece = None if i in kept else self.tokenizer.id_to_token(i)
            return None if piece is None else bytes_of(piece)

        return byte_level_labels(ids, piece_bytes, lambda i: self.decode(
            [i], skip_special_tokens=skip_special_tokens))

    def unknown(self, text: str) -> list[str]:
        e = self.tokenizer.encode(text, add_special_tokens=False)
        return [text[a:b] for (a, b), i in zip(e.offsets, e.ids) if i == self.unk_id]

    def _payload(self) -> dict:
        return {"tokenizer": json.loads(self.tokenizer.to_str()), "specials": self.specials,
                "padding_side": self.padding_side,
                "clean_up_tokenization_spaces": self.clean_up_tokenization_spaces,
                "token_type_ids": self.token_type_ids,
                **({"chat_template": self.chat_template} if self.chat_template else {}),
                **({"checkpoint_eos_ids": self.checkpoint_eos_ids}
                   if self.checkpoint_eos_ids else {})}

    @classmethod
    def load(cls, path: str | Path) -> "HFTokenizer":
        """Read a tokeniser written by ``save`` (one JSON file; ``tokenizers`` only).

        Raises:
            UsageError: naming the file if it is missing or not an ``HFTokenizer`` file.
        """
        from tokenizers import Tokenizer as Fast

        return read_saved(path, KIND, lambda data: cls(
            Fast.from_str(json.dumps(data["tokenizer"])), data["specials"],
            padding_side=data["padding_side"],
            clean_up_tokenization_spaces=data["clean_up_tokenization_spaces"],
            token_type_ids=data["token_type_ids"], chat_template=data.get("chat_template"),
            checkpoint_eos_ids=data.get("checkpoint_eos_ids", ())))


# transformers 5's setting that cleans up a BPE model's decoded text all the same
_FORCED_CLEAN_UP = "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output"


def _cleans_up(hf_tokenizer) -> bool:
    """Whether ``transformers``' ``decode`` of the fast tokeniser ``hf_tokenizer`` cleans its
    text (``clean_up_tokenization_spaces``): transformers 5 ignores the setting for a BPE
    model (GPT-2's, Llama's, Qwen's: the clean-up, made for WordPiece, would glue "n't" and
    "." to the word before them where the text has a space) unless told otherwise by
    ``clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output``; earlier
    versions, which lack that setting, clean up any model."""
    forced = getattr(hf_tokenizer, _FORCED_CLEAN_UP, None)
    bpe = _bpe(hf_tokenizer.backend_tokenizer)
    return bool(hf_tokenizer.clean_up_tokenization_spaces) and (not bpe or forced in (None, True))


def _bpe(fast) -> bool:
    """Whether the ``tokenizers.Tokenizer`` ``fast`` is a BPE model (GPT-2's, Llama's)."""
    return type(fast.model).__name__ == "BPE"


def _byte_level(fast) -> tuple[dict, list[dict]]:
    """(the pre-tokeniser of the ``tokenizers.Tokenizer`` ``fast`` as JSON, its ``ByteLevel``
    parts: itself, or those of a ``Sequence``)."""
    state = json.loads(fast.pre_tokenizer.__getstate__()) if fast.pre_tokenizer else {}
    parts = state.get("pretokenizers", [state]) if state.get("type") == "Sequence" else [state]
    return state, [p for p in parts if p.get("type") == "ByteLevel"]


def is_byte_level(fast) -> bool:
    """Whether the ``tokenizers.Tokenizer`` ``fast`` pre-tokenises byte-level (GPT-2's,
    RoBERTa's BPE: a word's space is part of its first token, ``Ġ``)."""
    return bool(_byte_level(fast)[1])


def _piece_bytes_reader(fast) -> Callable[[str], bytes | None] | None:
    """How the ``tokenizers.Tokenizer`` ``fast`` turns a piece into bytes, read from its decoder
    (one, or those of a ``Sequence``): byte-level BPE's symbols (``ByteLevel``), SentencePiece's
    pieces with byte fallback (``ByteFallback``: ``fallback_piece_bytes``); None where its
    pieces are text (WordPiece's)."""
    state = json.loads(fast.decoder.__getstate__()) if fast.decoder else {}
    parts = state.get("decoders", [state]) if state.get("type") == "Sequence" else [state]
    kinds = {p.get("type") for p in parts}
    return (symbol_bytes if "ByteLevel" in kinds
            else fallback_piece_bytes if "ByteFallback" in kinds else None)


_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # SentencePiece's piece of one byte


def fallback_piece_bytes(piece: str) -> bytes:
    """The bytes a SentencePiece piece stands for in a tokeniser with byte fallback (Llama
    2's): ``<0xE6>`` that byte, any other piece its UTF-8 text with ``▁`` the space it marks.

    Examples:
        >>> fallback_piece_bytes("<0xE6>"), fallback_piece_bytes("▁the")
        (b'\\xe6', b' the')
    """
    byte = _BYTE_PIECE.fullmatch(piece)
    return bytes([int(byte[1], 16)]) if byte else piece.replace("▁", " ").encode("utf-8")


def bare_first_word(fast) -> bool:
    """Whether the ``tokenizers.Tokenizer`` ``fast`` is a byte-level BPE (GPT-2's,
    RoBERTa's) that reads a text's first word without the space every other word has
    (``Ġ``): the word is then other ids at the start of a text than within it, which is why
    ``transformers`` reads words given one by one (``is_split_into_words=True``) only with
    ``add_prefix_space=True``."""
    return any(not p.get("add_prefix_space", True) for p in _byte_level(fast)[1])


def with_prefix_space(fast):
    """A copy of the ``tokenizers.Tokenizer`` ``fast`` whose byte-level pre-tokeniser adds a
    space before a text's first word (``add_prefix_space``), as ``transformers``' tokeniser
    of a byte-level BPE does when built with ``add_prefix_space=True``."""
    from tokenizers import Tokenizer as Fast

    state, parts = _byte_level(fast)
    for part in parts:
        part["add_prefix_space"] = True
    whole = json.loads(fast.to_str())
    whole["pre_tokenizer"] = state
    return Fast.from_str(json.dumps(whole))


def read_saved(path: str | Path, kind: str, build: Callable[[dict], Tokenizer]) -> Tokenizer:
    """``build(data)`` of the JSON file ``path`` that a tokeniser of ``kind`` saved.

    Raises:
        UsageError: naming the file if it is missing, not JSON, of another kind, or
            ``build`` fails on it (a missing key, a bad value).
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"tokenizer file not found: {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("type") != kind:
            raise ValueError(f"type {data.get('type')!r}, expected {kind!r}")
        return build(data)
    except Exception as e:  # JSON, KeyError, ValueError, and the Rust side's plain Exception
        raise UsageError(f"{path} is not a {kind!r} tokenizer file written by attnlab "
                         f"({' '.join(str(e).split())})") from None
