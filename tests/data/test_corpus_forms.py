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
