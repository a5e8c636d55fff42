"""``attnlab prepare --tokenizer bpe`` (and ``train lm --data FILE.txt --tokenizer bpe``) hands
the Rust library pieces of a few thousand characters, cut before white space, instead of each
1 MB chunk as one string: the same ids, sooner (benchmarks/RESULTS.md, "bpe_prepare"). Timed
there, not here; these tests hold the ids and the size of what the library is given."""
import random
import re

import numpy as np
import pytest

from attnlab.data import corpus
from attnlab.data.corpus import encode_file, prepare
from attnlab.tokenizers import BPETokenizer

PIECE = 64  # BPE_ENCODE_CHARS in these tests, so that a short text is cut many times
# spaces, tabs, line breaks (CRLF too), runs of each, no-break and ideographic spaces, a
# combining accent, CJK without spaces, an emoji, contractions, digits, and words longer than a
# piece (which must not be cut)
PARTS = ["word", "  ", "\n", "\t", " ", "日本語のテキスト", "e\u0301", "naïve", "'s", "'ll",
         "123", "!!", "\u3000", "\u00a0", "<eos>", "x" * 150, "😀", " \n ", "\r\n", "   "]


@pytest.fixture(scope="module")
def text_and_tokenizer():
    rng = random.Random(0)
    text = "".join(rng.choice(PARTS) for _ in range(4_000))
    return text, BPETokenizer.fit([text], vocab_size=400)


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch):
    monkeypatch.setattr(corpus, "BPE_ENCODE_CHARS", PIECE)


class _Spy:
    """A ``tokenizers.Tokenizer`` that records the length of every string it is given."""

    def __init__(self, inner, lengths: list[int]) -> None:
        self.inner, self.lengths = inner, lengths

    def encode(self, text, **options):
        self.lengths.append(len(text))
        return self.inner.encode(text, **options)

    def encode_batch(self, texts, **options):
        self.lengths.extend(map(len, texts))
        return self.inner.encode_batch(texts, **options)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_bpe_token_file_holds_the_ids_of_the_whole_text(text_and_tokenizer, tmp_path):
    text, tok = text_and_tokenizer
    (tmp_path / "in.txt").write_text(text, encoding="utf-8", newline="")
    count = encode_file([tmp_path / "in.txt"], tok, tmp_path / "all.bin")
    ids = np.fromfile(tmp_path / "all.bin", dtype=np.uint16).tolist()
    assert count == len(ids) and ids == tok.encode(text)


def test_prepare_splits_the_same_ids_as_before(text_and_tokenizer, tmp_path):
    """train.bin then val.bin are the whole text's ids, as a 1 MB chunk encoded at once gave."""
    text, tok = text_and_tokenizer
    (tmp_path / "in.txt").write_text(text, encoding="utf-8", newline="")
    meta = prepare([tmp_path / "in.txt"], tmp_path / "c", tokenizer=tok)
    read = [np.fromfile(tmp_path / "c" / f"{s}.bin", dtype=np.uint16).tolist()
            for s in ("train", "val")]
    whole = [i for chunk in corpus._encoded([tmp_path / "in.txt"], tok, corpus.CHUNK_CHARS,
                                            int(len(text) * 0.9))
             for i in ([] if chunk[0] == "val" else chunk[1])]
    assert read[0] == whole and read[0] + read[1] == tok.encode(text)
    assert (meta["train_tokens"], meta["val_tokens"]) == tuple(map(len, read))


def test_the_library_is_given_pieces_not_the_whole_chunk(text_and_tokenizer, tmp_path):
    """A chunk of ~40,000 characters reaches the library in pieces no longer than
    ``BPE_ENCODE_CHARS`` and the longest word after it (before: one string of the chunk)."""
    text, tok = text_and_tokenizer
    (tmp_path / "in.txt").write_text(text, encoding="utf-8", newline="")
    lengths: list[int] = []
    spied = BPETokenizer(_Spy(tok.tokenizer, lengths), normalize=tok.normalize)
    encode_file([tmp_path / "in.txt"], spied, tmp_path / "all.bin")
    assert len(text) > 100 * PIECE and sum(lengths) == len(tok.normalized(text))
    longest_word = max(map(len, re.findall(r"[^ \n]+", text)))  # (CJK, tabs and all)
    assert max(lengths) <= PIECE + longest_word + 1


def test_a_text_without_white_space_is_one_piece():
    """Cutting a word would change its tokens: a chunk with nowhere to cut stays whole."""
    assert corpus._word_pieces("字" * 10_000, 4096) == ["字" * 10_000]
    assert corpus._word_pieces("ab " + "字" * 9_000 + " c", 4096) == ["ab", " " + "字" * 9_000,
                                                                       " c"]
    assert corpus._word_pieces("   " + "字" * 9_000, 4096) == ["   " + "字" * 9_000]


@pytest.mark.parametrize("space", sorted({chr(c) for c in range(0x3001) if chr(c).isspace()}),
                         ids=lambda c: f"U+{ord(c):04X}")
def test_no_cut_falls_where_the_bpe_rule_sees_no_space(space):
    """Python's white space after a mark, before a space: U+001C..U+001F (MARC records' field
    and subfield marks) are no space to the byte-level rule, so '!\\x1f' is one pre-token and
    a cut between them gave other ids."""
    text = f"ab!{space} cd " * 300
    tok = BPETokenizer.fit([text], vocab_size=300)
    assert corpus._encode_text(tok, text) == tok.encode(text)
