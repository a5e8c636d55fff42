"""``attnlab prepare`` of a .csv, .tsv or .jsonl table: it was read whole as text, so the header,
the commas and the label column became the language model's corpus without a word."""
import pytest

from attnlab.cli import main

ROWS = {".csv": "text,label\nthe film was great,pos\nthe plot was dull,neg\n",
        ".tsv": "text\tlabel\nthe film was great\tpos\nthe plot was dull\tneg\n",
        ".tab": "text\tlabel\nthe film was great\tpos\nthe plot was dull\tneg\n",
        ".jsonl": '{"text": "the film was great", "label": "pos"}\n'
                  '{"text": "the plot was dull", "label": "neg"}\n'}


@pytest.mark.parametrize("suffix", sorted(ROWS))
def test_a_table_is_refused_naming_the_file_before_anything_is_written(tmp_path, capsys,
                                                                          suffix):
    table = tmp_path / f"reviews{suffix}"
    table.write_text(ROWS[suffix])
    out = tmp_path / "corpus"
    assert main(["prepare", str(table), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"{table} is a table ({suffix})" in err and "rename it .txt" in err
    assert not out.exists()
    # --text-column does not make it read: the table is named, not "drop the flag"
    assert main(["prepare", str(table), "--out", str(out), "--text-column", "text"]) == 2
    assert f"{table} is a table ({suffix})" in capsys.readouterr().err


def test_the_same_bytes_named_txt_are_read_whole_as_asked(tmp_path, capsys):
    text = tmp_path / "reviews.txt"
    text.write_text(ROWS[".csv"] * 20)
    assert main(["prepare", str(text), "--out", str(tmp_path / "corpus")]) == 0
    assert "prepared" in capsys.readouterr().out
