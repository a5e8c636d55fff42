"""Instruction rows in another form than JSON Lines, given to ``attnlab train lm --data``: a
CSV or TSV of prompt/response, or Alpaca's JSON list, were read as plain text without a word,
so the run learned the file's commas, quotes and keys and its loss counted the prompts. They
are refused in one line naming the file, before the run directory is written."""
import json

import pytest

from attnlab.cli import main

ROWS = [("reverse: abc", "cba"), ("reverse: dog", "god")] * 40


def _csv(path, sep=","):
    path.write_text("".join(f"{p}{sep}{r}\n" for p, r in [("prompt", "response"), *ROWS]))
    return path


def _alpaca(path):
    path.write_text(json.dumps([{"instruction": p, "input": "", "output": r} for p, r in ROWS],
                               indent=2))
    return path


def _sharegpt(path):  # (ShareGPT's .json was trained on as text without a word)
    path.write_text(json.dumps([{"id": str(i), "conversations": [
        {"from": "human", "value": p}, {"from": "gpt", "value": r}]}
        for i, (p, r) in enumerate(ROWS)]))
    return path


PREPARE = "as text, prepare it (attnlab prepare {text} --out CORPUS) and give --data CORPUS"
RENAME = "as text, rename it {name}, then " + PREPARE.removeprefix("as text, ")


# the way to train on the file as text: prepare refuses a .csv or .tsv (a table read whole),
# so that one is renamed first (review: renamed, the file drew the same refusal again)
@pytest.mark.parametrize("make, seen, as_text", [
    (lambda d: _csv(d / "pairs.csv"), "its header (prompt,response) names instruction rows",
     RENAME),
    (lambda d: _csv(d / "pairs.tsv", "\t"), "its header (prompt\tresponse) names", RENAME),
    (lambda d: _alpaca(d / "alpaca.json"), "it is JSON that holds instruction rows", PREPARE),
    (lambda d: _sharegpt(d / "sharegpt.json"), "it is JSON that holds instruction rows",
     PREPARE),
])
def test_instruction_rows_that_are_not_json_lines_are_refused(tmp_path, capsys, make, seen,
                                                              as_text):
    data, out = make(tmp_path), tmp_path / "run"
    # (a step, so that a file read as text, unrefused, does not train long)
    assert main(["train", "lm", "--data", str(data), "--out", str(out), "--max-steps", "1",
                 "--threads", "1", "--block-size", "8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"attnlab: error: --data {data}: {seen}")
    assert "JSON Lines file (.jsonl" in err[0]
    text = data.with_suffix(".txt") if data.suffix != ".json" else data
    assert err[0].endswith(as_text.format(text=text, name=text.name))
    # the advice, followed, trains on the file as text
    data.rename(text)
    assert main(["prepare", str(text), "--out", str(tmp_path / "corpus")]) == 0
    assert not out.exists()


@pytest.mark.parametrize("first", [
    "Messages", "Prompt and response, a story.", "{ a brace, then prose }",
    # wikitext, a TOML file: a brace or bracket first and a row's key quoted (review)
    '{{Short description|A word}}\nThe "output" to the "input" is the "response".',
    '[build-system]\nrequires = ["setuptools"]\nname = "prompt"',
])
def test_text_that_only_looks_alike_is_still_text(tmp_path, first):
    from attnlab.tasks.lm.checks import check_data

    data = tmp_path / "story.txt"
    data.write_text(first + "\n" + "once upon a time there was a prompt. " * 40)
    check_data({"data": str(data), "block_size": 16})  # no refusal


def test_a_jsonl_of_texts_is_told_to_be_prepared_not_to_give_init(tmp_path, capsys):
    """{"text": ...} lines are texts, not instruction rows: train lm names the prepare that
    makes them a corpus (with --init, with its tokenizer), as it does for a .csv of texts; it
    said they were instruction rows and asked for --init (review)."""
    from attnlab.errors import UsageError
    from attnlab.tasks.lm.checks import check_rows

    data, out = tmp_path / "texts.jsonl", tmp_path / "run"
    data.write_text("\n" + "".join(json.dumps({"text": f"story {i} " * 20, "id": i}) + "\n"
                                   for i in range(40)))
    told = (f"--data {data} line 2: a row of text, id, not an instruction row (\"messages\", or "
            f"\"prompt\" and \"response\"): texts, which train lm reads prepared; prepare them "
            f"first (attnlab prepare {data} --text-column text{{}} --out CORPUS, then give "
            f"--data CORPUS)")
    assert main(["train", "lm", "--data", str(data), "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"attnlab: error: {told.format('')}"]
    assert not out.exists()
    with pytest.raises(UsageError) as e:  # with --init: prepared with its tokenizer
        check_rows({"data": str(data), "init": "base", "seed": 0}, lambda cfg: None)
    assert str(e.value) == told.format(" --tokenizer base")
    # the advice, followed, makes the corpus
    assert main(["prepare", str(data), "--text-column", "text", "--out",
                 str(tmp_path / "corpus")]) == 0
    # Alpaca's rows are told how a row is written (read_rows), not to be prepared as texts
    data.write_text(json.dumps({"instruction": "reverse", "input": "ab", "output": "ba"}) + "\n")
    with pytest.raises(UsageError, match='no "messages" or "prompt" \\(fields: instruction'):
        check_rows({"data": str(data), "init": "base", "seed": 0}, lambda cfg: None)
    # so are ShareGPT's (they were told to be prepared, --text-column NAME, as texts)
    data.write_text(json.dumps({"conversations": [{"from": "human", "value": "reverse: ab"},
                                                  {"from": "gpt", "value": "ba"}]}) + "\n")
    with pytest.raises(UsageError, match='no "messages" or "prompt" \\(fields: conversations\\)'
                       '.*ShareGPT\'s "conversations" is "messages"'):
        check_rows({"data": str(data), "init": "base", "seed": 0}, lambda cfg: None)
    # instruction rows are told what they were
    data.write_text(json.dumps({"prompt": "reverse: ab", "response": "ba"}) + "\n")
    assert main(["train", "lm", "--data", str(data), "--out", str(out)]) == 2
    assert "holds instruction rows, which fine-tune a pretrained model: give --init DIR" in (
        capsys.readouterr().err)
