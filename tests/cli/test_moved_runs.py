"""A run directory renamed, moved or copied elsewhere, and commands run from another working
directory: what the run reads of its own is read where the run is now, never at a path
config.yaml recorded when it started (which may be gone, or hold another run's files)."""
import json
import shutil

import pytest

from attnlab.cli import main
from attnlab.runs import read_yaml

TINY = ["--model-dim", "16", "--num-heads", "2", "--num-layers", "1", "--batch-size", "4",
        "--block-size", "16", "--threads", "1"]
WORDS = "the cat sat on a mat and dog ran far away while bird sang".split()


def _text(path):
    path.write_text("\n".join(" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(12))
                              for i in range(300)))
    return path


def _rows(path):
    with open(path, "w") as f:
        for i in range(40):
            f.write(json.dumps({"prompt": " ".join(WORDS[i % 5:i % 5 + 3]),
                                "response": " ".join(WORDS[i % 7:i % 7 + 3])}) + "\n")
    return path


@pytest.mark.slow
def test_a_renamed_instruction_run_resumes_with_the_tokenizer_in_its_own_directory(
        tmp_path, capsys, monkeypatch):
    """Its tokenizer is RUN/data/tokenizer.json: a renamed run read it at the old name, and
    resuming it was refused as if its --data were gone."""
    base, run = tmp_path / "base", tmp_path / "chat run"
    assert main(["train", "lm", "--data", str(_text(tmp_path / "text.txt")), "--out", str(base),
                 "--max-steps", "2", *TINY]) == 0
    assert main(["train", "lm", "--init", str(base), "--data", str(_rows(tmp_path / "rows.jsonl")),
                 "--out", str(run), "--max-steps", "2", "--batch-size", "4",
                 "--threads", "1"]) == 0
    renamed = tmp_path / "chat run, renamed"
    run.rename(renamed)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert main(["train", "lm", "--out", str(renamed), "--resume", "--max-steps", "4"]) == 0, \
        capsys.readouterr().err
    assert read_yaml(renamed / "config.yaml")["data_dir"] == str(renamed / "data")
    assert not run.exists()


@pytest.mark.slow
@pytest.mark.parametrize("recorded", ["absolute", "relative, as earlier runs recorded it"])
def test_a_run_on_a_corpus_given_by_a_relative_path_resumes_from_another_directory(
        tmp_path, capsys, monkeypatch, recorded):
    """``--data corpus`` was recorded as typed: resumed from another directory, the run read
    that directory's ``corpus`` (another one: refused as changed) or none (refused as not
    found), where config.yaml's data_dir named the corpus the run started on."""
    cluster, laptop = tmp_path / "cluster", tmp_path / "laptop"
    for where, lines in ((cluster, 300), (laptop, 100)):
        where.mkdir()
        monkeypatch.chdir(where)
        _text(where / "text.txt")
        (where / "text.txt").write_text("\n".join((where / "text.txt").read_text()
                                                  .splitlines()[:lines]))
        assert main(["prepare", "text.txt", "--out", "corpus", "--tokenizer", "char"]) == 0
    monkeypatch.chdir(cluster)
    assert main(["train", "lm", "--data", "corpus", "--out", "run", "--max-steps", "2",
                 *TINY]) == 0
    config = cluster / "run" / "config.yaml"
    if recorded != "absolute":
        config.write_text(config.read_text().replace(f"data: {cluster / 'corpus'}\n",
                                                     "data: corpus\n"))
        assert read_yaml(config)["data"] == "corpus"
    else:
        assert read_yaml(config)["data"] == str(cluster / "corpus")
    monkeypatch.chdir(laptop)  # its own corpus/, another text's
    capsys.readouterr()
    assert main(["train", "lm", "--out", str(cluster / "run"), "--resume", "--max-steps",
                 "4"]) == 0, capsys.readouterr().err
    assert read_yaml(config)["data"] == str(cluster / "corpus")
    assert read_yaml(config)["data_dir"] == str(cluster / "corpus")


@pytest.mark.slow
def test_a_moved_corpus_is_given_to_resume_at_its_new_path_and_checked_by_its_bytes(
        tmp_path, capsys, monkeypatch):
    """As a moved data file is (docs/cli.md, Resume): the corpus's meta.json and tokenizer.json
    are the ones config.yaml's corpus_sha256 holds. It was refused as another --data than the
    run's, so a run whose corpus moved could not be resumed at all."""
    monkeypatch.chdir(tmp_path)
    _text(tmp_path / "text.txt")
    (tmp_path / "other.txt").write_text("a b c d e f g h i j k l m n o p\n" * 40)
    for text, corpus in (("text.txt", "corpus"), ("other.txt", "another")):
        assert main(["prepare", text, "--out", corpus, "--tokenizer", "char"]) == 0
    run = tmp_path / "run"
    assert main(["train", "lm", "--data", "corpus", "--out", str(run), "--max-steps", "2",
                 *TINY]) == 0
    (tmp_path / "corpus").rename(tmp_path / "moved corpus")
    capsys.readouterr()
    # without --data: the corpus named as the one gone, and where to give it
    assert main(["train", "lm", "--out", str(run), "--resume", "--max-steps", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"attnlab: error: --data {tmp_path / 'corpus'} (the corpus this run started "
                   f"on) is gone; give --data where it is now, put the corpus back or start a "
                   f"new run"), err
    # the text it was prepared from is not a corpus
    assert main(["train", "lm", "--out", str(run), "--resume", "--max-steps", "4", "--data",
                 "text.txt"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnlab: error: --data text.txt is not a prepared corpus (a "
                          "directory made by `attnlab prepare`); the run started on "
                          f"{tmp_path / 'corpus'}"), err
    # its meta.json and tokenizer.json with a token file changed in place: two bytes swapped
    shutil.copytree(tmp_path / "moved corpus", tmp_path / "swapped")
    tokens = bytearray((tmp_path / "swapped" / "train.bin").read_bytes())
    i = next(i for i in range(len(tokens) - 1) if tokens[i] != tokens[i + 1])
    tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]
    (tmp_path / "swapped" / "train.bin").write_bytes(bytes(tokens))
    assert main(["train", "lm", "--out", str(run), "--resume", "--max-steps", "4", "--data",
                 "swapped"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnlab: error: --data swapped holds the run's meta.json and "
                          "tokenizer.json, but its train.bin is not what meta.json's SHA-256 "
                          "says `attnlab prepare` wrote"), err
    assert read_yaml(run / "config.yaml")["data_dir"] == str(tmp_path / "corpus")
    assert main(["train", "lm", "--out", str(run), "--resume", "--max-steps", "4", "--data",
                 "another"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnlab: error: --data another is not the corpus this run started "
                          f"on: its bytes differ; the run started on {tmp_path / 'corpus'}"), err
    assert len(err.splitlines()) == 1
    assert main(["train", "lm", "--out", str(run), "--resume", "--max-steps", "4", "--data",
                 "moved corpus"]) == 0, capsys.readouterr().err
    assert read_yaml(run / "config.yaml")["data_dir"] == str(tmp_path / "moved corpus")
    assert read_yaml(run / "config.yaml")["data"] == str(tmp_path / "moved corpus")
