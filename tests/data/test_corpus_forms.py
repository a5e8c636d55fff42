"""A corpus written in NFD (macOS, some editors) is read in NFC by every tokenizer prepare
fits: decoding it gives other code points than the file holds, which was said nowhere."""
import unicodedata

import numpy as np
import pytest

from attnlab.data.corpus import SPLITS, prepare
from attnlab.tokenizers import load_tokenizer

TEXT = "café crème, naïve zoë über straße; ψυχή ἀρχή.\n" * 40


@pytest.mark.parametrize("kind", ["char", "word", "bpe"])
def test_a_corpus_not_in_nfc_is_said_once_and_decodes_to_nfc(tmp_path, capsys, kind):
    nfd = unicodedata.normalize("NFD", TEXT)
    (tmp_path / "plain.txt").write_text("plain ascii text here\n" * 40, encoding="utf-8")
    (tmp_path / "mac.txt").write_text(nfd, encoding="utf-8")
    files = [tmp_path / "plain.txt", tmp_path / "mac.txt"]
    prepare(files, tmp_path / "c", tokenizer=kind, **({"vocab_size": 300} if kind == "bpe" else {}))
    notes = [line for line in capsys.readouterr().err.splitlines() if "NFC" in line]
    assert notes == [f"note: {files[1]} holds text not in NFC (a letter and its accent as two "
                     f"code points, as macOS and some editors write them): the {kind} tokenizer "
                     f"reads it in NFC, the same text to Unicode, so the corpus decodes to that "
                     f"form, not to the file's own code points"]
    tok = load_tokenizer(tmp_path / "c" / "tokenizer.json")
    ids = np.concatenate([np.fromfile(tmp_path / "c" / f"{s}.bin", dtype=np.uint16) for s in SPLITS])
    decoded = tok.decode(ids.tolist()).split("plain ascii text here\n" * 40)[1]
    assert decoded == unicodedata.normalize("NFC", nfd) != nfd


def test_a_corpus_in_nfc_gets_no_note(tmp_path, capsys):
    (tmp_path / "t.txt").write_text(TEXT, encoding="utf-8")
    prepare([tmp_path / "t.txt"], tmp_path / "c", tokenizer="char")
    assert capsys.readouterr().err == ""


def test_the_split_never_falls_between_a_letter_and_its_accent(tmp_path):
    """With --tokenizer char on NFD text, a split point between "e" and its combining accent
    turned both into unk: the corpus decoded to 'xxxx��yyyy' where the file held 'é'."""
    text = "x" * 89 + "e\u0301" + "y" * 9  # character 90 of 100, the split, is the accent
    (tmp_path / "c.txt").write_text(text, encoding="utf-8")
    meta = prepare([tmp_path / "c.txt"], tmp_path / "c", tokenizer="char", val_fraction=0.1)
    tok = load_tokenizer(tmp_path / "c" / "tokenizer.json")
    decoded = [tok.decode(np.fromfile(tmp_path / "c" / f"{s}.bin", dtype=meta["dtype"]).tolist())
               for s in SPLITS]
    assert "".join(decoded) == unicodedata.normalize("NFC", text), decoded
    assert decoded[1].startswith("é")
