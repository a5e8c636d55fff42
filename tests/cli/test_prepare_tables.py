"""``attnlab prepare`` of a .csv, .tsv or .jsonl table: it was read whole as text, so the header,
the commas and the label column became the language model's corpus without a word; then it was
refused. Now its --text-column is read, row by row, as a Parquet file's is."""
import numpy as np
import pytest

from attnlab.cli import main
from attnlab.tokenizers import load_tokenizer

ROWS = {".csv": "text,label\nthe film was great,pos\nthe plot was dull,neg\n",
        ".tsv": "text\tlabel\nthe film was great\tpos\nthe plot was dull\tneg\n",
        ".tab": "text\tlabel\nthe film was great\tpos\nthe plot was dull\tneg\n",
        ".jsonl": '{"text": "the film was great", "label": "pos"}\n'
                  '{"text": "the plot was dull", "label": "neg"}\n'}


def _corpus_text(out) -> str:
    tok = load_tokenizer(out / "tokenizer.json")
    ids = np.concatenate([np.fromfile(out / f"{s}.bin", dtype=np.uint16) for s in ("train", "val")])
    return tok.decode([int(i) for i in ids if i != tok.eos_id])


@pytest.mark.parametrize("suffix", sorted(ROWS))
def test_a_table_gives_the_texts_of_its_text_column_only(tmp_path, capsys, suffix):
    table = tmp_path / f"reviews{suffix}"
    header, rows = ROWS[suffix].split("\n", 1) if suffix != ".jsonl" else ("", ROWS[suffix])
    table.write_text(header + "\n" * bool(header) + rows * 5)
    out = tmp_path / "corpus"
    assert main(["prepare", str(table), "--out", str(out)]) == 0  # --text-column text
    assert "prepared" in capsys.readouterr().out
    assert _corpus_text(out) == "the film was greatthe plot was dull" * 5
    # another column, named
    assert main(["prepare", str(table), "--out", str(tmp_path / "labels"), "--text-column",
                 "label", "--val-fraction", "0.5"]) == 0
    assert _corpus_text(tmp_path / "labels") == "posneg" * 5


def test_the_same_bytes_named_txt_are_read_whole_as_asked(tmp_path, capsys):
    text = tmp_path / "reviews.txt"
    text.write_text(ROWS[".csv"] * 20)
    assert main(["prepare", str(text), "--out", str(tmp_path / "corpus")]) == 0
    assert "prepared" in capsys.readouterr().out
    assert _corpus_text(tmp_path / "corpus") == ROWS[".csv"] * 20
