"""``attnlab train tag`` on a practitioner's own files: what a file that cannot train a tagger
gets (exit 2, one line naming the file, no run directory), rather than a run whose numbers
mean nothing."""
import json

import pytest

from attnlab.cli import main
from attnlab.tasks.tag.data import read_sentences
from attnlab.tasks.tag.scoring import entities
from tests.tasks.test_tag import TINY, capitalised, write_conll


def _refused(args, out, capsys) -> str:
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert not out.exists()
    return err[0]


@pytest.mark.slow  # the CLI, in process
def test_a_file_without_any_entity_is_refused_naming_the_file_and_the_field(tmp_path, capsys):
    # every tag O: the run would train a model that always says O, and report test_accuracy
    # 1.0 beside an F1 of 0 and an empty per-type table
    sentences = [(words, ["O"] * len(words)) for words, _ in capitalised(30)]
    conll = write_conll(tmp_path / "flat.conll", sentences)
    err = _refused(["train", "tag", "--data", str(conll)], tmp_path / "run", capsys)
    assert f"--data {conll}: every tag is 'O'" in err and "--tag-column" in err
    rows = tmp_path / "flat.jsonl"
    rows.write_text("".join(json.dumps({"tokens": w, "tags": t}) + "\n" for w, t in sentences))
    err = _refused(["train", "tag", "--data", str(rows)], tmp_path / "run", capsys)
    assert f"--data {rows}: every tag is 'O'" in err and "--tags-column" in err


@pytest.mark.slow
def test_a_comma_separated_file_is_told_how_a_conll_line_is_split(tmp_path, capsys):
    # the message said "its tag in field 0 (--tag-column)", and --tag-column 0 is refused
    rows = tmp_path / "words.csv"
    rows.write_text("John,B-PER\nlives,O\n")
    err = _refused(["train", "tag", "--data", str(rows)], tmp_path / "run", capsys)
    assert f"--data {rows} line 1: 1 field ('John,B-PER')" in err
    assert "separated by white space (not by commas" in err and "field 0" not in err


@pytest.mark.slow
def test_a_tag_column_past_the_fields_names_the_flag_and_the_count(tmp_path, capsys):
    conll = tmp_path / "pos.conll"
    conll.write_text("John NNP B-PER\nlives VBZ O\n")
    err = _refused(["train", "tag", "--data", str(conll), "--tag-column", "3"],
                   tmp_path / "run", capsys)
    assert f"--data {conll} line 1: 3 fields, so no field 3 (--tag-column 3" in err


@pytest.mark.slow
@pytest.mark.parametrize("name, text, why", [
    ("none.conll", " \n\n", "no sentence (the file is empty)"),
    ("docs.conll", "-DOCSTART- -X- O\n\n-DOCSTART- -X- O\n", "only lines are -DOCSTART- lines"),
    ("rows.jsonl", '{"tokens": [], "tags": []}\n' * 3, "no row holds a word")])
def test_a_file_without_a_sentence_says_why(name, text, why, tmp_path, capsys):
    # rows of empty lists were refused as "the file is empty", which they are not
    (tmp_path / name).write_text(text)
    err = _refused(["train", "tag", "--data", str(tmp_path / name)], tmp_path / "run", capsys)
    assert f"--data {tmp_path / name}: no sentence (" in err and why in err


@pytest.mark.slow
@pytest.mark.parametrize("text", ["John\tB-PER\nNew York\tB-LOC\n",
                                  "New York\tB-LOC\nJohn\tB-PER\n"])
def test_a_tab_separated_word_holding_a_space_is_named(text, tmp_path, capsys):
    # the file has two tab-separated cells on every line; "3 fields where the file's first
    # line has 2" alone does not say which word makes the third
    tsv = tmp_path / "cities.tsv"
    tsv.write_text(text)
    err = _refused(["train", "tag", "--data", str(tsv)], tmp_path / "run", capsys)
    assert f"--data {tsv} line 2: " in err
    assert "so 'New York' is 2 fields; a word that holds a space can be given in JSON Lines" in err


def test_an_iob1_file_is_read_and_its_first_i_tag_starts_an_entity(tmp_path):
    # docs/tagging.md: an I-TYPE after O or another type is accepted and starts an entity
    iob1 = tmp_path / "iob1.conll"
    iob1.write_text("John I-PER\nSmith I-PER\nin O\nRome I-LOC\nParis B-LOC\n")
    found = read_sentences(iob1)
    assert found.tags == [["I-PER", "I-PER", "O", "I-LOC", "B-LOC"]]
    assert entities(found.tags) == [("PER", 0, 1), ("LOC", 3, 3), ("LOC", 4, 4)]


@pytest.mark.slow
def test_a_word_without_its_tag_is_named_so(tmp_path, capsys):
    conll = tmp_path / "untagged.conll"
    conll.write_text("John B-PER\nlives\n")  # was "1 fields where the file's first line has 2"
    err = _refused(["train", "tag", "--data", str(conll)], tmp_path / "run", capsys)
    assert err.endswith(f"--data {conll} line 2: 1 field (a word without its tag) where the "
                        f"file's first line has 2")


@pytest.mark.slow  # trains a run
def test_a_run_made_before_all_o_files_were_refused_says_so(tmp_path, capsys, monkeypatch):
    # the run as the code before the refusal wrote it: trained on a file without an entity
    sentences = [(words, ["O"] * len(words)) for words, _ in capitalised(30)]
    conll = write_conll(tmp_path / "flat.conll", sentences)
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        m.setattr("attnlab.tasks.tag.spec.check_entities", lambda *a, **k: None)
        assert main(["train", "tag", "--data", str(conll), "--out", str(out), "--max-steps",
                     "2", "--checkpoint-every", "1", *TINY[2:]]) == 0
    capsys.readouterr()
    # resumed: refused in one line that says to start anew (--tag-column would be refused)
    assert main(["train", "tag", "--out", str(out), "--resume", "--max-steps", "4"]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith(f"attnlab: error: --resume: --data {conll}: every tag is 'O'"), err
    assert "start a new run with another --out, with --tag-column N" in err
    said = (f"warning: {out} has no tag but 'O' (its --data {conll} had no entity, which train "
            f"tag now refuses), so it tags every word O")
    assert main(["predict", str(out), "--input", "John lives in Paris"]) == 0
    assert said in capsys.readouterr().err.splitlines()
    assert main(["evaluate", str(out)]) == 0
    assert said in capsys.readouterr().err.splitlines()
