"""What a byte-level BPE id is shown as: the labels of attention maps (``Tokenizer.labels``).

An id of byte-level BPE may stand for part of a character's bytes (an emoji, a CJK character
or an accented letter the merges never joined); decoded alone it is U+FFFD, and `attnlab plot
attention` and `attnlab view` labelled such tokens "�", so a map over "東京 😀" showed a row of
question marks. Each now shows the character its bytes belong to, as ``tokenize`` shows a
text's pieces.
"""
import json
import re

import pytest

from attnlab.cli import main
from attnlab.data.corpus import prepare
from attnlab.tokenizers import BPETokenizer, CharTokenizer

TEXTS = ["東京 😀 été", "👨\u200d👩\u200d👧 ok", "ψυχή\tκαλημέρα\r\n", "tea 🇳🇱 for two"]


@pytest.fixture(scope="module")
def bpe():
    return BPETokenizer.fit(["tea for two, and two for tea"] * 20, vocab_size=280)


@pytest.mark.parametrize("text", TEXTS)
def test_byte_level_pieces_show_their_characters_not_the_replacement_one(bpe, text):
    ids = bpe.encode(text)
    alone = [bpe.decode([i]) for i in ids]
    assert "\ufffd" in alone  # (what the maps showed: the text has characters split in bytes)
    labels = bpe.labels(ids)
    assert "\ufffd" not in "".join(labels)
    assert labels == bpe.tokenize(text)
    # each label is a run of the text's characters, in order
    at = 0
    for label in labels:
        found = text.find(label, max(at - len(label), 0))
        assert found >= 0, label
        at = found + len(label)


def test_labels_of_ids_that_spell_no_character_show_their_bytes(bpe):
    # generated ids may be bytes that are no UTF-8: each shows its escape, as Hugging Face
    # writes a byte token (decode's U+FFFD said nothing of which bytes)
    lone = [bpe.tokenizer.token_to_id(c) for c in ("ð", "Ł")]  # 0xF0 0x9F: a cut-off emoji
    assert bpe.labels([*bpe.encode("t"), *lone]) == ["t", "<0xF0>", "<0x9F>"]
    assert bpe.labels([1, *bpe.encode("t"), 2], skip_special_tokens=False) == ["<sos>", "t", "<eos>"]


def test_other_tokenizers_label_each_id_by_its_decoding():
    tok = CharTokenizer.fit(["abc"])
    ids = tok.encode("abz")
    assert tok.labels(ids) == ["a", "b", "\ufffd"] == [tok.decode([i]) for i in ids]


@pytest.mark.slow
def test_the_attention_page_of_a_bpe_lm_labels_split_characters_by_them(tmp_path):
    text = " ".join(["tea for two 東京 😀 été"] * 200)
    (tmp_path / "t.txt").write_text(text, encoding="utf-8")
    prepare([tmp_path / "t.txt"], tmp_path / "data", tokenizer="bpe", vocab_size=270)
    assert main(["train", "lm", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "run"),
                 "--max-steps", "2", "--model-dim", "16", "--num-heads", "2", "--num-layers",
                 "1", "--dim-feedforward", "32", "--block-size", "32", "--batch-size", "4",
                 "--val-batches", "1", "--threads", "1"]) == 0
    page = tmp_path / "a.html"
    given = "two 東京 😀"
    assert main(["view", str(tmp_path / "run"), "--input", given, "--out", str(page)]) == 0
    found = re.search(r'<script type="application/json" id="attnlab-attention">(.*?)</script>',
                      page.read_text(encoding="utf-8"), re.S)
    tokens = json.loads(found.group(1))["key_tokens"]
    tok = BPETokenizer.load(tmp_path / "run" / "tokenizer.json")
    assert tokens == tok.tokenize(given) and "\ufffd" not in "".join(tokens)


@pytest.mark.parametrize("text", TEXTS)
def test_a_byte_level_checkpoints_pieces_show_their_characters(bpe, text):
    """A checkpoint's byte-level tokenizer (GPT-2's, Qwen's, Llama 3's: a ByteLevel decoder)
    still labelled a piece holding part of a character "�" in plot attention and view."""
    from attnlab.interop.hf_tokenizer import HFTokenizer

    eos = bpe.tokenizer.token_to_id("<eos>")
    tok = HFTokenizer(bpe.tokenizer, {"eos": eos})
    ids = tok.encode(text)
    assert "\ufffd" in "".join(tok.decode([i]) for i in ids)  # (the labels before)
    assert tok.labels(ids) == bpe.labels(ids)
    assert "\ufffd" not in "".join(tok.labels(ids))
    assert tok.labels([*ids, eos], skip_special_tokens=False)[-1] == "<eos>"


def test_a_translation_cut_at_max_len_inside_a_character_labels_it_whole(bpe):
    """The cross-attention map of a translation longer than the run's max_len labelled the
    last tokens "�" when the cut fell inside a character's bytes: the cut ids were labelled
    alone. Now the whole decoder input is labelled, then cut."""
    from attnlab.tasks.translate.data import TranslationTokenizers
    from attnlab.tasks.translate.runtime import _pair

    pair = TranslationTokenizers(bpe, bpe)
    translation = "tea for two 😀"
    whole = pair.decoder_input(translation)
    max_len = len(whole) - 2  # inside the emoji's four bytes
    # (what the map showed: the cut ids labelled alone, two bytes that make no character)
    assert bpe.labels(whole[:max_len])[-3:] == [" ", "<0xF0>", "<0x9F>"]
    _, tgt, _, labels = _pair(pair, "two for tea", translation, max_len=max_len)
    assert tgt.shape == (1, max_len) and len(labels) == max_len
    assert labels[-2:] == ["😀", "😀"]
