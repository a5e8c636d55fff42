"""Unicode normal forms: a tokeniser fit now reads "é" typed as one code point (NFC) and as
"e" + a combining accent (NFD) as the same text; a tokenizer.json written before normalising
existed keeps encoding exactly as it did."""
import json
import unicodedata

import pytest

from attnlab.errors import UsageError
from attnlab.tokenizers import BPETokenizer, CharTokenizer, WordTokenizer, load_tokenizer

NFC_TEXTS = ["le café est très bon", "Ünïcödé señor, naïve Åse", "olé! crème brûlée"]


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


FITS = [lambda texts: CharTokenizer.fit(texts), lambda texts: WordTokenizer.fit(texts),
        lambda texts: BPETokenizer.fit(texts * 5, vocab_size=300)]


@pytest.mark.parametrize("fit", FITS, ids=["char", "word", "bpe"])
def test_nfd_text_gives_the_ids_of_the_same_text_in_nfc(fit, tmp_path):
    tok = fit(NFC_TEXTS)
    tok.save(tmp_path / "tokenizer.json")
    back = load_tokenizer(tmp_path / "tokenizer.json")
    for text in NFC_TEXTS:
        assert nfd(text) != text
        assert tok.encode(nfd(text)) == tok.encode(text) == back.encode(nfd(text))
        assert tok.unk_id not in tok.encode(nfd(text))
        assert tok.decode(tok.encode(nfd(text))) == text  # NFC text back, as written
        assert tok.encode_batch([nfd(text)]) == [tok.encode(text)]
        assert tok.unknown(nfd(text)) == []
    assert json.loads((tmp_path / "tokenizer.json").read_text())["normalize"] == "NFC"


def test_text_fit_in_nfd_is_learnt_in_nfc():
    tok = WordTokenizer.fit([nfd(t) for t in NFC_TEXTS])
    assert tok.encode("le café") == tok.encode(nfd("le café"))
    assert tok.unk_id not in tok.encode("le café")


def test_word_tokenizer_keeps_a_word_whole_whatever_the_form_of_its_accent():
    tok = WordTokenizer.fit(NFC_TEXTS)
    assert tok.tokenize(nfd("le café")) == ["le", " café"]


def old_file(path, kind, body):
    """A tokenizer.json as attnlab wrote it before it normalised: no "normalize" key."""
    path.write_text(json.dumps({"type": kind, "version": 1, **body}, ensure_ascii=False))
    return path


def test_an_old_tokenizer_file_encodes_exactly_as_before(tmp_path):
    pieces = ["<pad>", "<sos>", "<eos>", "<unk>", "le", " café", "e", "\u0301"]
    word = load_tokenizer(old_file(tmp_path / "word.json", "word", {"pieces": pieces}))
    assert word.normalize is None
    assert word.encode("le café") == [4, 5]
    assert word.encode(nfd("le café")) == [4, 3, 7]  # " cafe" unknown, the accent its own piece
    assert word.decode([4, 3, 7]) == "le\ufffd\u0301"
    char = load_tokenizer(old_file(tmp_path / "char.json", "char", {"pieces": pieces[:4] + [
        "c", "a", "f", "é", "e", "\u0301"]}))
    assert char.encode(nfd("café")) == [4, 5, 6, 8, 9] and char.encode("café") == [4, 5, 6, 7]
    char.save(tmp_path / "again.json")  # saved again, it still reads text as given
    assert load_tokenizer(tmp_path / "again.json").encode(nfd("café")) == [4, 5, 6, 8, 9]


def test_an_old_bpe_file_encodes_exactly_as_before(tmp_path):
    fresh = BPETokenizer.fit(NFC_TEXTS * 5, vocab_size=300, normalize=None)
    body = {"tokenizer": json.loads(fresh.tokenizer.to_str())}
    old = load_tokenizer(old_file(tmp_path / "bpe.json", "bpe", body))
    assert old.normalize is None
    for text in NFC_TEXTS:
        assert old.encode(nfd(text)) == fresh.encode(nfd(text)) != old.encode(text)
        assert old.decode(old.encode(nfd(text))) == nfd(text)


def test_a_file_naming_no_normal_form_is_refused_naming_the_file(tmp_path):
    bad = old_file(tmp_path / "bad.json", "char", {"pieces": ["<pad>", "<sos>", "<eos>", "<unk>"],
                                                    "normalize": "NFX"})
    with pytest.raises(UsageError, match=r"bad.json is not a valid 'char' tokenizer file "
                                         r"\(normalize must be None or one of .*'NFX'"):
        load_tokenizer(bad)
    with pytest.raises(ValueError, match="normalize must be"):
        CharTokenizer.fit(["ab"], normalize="nfc")
