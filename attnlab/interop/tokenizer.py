"""attnlab tokenisers as Hugging Face fast tokenisers (``PreTrainedTokenizerFast``).

The exported tokeniser gives the ids attnlab's gives, for every text:

- ``char``: a word-level model over single code points (every character its own piece);
- ``word``: a word-level model over the pieces of attnlab's word pattern (a word or a
  punctuation mark with the one space before it; runs of other white space);
- ``bpe``: attnlab's byte-level BPE already is a ``tokenizers`` model and is exported as it is.

A checkpoint's own tokeniser (kind ``hf``, ``attnlab.interop.hf_tokenizer``) goes back as it
came: its ``tokenizers`` model with its own special tokens, ids and padding side.

A tokeniser that brings text to a Unicode normal form (``normalize``, NFC for one fit now)
goes with the same form as the Hugging Face normaliser. Unknown pieces become ``<unk>``
(id 3) in both. The special tokens keep attnlab's ids (pad 0,
sos 1 as ``bos_token``, eos 2, unk 3) and nothing is added around the text, as attnlab's
``encode`` adds nothing. Decoding differs in one point: Hugging Face writes an unknown id as
the text ``<unk>`` (or drops it with ``skip_special_tokens``) where attnlab writes U+FFFD.

``transformers`` and ``tokenizers`` are imported inside the function (the ``hf`` extra).
"""
from __future__ import annotations

from ..tokenizers import SPECIAL_TOKENS, Tokenizer

__all__ = ["to_hf_tokenizer", "special_ids"]

# attnlab's word pieces (``tokenizers._WORD_PIECES``) in the Oniguruma syntax of the tokenizers
# library: the same alternatives, with Python's classes spelled out, as Oniguruma's ``\w`` and
# ``\s`` differ from Python's: Python's ``\w`` is ``str.isalnum()`` or "_" (letters and numbers,
# so a combining mark such as U+0301 or a Devanagari vowel sign is a piece of its own), where
# Oniguruma's takes marks and every connector punctuation but not the numbers of ``\p{Nl}``
# and ``\p{No}`` (Roman numerals, "²"); Python's ``\s`` also takes U+001C-U+001F. The two
# still differ on characters that Python's Unicode database (``unicodedata.unidata_version``)
# does not yet assign and the library's newer one does.
_WORD = r"\p{L}\p{N}_"
_SPACE = r"\s\x{1C}-\x{1F}"
_WORD_PATTERN = (rf" ?[{_WORD}]+| ?[^{_WORD}{_SPACE}]|[{_SPACE}]+(?![^{_SPACE}])|[{_SPACE}]+")
_ONE_CHARACTER = r"[\s\S]"


def to_hf_tokenizer(tokenizer: Tokenizer, *, model_max_length: int | None = None,
                    strip: bool = False):
    """A ``transformers.PreTrainedTokenizerFast`` that encodes as ``tokenizer`` does.

    ``model_max_length``: the most ids the exported model reads, special tokens included (a
    classifier's or tagger's ``--max-len``), so that ``tok(text, truncation=True)`` cuts a long
    text where the run cut it, as the checkpoint's own tokenizer would; None: no limit.
    ``strip``: the white space around a text is dropped first, as a translate run that
    records ``sources_stripped`` reads its sources.

    Examples:
        >>> from attnlab.tokenizers import WordTokenizer
        >>> ours = WordTokenizer.fit(["the cat sat.", "the dog"])
        >>> theirs = to_hf_tokenizer(ours)
        >>> theirs("the dog sat!")["input_ids"] == ours.encode("the dog sat!")
        True
    """
    from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers
    from tokenizers import Tokenizer as HFTokenizer
    from transformers import PreTrainedTokenizerFast

    if tokenizer.kind == "hf":  # a checkpoint's own: its fast tokeniser as it came
        return tokenizer.to_transformers(model_max_length=model_max_length)
    if tokenizer.kind == "bpe":
        inner = HFTokenizer.from_str(tokenizer.tokenizer.to_str())
    elif tokenizer.kind in ("char", "word"):
        pattern = _ONE_CHARACTER if tokenizer.kind == "char" else _WORD_PATTERN
        vocab = {piece: i for i, piece in enumerate(tokenizer.pieces)}
        inner = HFTokenizer(models.WordLevel(vocab, unk_token=SPECIAL_TOKENS[tokenizer.unk_id]))
        inner.pre_tokenizer = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
        inner.decoder = decoders.Fuse()  # the pieces carry their own spaces
    else:
        raise ValueError(f"no Hugging Face form for a {tokenizer.kind!r} tokenizer")
    if tokenizer.normalize:  # "NFC" -> normalizers.NFC(), as attnlab's encode does first
        inner.normalizer = getattr(normalizers, tokenizer.normalize)()
    if strip:  # before the Unicode form, as the run's as_source comes before its encode
        inner.normalizer = normalizers.Sequence(
            [normalizers.Strip(), *([inner.normalizer] if inner.normalizer else [])])
    pad, sos, eos, unk = SPECIAL_TOKENS
    return PreTrainedTokenizerFast(tokenizer_object=inner, pad_token=pad, bos_token=sos,
                                   eos_token=eos, unk_token=unk,
                                   model_max_length=model_max_length or int(1e30),
                                   split_special_tokens=True)


def special_ids(tokenizer: Tokenizer) -> dict[str, int | None]:
    """The ``bos_token_id``, ``eos_token_id`` and ``pad_token_id`` a Hugging Face config of a
    model trained with ``tokenizer`` states: a checkpoint's own (GPT-2: ``<|endoftext|>`` as bos
    and eos, no pad), else attnlab's sos, eos and pad.

    Examples:
        >>> from attnlab.tokenizers import CharTokenizer
        >>> special_ids(CharTokenizer.fit(["ab"]))
        {'bos_token_id': 1, 'eos_token_id': 2, 'pad_token_id': 0}
    """
    if tokenizer.kind == "hf":
        return {f"{role}_token_id": tokenizer.specials.get(role) for role in ("bos", "eos", "pad")}
    return {"bos_token_id": tokenizer.sos_id, "eos_token_id": tokenizer.eos_id,
            "pad_token_id": tokenizer.pad_id}
