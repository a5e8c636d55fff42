"""``attnlab train tag``: the readers (CoNLL, JSON Lines), the BIO check, the refusals of bad
files (exit 2, one line naming file and line, no run directory), a run from scratch that
learns a tagging anyone can check (capitalised words are entities), and predict, evaluate
and view on it."""
import json
import random

import pytest

from attnlab.cli import main
from attnlab.errors import UsageError
from attnlab.tasks.tag.data import bio_problem, read_sentences

NAMES = ["John", "Mary", "Paris", "London", "Alice", "Bob", "Berlin", "Rome"]
WORDS = ["lives", "in", "the", "city", "and", "likes", "to", "walk", "near", "a", "river"]
TINY = ["--max-steps", "60", "--model-dim", "32", "--num-heads", "2", "--num-layers", "1",
        "--dim-feedforward", "32", "--lr", "3e-3", "--warmup", "5", "--val-every", "20",
        "--threads", "1"]


def capitalised(n, seed=0):
    """n sentences whose capitalised words (names) are B-X and the others O."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(NAMES) if rng.random() < 0.3 else rng.choice(WORDS)
                 for _ in range(rng.randint(3, 8))]
        out.append((words, ["B-X" if w[0].isupper() else "O" for w in words]))
    return out


def write_conll(path, sentences, extra="NN"):
    path.write_text("-DOCSTART- -X- O\n\n" + "".join(
        "".join(f"{w} {extra} {t}\n" for w, t in zip(words, tags)) + "\n"
        for words, tags in sentences))
    return path


@pytest.fixture(scope="module")
def tag_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tag")
    data = write_conll(tmp / "caps.conll", capitalised(200))
    out = tmp / "run"
    assert main(["train", "tag", "--data", str(data), "--out", str(out), *TINY]) == 0
    return out


# ---- readers ----------------------------------------------------------------------------------

def test_conll_skips_docstart_and_reads_the_last_or_the_named_column(tmp_path):
    path = tmp_path / "a.conll"
    path.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-ORG O\nrejects VBZ O O\n\n"
                    "Peter NNP B-PER B-X\nBlackburn NNP I-PER I-X\n")
    found = read_sentences(path)
    assert found.words == [["EU", "rejects"], ["Peter", "Blackburn"]]
    assert found.tags == [["O", "O"], ["B-X", "I-X"]] and found.lines == [3, 6]
    assert read_sentences(path, tag_column=2).tags == [["B-ORG", "O"], ["B-PER", "I-PER"]]


def test_jsonl_reads_named_fields(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps({"w": ["John", "runs"], "t": ["B-PER", "O"]}) + "\n\n")
    found = read_sentences(path, columns=("w", "t"))
    assert found.words == [["John", "runs"]] and found.tags == [["B-PER", "O"]]


@pytest.mark.parametrize("tag, ok", [("O", True), ("B-PER", True), ("I-MISC", True),
                                     ("PER", False), ("I-", False), ("E-PER", False),
                                     ("o", False), ("B_PER", False)])
def test_bio_tags(tag, ok):
    assert (bio_problem(tag) is None) == ok


# ---- bad files: exit 2, one line, file and line, nothing written -------------------------------

BAD = {
    "fields.conll": ("John NNP B-PER\nlives VBZ\n", "fields.conll line 2: 2 fields"),
    "bio.conll": ("John NNP PER\n", "bio.conll line 1: tag 'PER' is not BIO"),
    "bare_i.conll": ("John NNP B-PER\nSmith NNP I-\n", "bare_i.conll line 2: tag 'I-'"),
    "lengths.jsonl": ('{"tokens": ["a"], "tags": ["O"]}\n{"tokens": ["a", "b"], "tags": ["O"]}\n',
                      "lengths.jsonl line 2: 2 tokens but 1 tags"),
    "empty.conll": ("", "empty.conll: no sentence"),
}


@pytest.mark.slow  # the CLI, in process
@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_file_exits_2_naming_file_and_line_and_writes_nothing(name, tmp_path, capsys):
    text, fragment = BAD[name]
    (tmp_path / name).write_text(text)
    out = tmp_path / "run"
    assert main(["train", "tag", "--data", str(tmp_path / name), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err
    assert not out.exists()


@pytest.mark.slow
def test_a_test_tag_never_seen_in_training_is_refused(tmp_path, capsys):
    data = write_conll(tmp_path / "d.conll", capitalised(20))
    test = write_conll(tmp_path / "t.conll", [(["Rome"], ["B-LOC"])])
    assert main(["train", "tag", "--data", str(data), "--test", str(test),
                 "--out", str(tmp_path / "r")]) == 2
    assert "t.conll line 3: tag 'B-LOC' never seen in training" in capsys.readouterr().err


@pytest.mark.slow
def test_a_jsonl_flag_on_conll_files_is_refused(tmp_path, capsys):
    data = write_conll(tmp_path / "d.conll", capitalised(20))
    assert main(["train", "tag", "--data", str(data), "--tokens-column", "w",
                 "--out", str(tmp_path / "r")]) == 2
    assert "--tokens-column" in capsys.readouterr().err


# ---- a run from scratch, and the commands on it ------------------------------------------------

@pytest.mark.slow
def test_a_run_from_scratch_learns_that_names_are_entities(tag_run):
    metrics = json.loads((tag_run / "metrics.json").read_text())
    assert metrics["test_f1"] == 1.0 and metrics["test_accuracy"] == 1.0
    assert [row["type"] for row in metrics["test_per_type"]] == ["X"]
    log = (tag_run / "logs" / "metrics.csv").read_text().splitlines()
    header = log[0].split(",")
    assert {"val_f1", "val_precision", "val_recall", "val_loss", "val_acc"} <= set(header)
    f1 = [float(r.split(",")[header.index("val_f1")]) for r in log[1:]
          if r.split(",")[header.index("val_f1")]]
    assert len(f1) == 3 and f1[0] < f1[-1] and f1[-1] > 0.95  # at steps 20, 40, 60


@pytest.mark.slow
def test_predict_prints_each_word_with_its_tag(tag_run, capsys):
    assert main(["predict", str(tag_run), "--input", "Alice walks to Rome"]) == 0
    assert capsys.readouterr().out.strip() == "Alice/B-X walks/O to/O Rome/B-X"
    assert main(["predict", str(tag_run), "--input", "the city", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "input": "the city", "prediction": ["O", "O"], "tokens": ["the", "city"]}


@pytest.mark.slow
def test_predict_json_lines_are_read_back_by_evaluate(tag_run, tmp_path, capsys):
    # docs/tagging.md: predict --json writes JSON Lines that evaluate --data reads back
    (tmp_path / "in.txt").write_text("Alice walks to Rome\nthe city near Paris\n")
    assert main(["predict", str(tag_run), "--input-file", str(tmp_path / "in.txt"),
                 "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    (tmp_path / "tagged.jsonl").write_text("\n".join(lines) + "\n")
    args = ["evaluate", str(tag_run), "--data", str(tmp_path / "tagged.jsonl"),
            "--tags-column", "prediction"]
    assert main(args) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["test_accuracy"] == 1.0 and scores["test_f1"] == 1.0
    row = json.loads(lines[0])
    row["prediction"][0] = "O"  # a tag corrected by hand: Alice is no entity
    (tmp_path / "tagged.jsonl").write_text("\n".join([json.dumps(row), *lines[1:]]) + "\n")
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["test_accuracy"] == 7 / 8


@pytest.mark.slow
def test_evaluate_gives_the_runs_test_metrics_and_takes_a_file(tag_run, tmp_path, capsys):
    metrics = json.loads((tag_run / "metrics.json").read_text())
    assert main(["evaluate", str(tag_run)]) == 0
    again = json.loads(capsys.readouterr().out)
    assert {k: again[k] for k in ("test_f1", "test_accuracy")} == {
        k: metrics[k] for k in ("test_f1", "test_accuracy")}
    # names as O: every entity missed, recall 0
    wrong = write_conll(tmp_path / "wrong.conll", [(["John", "lives"], ["O", "O"]),
                                                   (["Mary", "walks"], ["B-X", "O"])])
    assert main(["evaluate", str(tag_run), "--data", str(wrong)]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert (scores["test_precision"], scores["test_recall"]) == (0.5, 1.0)


@pytest.mark.slow
def test_evaluate_reads_json_lines_whose_fields_are_named_otherwise(tag_run, tmp_path, capsys):
    rows = [{"words": ["John", "lives"], "ner": ["O", "O"]},
            {"words": ["Mary", "walks"], "ner": ["B-X", "O"]}]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["evaluate", str(tag_run), "--data", str(data)]) == 2
    assert "needs fields 'tokens' and 'tags'" in capsys.readouterr().err
    assert main(["evaluate", str(tag_run), "--data", str(data), "--tokens-column", "words",
                 "--tags-column", "ner"]) == 0
    scores = json.loads(capsys.readouterr().out)  # the rows of the CoNLL test above
    assert (scores["test_precision"], scores["test_recall"]) == (0.5, 1.0)
    # a field name given for a CoNLL file, which has none, is refused, not ignored
    conll = tmp_path / "d.conll"
    conll.write_text("John O\nlives O\n\nMary B-X\nwalks O\n")
    assert main(["evaluate", str(tag_run), "--data", str(conll), "--tokens-column",
                 "words"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnlab: error: --tokens-column: only for JSON Lines") and \
        len(err.splitlines()) == 1


@pytest.mark.slow
def test_view_shows_one_row_and_column_per_word(tag_run, tmp_path):
    page = tmp_path / "v.html"
    assert main(["view", str(tag_run), "--input", "John lives in Paris", "--out",
                 str(page)]) == 0
    text = page.read_text()
    data = json.loads(text.split('id="attnlab-attention">')[1].split("</script>")[0])
    assert data["query_tokens"] == ["John", "lives", "in", "Paris"]
    assert len(data["layers"]) == 1 and len(data["layers"][0]["weights"][0]) == 4


@pytest.mark.slow
def test_an_input_of_white_space_is_refused(tag_run, capsys):
    assert main(["predict", str(tag_run), "--input", " \t "]) == 2
    assert "--input is empty" in capsys.readouterr().err


@pytest.mark.slow
def test_two_sentences_on_two_lines_are_refused_not_tagged_as_one(tag_run, tmp_path, capsys):
    # predict --input "$(cat sentences.txt)" printed the lines' words as one sentence
    for command in (["predict"], ["view", "--out", str(tmp_path / "v.html")]):
        assert main([command[0], str(tag_run), "--input", "John lives\nin Paris",
                     *command[1:]]) == 2
        assert capsys.readouterr().err == (
            "attnlab: error: --input holds 2 lines; it is one sentence, on one line (predict "
            "--input-file FILE reads one sentence per line)\n")
    assert not (tmp_path / "v.html").exists()
    assert main(["predict", str(tag_run), "--input", "Alice walks to Rome\r\n"]) == 0
    assert capsys.readouterr().out.strip() == "Alice/B-X walks/O to/O Rome/B-X"


def test_the_tagging_page_names_only_flags_the_commands_take():
    import re
    from pathlib import Path

    from attnlab.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    train = commands["train"]._subparsers._group_actions[0].choices["tag"]
    known = {flag for parser in (train, commands["predict"], commands["evaluate"],
                                 commands["view"], commands["export"])
             for flag in parser._option_string_actions}
    text = (Path(__file__).resolve().parents[2] / "docs" / "tagging.md").read_text()
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text))
    assert len(named) > 10 and named <= known, named - known


@pytest.mark.slow
def test_a_run_from_a_tag_run_keeps_its_vocabulary_and_takes_new_tags(tag_run, tmp_path):
    sentences = [(w, ["B-Y" if t == "B-X" else t for t in tags]) for w, tags in capitalised(30)]
    data = write_conll(tmp_path / "y.conll", sentences)
    out = tmp_path / "from_run"
    assert main(["train", "tag", "--init", str(tag_run), "--data", str(data), "--out", str(out),
                 "--max-steps", "3", "--threads", "1"]) == 0
    from attnlab.runs import read_yaml

    assert read_yaml(out / "config.yaml")["tags"] == ["B-Y", "O"]
    assert (out / "tokenizer.json").read_text() == (tag_run / "tokenizer.json").read_text()


def test_a_field_given_twice_in_a_json_lines_row_is_refused(tmp_path):
    """json.loads keeps the last of two "tags" keys and says nothing: the row's first tags
    would be lost; the reader of classify's files refused it already."""
    path = tmp_path / "d.jsonl"
    path.write_text('{"tokens": ["John"], "tags": ["B-X"], "tags": ["O"]}\n')
    with pytest.raises(UsageError, match=r"d.jsonl line 1: field 'tags' appears twice"):
        read_sentences(path)
