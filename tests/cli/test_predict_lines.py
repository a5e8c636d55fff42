"""`predict --input-file` prints one line per input, whatever the answer holds: a class name
with a line break in it (a quoted CSV label) printed the two lines of its name, and a program
that pairs inputs with lines read every answer after it against the wrong input. The line has
each line break as a space, as lm and translate runs print theirs; `--json` keeps the name as
it is."""
from __future__ import annotations

import csv
import json

import pytest

from attnlab.cli import main
from attnlab.commands.generate import unescape

from ..reliability.conftest import task_data, tiny_args

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def label_with_a_break(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("label_lines")
    with open(tmp / "films.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        for i in range(48):
            w.writerow([f"the film was {('great', 'awful')[i % 2]}", ("good\nfilm", "bad")[i % 2]])
    run = tmp / "run"
    assert main(["train", "classify", "--data", str(tmp / "films.csv"), "--out", str(run),
                 "--max-steps", "3", "--batch-size", "16", "--model-dim", "16", "--num-heads",
                 "2", "--dim-feedforward", "32", "--threads", "1"]) == 0
    return run


def test_one_line_per_input_when_a_class_name_holds_a_line_break(label_with_a_break,
                                                                  tmp_path, capsys):
    texts = ["the film was great", "the film was awful", "great", "awful", "the film"]
    path = tmp_path / "inputs.txt"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["predict", str(label_with_a_break), "--input-file", str(path), "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["input"] for r in records] == texts
    assert {r["prediction"] for r in records} <= {"good\nfilm", "bad"}  # the names as trained
    assert main(["predict", str(label_with_a_break), "--input-file", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [r["prediction"].replace("\n", " ") for r in records]


def test_json_lines_stay_one_per_input_when_an_input_holds_a_line_separator(
        label_with_a_break, tmp_path, capsys):
    """U+2028, U+2029 and NEL inside an input (a line of the file: only a newline ends one)
    were written raw into its JSON line, and `str.splitlines` cut the line there, as a program
    reading the output with it saw: they are written escaped, and read back as they were."""
    texts = ["the film\u2028was great", "awful\u2029film", "the film\x85was awful", "great"]
    path = tmp_path / "inputs.txt"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8", newline="")
    capsys.readouterr()
    assert main(["predict", str(label_with_a_break), "--input-file", str(path), "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["input"] for line in lines] == texts


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lm_lines")
    run = tmp / "run"
    assert main(["train", "lm", *tiny_args("lm", task_data(tmp), "--max-steps", "3"),
                 "--out", str(run)]) == 0
    return run


@pytest.mark.parametrize("as_json", [True, False])
def test_generate_writes_one_line_per_prompt_when_a_prompt_holds_a_line_separator(
        lm_run, tmp_path, capsys, as_json):
    """`generate --input-file` wrote U+2028, U+2029 and NEL raw (in its JSON lines and in its
    plain lines alike): a program splitting the output with `str.splitlines` read more answers
    than prompts. They are written escaped, and read back as they were."""
    prompts = ["the\u2028quick", "fox\x85the", "a\u2029fox", "the"]
    path = tmp_path / "prompts.txt"
    path.write_text("\n".join(prompts) + "\n", encoding="utf-8", newline="")
    capsys.readouterr()
    assert main(["generate", str(lm_run), "--input-file", str(path), "--greedy",
                 "--max-new-tokens", "3", *(["--json"] if as_json else [])]) == 0
    lines = capsys.readouterr().out.splitlines()
    if as_json:
        assert [json.loads(line)["prompt"] for line in lines] == prompts
    else:
        assert [unescape(line)[:len(p)] for line, p in zip(lines, prompts)] == prompts
        assert len(lines) == len(prompts)
