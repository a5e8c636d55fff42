"""A text corpus tokenised by a checkpoint's own tokenizer (``attnlab prepare FILE --tokenizer
DIR``, ``attnlab train lm --init DIR --data FILE``) whose text holds an added token's text: a
scraped page that quotes ``<|endoftext|>``, a chat log with ``<|im_end|>``. The tokenizer reads
it as that token, as transformers does (an eos then ends a document in mid-line); one note
names the first place by file and line, and how many there are."""
import json

import pytest

from attnlab.cli import main

from ..interop.test_instruct_lm import save_chat_model

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    return save_chat_model(tmp_path_factory.mktemp("corpus") / "qwen")  # eos <|endoftext|>


def _eos_note(where: str, places: str) -> str:
    return (f"note: {where} holds the text of an added token (<|endoftext|>, the eos token: it "
            f"ends a document there), which the checkpoint's tokenizer reads as that token, as "
            f"transformers does, not as text ({places} in the corpus); write it otherwise "
            f"where it is meant as text")


@pytest.mark.slow
def test_an_added_tokens_text_in_a_corpus_is_said_once_naming_the_file_and_line(
        qwen, tmp_path, capsys):
    import numpy as np

    lines = [f"reverse: abc dog moon {i}" for i in range(200)]
    lines[120] = "a page that quotes <|endoftext|> in mid-line"
    lines[150] = "and <|endoftext|> again, then <|im_end|>"
    text = tmp_path / "text.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["prepare", str(text), "--tokenizer", str(qwen), "--out",
                 str(tmp_path / "corpus")]) == 0
    notes = [n for n in capsys.readouterr().err.splitlines() if "added token" in n]
    assert notes == [_eos_note(f"{text} line 121", "3 places")]
    meta = json.loads((tmp_path / "corpus" / "meta.json").read_text())
    ids = np.fromfile(tmp_path / "corpus" / "train.bin", dtype=meta["dtype"])
    assert int((ids == 0).sum()) == 2  # what the note says: eos (id 0) inside the one file


@pytest.mark.slow
def test_a_table_names_the_row_and_a_corpus_without_one_says_nothing(qwen, tmp_path, capsys):
    rows = [{"text": f"row {i} is text"} for i in range(60)]
    rows[41]["text"] = "a reply ends <|im_end|> here"
    table = tmp_path / "t.jsonl"
    table.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    clean = tmp_path / "clean.txt"
    clean.write_text("plain text with </s> and <eos>, no added token of this one\n" * 40)
    capsys.readouterr()
    for path, out in ((table, "t"), (clean, "c")):
        assert main(["prepare", str(path), "--tokenizer", str(qwen), "--out",
                     str(tmp_path / out)]) == 0
    notes = [n for n in capsys.readouterr().err.splitlines() if "added token" in n]
    assert notes == [
        f"note: {table} line 42 holds the text of an added token (<|im_end|>), which the "
        f"checkpoint's tokenizer reads as that token, as transformers does, not as text (1 "
        f"place in the corpus); write it otherwise where it is meant as text"]


@pytest.mark.slow
def test_an_added_tokens_text_cut_in_two_between_pieces_is_said(qwen, tmp_path, capsys):
    """Text without white space (minified JSON, a long run of CJK text) is cut into pieces
    anywhere; the tokenizer reads across the cut, and so does the note."""
    import numpy as np
    from transformers import AutoTokenizer

    from attnlab.data.corpus import prepare
    from attnlab.interop.hf_tokenizer import HFTokenizer

    text = tmp_path / "min.json"  # (a .json file is read as text: not a table's suffix)
    text.write_text("ab\ncd\n" + "x" * 30 + "<|endoftext|>" + "y" * 50, encoding="utf-8")
    capsys.readouterr()
    meta = prepare([text], tmp_path / "corpus", tokenizer=HFTokenizer.from_transformers(
                       AutoTokenizer.from_pretrained(qwen)),
                   chunk_chars=16)
    notes = [n for n in capsys.readouterr().err.splitlines() if "added token" in n]
    assert notes == [_eos_note(f"{text} line 3", "1 place")]
    ids = np.concatenate([np.fromfile(tmp_path / "corpus" / f"{s}.bin", dtype=meta["dtype"])
                          for s in ("train", "val")])
    assert int((ids == 0).sum()) == 1  # the eos the note names (id 0), read across the cut


@pytest.mark.slow
def test_an_ordinary_added_tokens_text_is_not_noted_a_special_ones_is(qwen, tmp_path, capsys):
    """Gemma's tokenizer adds HTML tags (``<td>``) as ordinary added tokens, meant to be read
    as such: an HTML corpus gets no note for them; a special token's text is still noted."""
    from transformers import AutoTokenizer

    from attnlab.data.corpus import prepare
    from attnlab.interop.hf_tokenizer import HFTokenizer

    theirs = AutoTokenizer.from_pretrained(qwen)
    theirs.add_tokens(["<td>"])  # ordinary (special=False)
    theirs.add_special_tokens({"additional_special_tokens": ["<|cell|>"]})
    tok = HFTokenizer.from_transformers(theirs)
    page = tmp_path / "page.html"
    page.write_text("<table><tr><td>a cell</td></tr></table>\n" * 20, encoding="utf-8")
    capsys.readouterr()
    prepare([page], tmp_path / "html", tokenizer=tok)
    assert "added token" not in capsys.readouterr().err
    page.write_text(page.read_text() + "a <|cell|> mark\n", encoding="utf-8")
    prepare([page], tmp_path / "marked", tokenizer=tok)
    notes = [n for n in capsys.readouterr().err.splitlines() if "added token" in n]
    assert len(notes) == 1 and notes[0].startswith(
        f"note: {page} line 21 holds the text of an added token (<|cell|>), ")
