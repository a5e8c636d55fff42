"""Trust: no silent wrong result from the data readers.

Each refusal is what a user sees: exit status 2, one line on stderr naming the flag, file,
column or line, no traceback, and files' checksums before and after showing nothing of theirs
was lost or overwritten.
"""
import hashlib
import json
import os
from pathlib import Path

import pytest
import yaml

from attnlab.cli import main

from .conftest import tiny_args, write_corpus, write_reviews


def checksums(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def refused(capsys, argv, *fragments, banner: bool = False) -> str:
    """Run the command; assert exit 2 and one line holding every fragment; return the line.
    ``banner``: a resumed run prints "attnlab train TASK -> DIR" before its task checks the
    data (lm's check runs when the task starts), so one line may precede the error."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip()
    assert code == 2, (argv, err)
    lines = err.splitlines()
    if banner and len(lines) == 2 and lines[0].startswith("attnlab train "):
        err = lines[1]
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("attnlab: error: "), err
    for fragment in fragments:
        assert str(fragment) in err, (fragment, err)
    return err


def other_text(path: Path) -> Path:
    path.write_text("zyxwvutsrq ponmlk jihgfe dcba; all different characters now!\n" * 60)
    return path


# ---- 1. prepare never replaces a corpus silently; lm runs know their corpus ---------------------

def test_prepare_refuses_an_existing_corpus_and_force_replaces_only_a_corpus(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    assert main(["prepare", str(write_corpus(tmp_path / "a.txt")), "--out", str(corpus)]) == 0
    before = checksums(corpus)
    other = other_text(tmp_path / "other.txt")

    refused(capsys, ["prepare", other, "--out", corpus], str(corpus), "--force")
    assert checksums(corpus) == before  # the same ids still mean the same characters

    assert main(["prepare", str(other), "--out", str(corpus), "--force"]) == 0
    assert checksums(corpus) != before
    meta = json.loads((corpus / "meta.json").read_text())
    assert meta["files"] == [str(other)]
    assert meta["sha256"]["train.bin"] == hashlib.sha256((corpus / "train.bin").read_bytes()).hexdigest()

    # --force never deletes what prepare did not write
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    (mine / "train.bin").write_bytes(b"\x01\x02")  # e.g. nanoGPT's, without meta.json
    kept = checksums(mine)
    refused(capsys, ["prepare", other, "--out", mine, "--force"], "notes.txt", str(mine))
    (mine / "notes.txt").unlink()
    kept.pop("notes.txt")
    refused(capsys, ["prepare", other, "--out", mine, "--force"], "no meta.json", str(mine))
    assert checksums(mine) == kept
    # nor an input file that lives in the directory it would replace
    inside = corpus / "meta.json"
    before = checksums(corpus)
    refused(capsys, ["prepare", inside, "--out", corpus, "--force"], "input file", str(corpus))
    assert checksums(corpus) == before


def test_prepare_leaves_the_old_corpus_whole_when_the_new_one_fails(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    assert main(["prepare", str(write_corpus(tmp_path / "a.txt")), "--out", str(corpus)]) == 0
    before = checksums(corpus)
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("ab")
    refused(capsys, ["prepare", tiny, "--out", corpus, "--force"], "too small")
    assert checksums(corpus) == before and sorted(os.listdir(corpus)) == sorted(before)


def test_prepare_refuses_a_text_file_that_changes_while_it_is_read(tmp_path, capsys, monkeypatch):
    from attnlab.data import corpus as corpus_module

    text = write_corpus(tmp_path / "a.txt")
    fit = corpus_module._fit_tokenizer

    def fit_then_append(*args, **kwargs):  # the file grows between the two passes
        tok = fit(*args, **kwargs)
        with open(text, "a") as f:
            f.write("more text arriving\n")
        return tok

    monkeypatch.setattr(corpus_module, "_fit_tokenizer", fit_then_append)
    refused(capsys, ["prepare", text, "--out", tmp_path / "c"], str(text), "changed while")
    assert not (tmp_path / "c").exists()


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trust_lm")
    corpus = tmp / "corpus"
    assert main(["prepare", str(write_corpus(tmp / "a.txt")), "--out", str(corpus)]) == 0
    run = tmp / "run"
    assert main(["train", "lm", "--out", str(run), "--max-steps", "3", "--checkpoint-every", "3",
                 *tiny_args("lm", {"lm": corpus})]) == 0
    return tmp, corpus, run


@pytest.mark.slow
def test_lm_evaluate_and_resume_refuse_a_replaced_corpus(lm_run, tmp_path, capsys):
    import shutil

    tmp, corpus, run = lm_run
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert set(cfg["corpus_sha256"]) == {"meta.json", "tokenizer.json"}
    # work on copies: the module's run stays intact for the other tests
    corpus2, run2 = tmp_path / "corpus", tmp_path / "run"
    shutil.copytree(corpus, corpus2)
    shutil.copytree(run, run2)
    (run2 / "config.yaml").write_text(yaml.safe_dump({**cfg, "data": str(corpus2),
                                                      "data_dir": str(corpus2.resolve())}))
    assert main(["evaluate", str(run2)]) == 0  # the same corpus: fine
    capsys.readouterr()

    assert main(["prepare", str(other_text(tmp_path / "o.txt")), "--out", str(corpus2),
                 "--force"]) == 0
    run_files = checksums(run2)
    refused(capsys, ["evaluate", run2], "--data", str(corpus2.resolve() / "meta.json"),
            "changed since this run was trained", "--data FILE")
    refused(capsys, ["train", "lm", "--out", run2, "--resume", "--max-steps", "6"],
            str(corpus2.resolve() / "meta.json"),
            "changed since this run started", banner=True)
    assert checksums(run2) == run_files  # the refused resume wrote nothing


@pytest.mark.slow
def test_lm_on_a_text_file_records_it_and_resume_refuses_it_changed(tmp_path, capsys):
    text = write_corpus(tmp_path / "t.txt")
    run = tmp_path / "run"
    assert main(["train", "lm", "--out", str(run), "--max-steps", "3", "--checkpoint-every", "3",
                 *tiny_args("lm", {"lm": text})]) == 0
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    digest = hashlib.sha256(text.read_bytes()).hexdigest()
    assert cfg["data_sha256"] == {"data": digest}
    assert json.loads((run / "data" / "meta.json").read_text())["files_sha256"] == [digest]
    with open(text, "a") as f:
        f.write("an extra line\n")
    capsys.readouterr()
    refused(capsys, ["train", "lm", "--out", run, "--resume", "--max-steps", "6"], str(text.resolve()),
            "changed since this run started", banner=True)
    assert main(["evaluate", str(run)]) == 0  # RUN/data is the run's own copy: still valid


# ---- 2. a column named twice, in files and in flags ---------------------------------------------

@pytest.mark.parametrize("name, content, fragment", [
    ("d.csv", "text,text,label\n" + "a film,b film,pos\nc film,d film,neg\n" * 10,
     "line 1: column 'text' appears twice in the header (positions 1 and 2)"),
    ("d.tsv", "label\ttext\ttext\n" + "pos\ta film\tb film\nneg\tc film\td film\n" * 10,
     "column 'text' appears twice"),
    ("d.jsonl", '{"text": "a film", "label": "pos"}\n'
                '{"text": "a film", "label": "pos", "label": "neg"}\n',
     "line 2: field 'label' appears twice"),
])
def test_classify_refuses_a_column_named_twice(tmp_path, capsys, name, content, fragment):
    path = tmp_path / name
    path.write_text(content)
    before = checksums(tmp_path)
    refused(capsys, ["train", "classify", "--data", path, "--out", tmp_path / "run"],
            str(path), fragment)
    assert not (tmp_path / "run").exists() and checksums(tmp_path) == before


def test_flags_that_name_one_column_twice_are_refused(tmp_path, capsys):
    reviews = write_reviews(tmp_path / "r.csv")
    refused(capsys, ["train", "classify", "--data", reviews, "--text-column", "label",
                     "--label-column", "label"], "--text-column", "--label-column", "'label'")
    points = tmp_path / "p.csv"
    points.write_text("cloud,shape,x,y\n" + "".join(f"c{i},{'ab'[i % 2]},{i},1\n" for i in range(20)))
    refused(capsys, ["train", "classify", "--data", points, "--set-column", "cloud",
                     "--label-column", "shape", "--feature-columns", "x,x"],
            "--feature-columns", "'x' appears twice")
    refused(capsys, ["train", "classify", "--data", points, "--set-column", "cloud",
                     "--label-column", "shape", "--feature-columns", "x,cloud"],
            "--feature-columns", "'cloud'", "--set-column")
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("source,target\n" + "".join(f"w{i},m{i}\n" for i in range(20)))
    refused(capsys, ["train", "translate", "--data", pairs, "--src-column", "source",
                     "--tgt-column", "source"], "--src-column", "--tgt-column")
    twice = tmp_path / "twice.csv"
    twice.write_text("source,source,target\n" + "".join(f"w{i},v{i},m{i}\n" for i in range(20)))
    refused(capsys, ["train", "translate", "--data", twice, "--out", tmp_path / "t"],
            str(twice), "column 'source' appears twice")
    assert not (tmp_path / "t").exists()


# ---- 3. a class the test split does not have ----------------------------------------------------

@pytest.mark.slow
def test_a_class_without_test_examples_is_named_on_stderr_and_in_metrics(tmp_path, capsys):
    data = write_reviews(tmp_path / "train.csv")
    with open(data, "a") as f:  # a third class, in training only
        f.write("".join(f"the film was meh {i},meh\n" for i in range(30)))
    test = tmp_path / "test.csv"
    test.write_text("text,label\nthe film was great,pos\nthe film was awful,neg\n")
    run = tmp_path / "run"
    capsys.readouterr()
    assert main(["train", "classify", "--data", str(data), "--test", str(test), "--out", str(run),
                 "--max-steps", "3", *tiny_args("classify", {"classify": data})[2:]]) == 0
    err = capsys.readouterr().err
    warning = [line for line in err.splitlines() if "no example" in line]
    assert len(warning) == 1 and "'meh'" in warning[0] and "test_macro_f1" in warning[0]
    assert warning[0].startswith("warning: the test split has no example")
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["test_classes_without_examples"] == ["meh"]
    assert 0 <= metrics["test_macro_f1"] <= 1

    assert main(["evaluate", str(run)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["test_classes_without_examples"] == ["meh"]
    assert any(line.startswith("warning: the test split has no example") and "'meh'" in line
               for line in captured.err.splitlines())
    # a file of the user's: the warning names it, not the test split the run did not score
    assert main(["evaluate", str(run), "--data", str(test)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert any(line.startswith(f"warning: --data {test} has no example of 1 of the 3 classes "
                               f"('meh')") for line in err)
    assert not any("test split" in line for line in err)


def test_macro_f1_averages_over_classes_in_the_test_labels_or_the_predictions():
    import torch

    from attnlab.tasks.classify.runtime import classes_without_examples, classification_metrics

    targets = torch.tensor([0, 0, 1, 1])
    perfect = classification_metrics(targets.clone(), targets, 3)
    assert perfect["test_macro_f1"] == 1.0  # class 2: in neither, left out (F1 would be 0/0)
    assert classes_without_examples(targets, ["a", "b", "c"]) == ["c"]
    predicted = classification_metrics(torch.tensor([0, 2, 1, 1]), targets, 3)
    # class 2 predicted once but never true: F1 0 counts; classes 0 and 1: 2/3 and 1
    assert predicted["test_macro_f1"] == pytest.approx((2 / 3 + 1 + 0) / 3, abs=1e-6)


# ---- 4. the rest of their kind: files a reader could misread ------------------------------------

def _bad_files(tmp: Path) -> list[tuple[Path, str]]:
    good = "".join(f"film {i},{'ab'[i % 2]}\n" for i in range(20))
    cases = {
        "unclosed.csv": ("text,label\nfilm 1,a\n\"film 2,b\n" + good, "line 3: a quote"),
        "after_quote.csv": ("text,label\n\"film\" one,a\n" + good, "line 2: text follows a closing quote"),
        "empty.csv": ("", "the file is empty"),
        "header.csv": ("text,label\n", "no data rows"),
        "utf16.csv": ("text,label\n" + good, "UTF-16"),
    }
    out = []
    for name, (content, fragment) in cases.items():
        path = tmp / name
        path.write_bytes(content.encode("utf-16") if name == "utf16.csv" else content.encode())
        out.append((path, fragment))
    folder = tmp / "folder.csv"
    folder.mkdir()
    out.append((folder, "is a directory"))
    loop = tmp / "loop.csv"
    os.symlink(loop, loop)
    out.append((loop, "symbolic links"))
    return out


def test_files_a_reader_could_misread_exit_2_naming_the_file(tmp_path, capsys):
    for path, fragment in _bad_files(tmp_path):
        refused(capsys, ["train", "classify", "--data", path, "--out", tmp_path / "run"],
                str(path), fragment)
        assert not (tmp_path / "run").exists()
    folder = tmp_path / "folder.csv"
    refused(capsys, ["prepare", folder, "--out", tmp_path / "c"], str(folder), "is a directory")
    refused(capsys, ["prepare", tmp_path / "loop.csv", "--out", tmp_path / "c"], "loop.csv")
    assert not (tmp_path / "c").exists()


def test_a_byte_order_mark_is_not_part_of_the_first_column(tmp_path):
    from attnlab.data.tables import read_table

    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbftext,label\nfilm,a\n")
    assert read_table(path, ["text", "label"]) == [{"text": "film", "label": "a"}]


def test_a_data_file_that_changed_after_it_was_recorded_is_refused(tmp_path):
    from attnlab.errors import UsageError
    from attnlab.tasks import get_task
    from attnlab.tasks.classify.data import load_splits

    data = write_reviews(tmp_path / "r.csv")
    cfg = get_task("classify").config(**{"data": str(data), "test": None, "val": None, "text_column": "text",
           "label_column": "label", "seed": 1, "val_fraction": 0.1, "test_fraction": 0.1,
           "data_sha256": {"data": hashlib.sha256(data.read_bytes()).hexdigest()}})
    load_splits(cfg)  # the recorded bytes: fine
    with open(data, "a") as f:
        f.write("a late review,pos\n")
    with pytest.raises(UsageError, match=r"--data .*r.csv changed since this run recorded it"):
        load_splits(cfg)
