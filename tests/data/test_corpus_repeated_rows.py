"""A table whose rows repeat (a scraped corpus) put rows the model trains on into the
validation split, and its val_loss was partly of trained text without a word; now prepare
warns, counting the validation split's rows that the training split holds word for word."""
import csv
import json
import random

import pytest

from attnlab.data.corpus import prepare


def rows(n: int = 300) -> list[str]:
    rng = random.Random(2)
    return [" ".join(rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(20)) + f" {i}"
            for i in range(n)]


def write(path, texts):
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    else:
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["text"])
            w.writerows([t] for t in texts)
    return path


@pytest.mark.parametrize("name, first_line", [("c.jsonl", 301), ("c.csv", 302)])
def test_rows_of_the_validation_split_that_training_holds_are_warned_of(tmp_path, capsys, name,
                                                                        first_line):
    texts = rows()
    again = texts[:30]  # the last 30 rows repeat the first 30: about the validation split
    corpus = write(tmp_path / name, texts + again)
    meta = prepare([corpus], tmp_path / "c", tokenizer="char", val_fraction=0.1)
    err = capsys.readouterr().err
    # the rows that start in the validation split, counted by hand from the characters
    split_at = int(meta["characters"] * 0.9)
    starts, at = [], 0
    for t in texts + again:
        starts.append(at)
        at += len(t)
    val = [i for i, s in enumerate(starts) if s >= split_at]
    shared = [i for i in val if i >= len(texts)]
    assert shared and len(val) < 40
    assert err == (f"warning: the validation split (val_loss): {len(shared)} of its {len(val)} "
                   f"rows have an input that a training row has too (first: {corpus} line "
                   f"{first_line + shared[0] - len(texts)}), so its scores are partly of inputs "
                   f"the model trained on\n")


def test_a_table_of_distinct_rows_gets_no_warning(tmp_path, capsys):
    corpus = write(tmp_path / "c.jsonl", rows())
    prepare([corpus], tmp_path / "c", tokenizer="char")
    assert capsys.readouterr().err == ""


def test_a_repeated_row_in_another_unicode_form_is_warned_of(tmp_path, capsys):
    """A row repeated in NFD (macOS's decomposed accents) is the same row to the tokenizer,
    which reads both in NFC, but it was missed: its bytes differ."""
    import unicodedata

    texts = [t + " café" for t in rows()]
    again = [unicodedata.normalize("NFD", t) for t in texts[:30]]
    corpus = write(tmp_path / "c.jsonl", texts + again)
    prepare([corpus], tmp_path / "c", tokenizer="char", val_fraction=0.1)
    err = capsys.readouterr().err
    assert "warning: the validation split (val_loss): " in err, err


def test_the_digests_of_training_rows_take_8_bytes_a_row():
    """The module promises memory that does not grow with the corpus; the digests of training
    rows grow by what a row's digest needs, 8 bytes (a set of bytes objects took ~75: 75 MB a
    million rows)."""
    import tracemalloc

    from attnlab.data.corpus import RepeatedRows

    repeated = RepeatedRows(["c.jsonl"])
    n = 50_000
    tracemalloc.start()
    for row in range(n):
        repeated.add((0, row), "train", f"row {row}")
    held = tracemalloc.get_traced_memory()[0]
    repeated.add((0, n), "val", "row 7")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert held < 12 * n and peak < 12 * n, (held, peak)
    assert repeated.warning().startswith("warning: the validation split (val_loss): 1 of its 1 ")


def test_a_text_file_that_repeats_a_row_is_named_as_a_whole_file(tmp_path, capsys):
    """A text file among tables is one document: it was named "b.txt line 0"."""
    texts = rows()
    corpus = write(tmp_path / "a.jsonl", texts)
    whole = tmp_path / "b.txt"
    whole.write_text(texts[5], encoding="utf-8")
    prepare([corpus, whole], tmp_path / "c", tokenizer="char", val_fraction=0.01)
    err = capsys.readouterr().err
    assert f"(first: {whole} (the whole file))" in err and "line 0" not in err, err
