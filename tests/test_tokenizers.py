"""Tokenisers: round-trips on arbitrary Unicode, unknown symbols, special ids, save/load."""
import json
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnlab.errors import UsageError
from attnlab.tokenizers import (BPETokenizer, CharTokenizer, WordTokenizer, load_tokenizer)

CORPUS = ["The cat sat on the mat.", "the dog  ate\tthe cat!", "Ünïcödé: 日本語, emoji 🙂\n"]
# Any Unicode text, surrogates excluded (they cannot be encoded as UTF-8 at all).
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def bpe():
    return BPETokenizer.fit(CORPUS * 5, vocab_size=300)


# ---- round-trips ---------------------------------------------------------------------------
# Char and word tokenisers round-trip exactly on text whose pieces were seen in fit: fitting on
# the text itself (plus a corpus) guarantees that; BPE is byte-level and round-trips anything.
# A tokeniser fit now reads text in NFC, so what comes back is the text in NFC (to Unicode the
# same text: "e" + U+0301 comes back as "é"); one saved without a normal form (a file written
# before attnlab normalised: normalize=None) gives back the text itself.
FORMS = pytest.mark.parametrize("normalize", [None, "NFC"])


def as_read(text, normalize):
    return unicodedata.normalize(normalize, text) if normalize else text


@FORMS
@SETTINGS
@given(text=TEXT)
def test_char_round_trip_after_fitting_on_the_text(normalize, text):
    tok = CharTokenizer.fit(CORPUS + [text], normalize=normalize)
    assert tok.decode(tok.encode(text)) == as_read(text, normalize)
    assert len(tok.encode(text)) == len(as_read(text, normalize))  # one id per code point


@FORMS
@SETTINGS
@given(text=TEXT)
def test_word_round_trip_after_fitting_on_the_text(normalize, text):
    tok = WordTokenizer.fit(CORPUS + [text], normalize=normalize)
    assert tok.unk_id not in tok.encode(text)
    assert tok.decode(tok.encode(text)) == as_read(text, normalize)


@pytest.fixture(scope="module")
def bpe_as_given():
    return BPETokenizer.fit(CORPUS * 5, vocab_size=300, normalize=None)


@SETTINGS
@given(text=TEXT)
def test_bpe_round_trips_any_text_without_unknowns(bpe, bpe_as_given, text):
    for tok, normalize in ((bpe, "NFC"), (bpe_as_given, None)):
        ids = tok.encode(text)
        assert tok.unk_id not in ids
        assert tok.decode(ids) == as_read(text, normalize)


def test_bpe_round_trips_white_space_and_special_token_spellings(bpe):
    text = "  two  spaces\r\n\ttab <pad><eos> <unk> end  "
    ids = bpe.encode(text)
    assert {0, 1, 2, 3}.isdisjoint(ids)  # user text never becomes a special id
    assert bpe.decode(ids) == text


def test_bpe_learns_merges_that_shorten_frequent_words(bpe):
    assert bpe.vocab_size > 260
    assert len(bpe.encode("the cat")) < len("the cat".encode())


def test_word_pieces_cover_the_text_with_spaces_attached():
    tok = WordTokenizer.fit(CORPUS)
    assert tok.tokenize("the cat sat.") == ["the", " cat", " sat", "."]
    assert "".join(tok.tokenize(CORPUS[1])) == CORPUS[1]


# ---- unknown symbols and special ids -------------------------------------------------------

@pytest.mark.parametrize("cls", [CharTokenizer, WordTokenizer])
def test_unseen_symbols_map_to_unk_and_decode_to_replacement_char(cls):
    tok = cls.fit(["abc abc"])
    ids = tok.encode("abc Ω")
    assert ids[-1] == tok.unk_id == 3
    assert tok.decode(ids).endswith("\ufffd")
    assert tok.tokenize("abc Ω")[-1] in ("Ω", " Ω")  # tokenize shows the text, known or not


@pytest.mark.parametrize("make", [
    lambda: CharTokenizer.fit(CORPUS),
    lambda: WordTokenizer.fit(CORPUS),
    lambda: BPETokenizer.fit(CORPUS, vocab_size=270),
])
def test_special_ids_are_fixed_and_wrap_with_add_special_tokens(make):
    tok = make()
    assert (tok.pad_id, tok.sos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
    plain = tok.encode("the cat")
    assert tok.encode("the cat", add_special_tokens=True) == [1, *plain, 2]
    assert min(plain) >= 4
    assert tok.decode([1, *plain, 2, 0, 0]) == "the cat"  # specials dropped
    assert tok.decode([1, *plain, 2], skip_special_tokens=False) == "<sos>the cat<eos>"
    assert tok.encode_batch(["the", "cat"]) == [tok.encode("the"), tok.encode("cat")]


def test_vocab_size_caps_the_vocabulary_keeping_the_most_frequent():
    tok = CharTokenizer.fit(["aaaabbbc"], vocab_size=6)
    assert tok.vocab_size == 6
    assert tok.encode("abc") == [4, 5, 3]  # 'c' (rarest) did not fit
    with pytest.raises(ValueError, match=r"vocab_size must be at least 5.*got 4"):
        CharTokenizer.fit(["a"], vocab_size=4)
    with pytest.raises(ValueError, match=r"at least 260.*got 100"):
        BPETokenizer.fit(["a"], vocab_size=100)


def test_decode_rejects_ids_outside_the_vocabulary(bpe):
    with pytest.raises(ValueError, match=r"id 99 is outside the vocabulary \[0, 6\)"):
        CharTokenizer.fit(["ab"]).decode([4, 99])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        bpe.decode([bpe.vocab_size])


# ---- save / load ----------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: CharTokenizer.fit(CORPUS),
    lambda: WordTokenizer.fit(CORPUS, min_freq=1),
    lambda: BPETokenizer.fit(CORPUS * 3, vocab_size=290),
])
def test_save_load_identity(tmp_path, make):
    tok = make()
    tok.save(tmp_path / "tokenizer.json")
    back = load_tokenizer(tmp_path / "tokenizer.json")
    assert type(back) is type(tok) and back.vocab_size == tok.vocab_size
    assert type(tok).load(tmp_path / "tokenizer.json").vocab_size == tok.vocab_size
    for text in CORPUS + ["unseen ☃ <pad> text"]:
        assert back.encode(text) == tok.encode(text)
        assert back.decode(back.encode(text)) == tok.decode(tok.encode(text))
    back.save(tmp_path / "again.json")
    assert json.loads((tmp_path / "again.json").read_text()) == json.loads(
        (tmp_path / "tokenizer.json").read_text())


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(UsageError, match="tokenizer file not found: .*nope.json"):
        load_tokenizer(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "sentencepiece"}')
    with pytest.raises(UsageError, match=r"bad.json: unknown tokenizer type 'sentencepiece'"):
        load_tokenizer(bad)
    CharTokenizer.fit(["ab"]).save(tmp_path / "char.json")
    with pytest.raises(UsageError, match=r"char.json holds a 'char' tokenizer, not 'word'"):
        WordTokenizer.load(tmp_path / "char.json")


def test_the_unknown_note_names_a_repeated_word_once():
    """A word the vocabulary lacks, at the start and later ("zzz" and " zzz" to the word
    tokenizer), was named twice: "unk: 'zzz', 'zzz'"."""
    from attnlab.tokenizers import unknown_note

    tok = WordTokenizer.fit(["the film was good"])
    assert unknown_note(tok, ["zzz film zzz qqq zzz"], ["--input"]) == (
        "--input holds pieces unknown to this model, each read as unk: 'zzz', 'qqq'")


def test_bpe_names_the_characters_its_training_text_lacked(tmp_path):
    """Byte-level BPE has no unk, so a text in a script the training text never had (Greek for
    a model fit on English) was read without a word, though the model never learnt the bytes
    that spell it: no note, where a char or word tokenizer's run says so."""
    from attnlab.tokenizers import unknown_note

    tok = BPETokenizer.fit(["the café was good"] * 5, vocab_size=270)
    assert unknown_note(tok, ["the cafe\u0301", "the Φilm wαs good"], ["--input", "line 2"]) == (
        "line 2 holds characters absent from the text the bpe tokenizer was fit on (spelt in "
        "bytes the model may never have learnt): 'Φ', 'i', 'l', 'm', 'α'")
    tok.save(tmp_path / "bpe.json")
    assert load_tokenizer(tmp_path / "bpe.json").unknown("Φ was") == ["Φ"]
    # a file saved before attnlab kept the characters: nothing is known, nothing is said
    data = json.loads((tmp_path / "bpe.json").read_text(encoding="utf-8"))
    del data["characters"]
    (tmp_path / "old.json").write_text(json.dumps(data), encoding="utf-8")
    assert unknown_note(load_tokenizer(tmp_path / "old.json"), ["Φ"], ["--input"]) is None
