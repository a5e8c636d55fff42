"""Many inputs in one process: `predict`, `translate` and `generate` read one input
per line from `--input-file FILE` or standard input, load the model once, batch the inputs and
write one line per input in order — the same lines one call per input writes — or a JSON object
per line with `--json`. A bad line is one error naming the file and the line, before anything
is printed."""
from __future__ import annotations

import io
import json
import sys

import pytest

from attnlab.cli import main

pytestmark = pytest.mark.slow

MORE = {  # a few inputs per run, of different lengths where the task allows it
    "reverse": ["3 1 4 1 5", "2 7", "9 9 9 0 1 2 3 4", "5"],
    "anomaly": ["0 1 2 3 4", "10 11 12 13 14 15", "7 8 9 20 21", "100 200 300 400 500"],
    "classify": ["the film was great", "dull", "a great great film, truly", "bad"],
    "sets": ["0.5,1;-1,2;0,0", "1,1", "0,0;2,2;3,1;-1,-1", "0.2,0.1;0.3,0.3"],
    "translate": ["342", "7", "901", "999"],  # within the run's numbers (max_number 1000)
    "lm": ["the quick brown fox", "the", "a fox", "quick"],
    "graph": ["33", "0", "5", "16"],
}


def call(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def inputs_of(name, runs_):
    if name == "jets":
        run, first = runs_["jets"]
        path = first.rpartition(":")[0]
        return [f"{path}:{row}" for row in (0, 5, 17, 39)]
    return MORE[name]


@pytest.mark.parametrize("name", ["reverse", "anomaly", "classify", "sets", "translate", "lm",
                                  "jets", "graph"])
def test_a_file_of_inputs_gives_what_one_call_per_input_gives(runs, name, tmp_path, capsys):
    run, _ = runs[name]
    texts = inputs_of(name, runs)
    alone = []
    for text in texts:
        code, out, err = call(capsys, "predict", run, "--input", text)
        assert code == 0, err
        alone.append(out.strip().splitlines()[-1])
    path = tmp_path / "inputs.txt"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    code, out, err = call(capsys, "predict", run, "--input-file", path)
    assert code == 0, err
    assert out.splitlines() == alone


@pytest.mark.parametrize("name", ["classify", "sets", "anomaly", "jets", "graph", "reverse"])
def test_json_lines_carry_the_input_the_prediction_and_probabilities(runs, name, tmp_path,
                                                                      capsys):
    run, _ = runs[name]
    texts = inputs_of(name, runs)
    path = tmp_path / "inputs.txt"
    path.write_text("\n".join(texts), encoding="utf-8")  # no final newline
    code, plain, _ = call(capsys, "predict", run, "--input-file", path)
    code, out, err = call(capsys, "predict", run, "--input-file", path, "--json")
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["input"] for r in records] == texts
    if name == "jets":  # the line adds the label's probability; the JSON keeps them apart
        assert plain.splitlines() == [f"{r['prediction']} {r['probabilities'][r['prediction']]:.4f}"
                                      for r in records]
    else:
        assert [r["prediction"] for r in records] == plain.splitlines()
    for r in records:
        if name == "reverse":
            assert "probabilities" not in r  # a per-symbol model gives no one distribution
            continue
        # one shape for every task with a score: the prediction alone, its scores beside it
        assert set(r) == {"input", "prediction", "probabilities"}
        p = r["probabilities"]
        values = list(p.values()) if isinstance(p, dict) else p
        assert sum(values) == pytest.approx(1.0, abs=1e-4)
        if isinstance(p, dict):  # named classes: the prediction is the most probable one
            assert r["prediction"] == max(p, key=p.get)
        else:  # positions of a set
            assert int(r["prediction"]) == max(range(len(p)), key=p.__getitem__)


def test_standard_input_is_read_with_a_dash(runs, monkeypatch, capsys):
    run, _ = runs["reverse"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"3 1 4\r\n2 7\r\n")))
    code, out, err = call(capsys, "predict", run, "--input-file", "-")
    assert code == 0, err
    assert len(out.splitlines()) == 2 and [len(x.split()) for x in out.splitlines()] == [3, 2]


@pytest.mark.parametrize("inside", ["\x0c", "\x1e", "\x85", "\u2028", "\r"])
def test_a_line_ends_only_at_a_newline(runs, inside, tmp_path, capsys):
    """A form feed, NEL, a line or record separator or a lone carriage return inside a line
    (str.splitlines cuts at each) leaves one output per line of the file, as `wc -l` counts."""
    run, _ = runs["reverse"]
    path = tmp_path / "inputs.txt"
    path.write_text(f"3 1 4{inside}2 7\n9 9\n", encoding="utf-8", newline="")
    code, out, err = call(capsys, "predict", run, "--input-file", path)
    assert code == 0, err
    assert len(out.splitlines()) == 2
    code, alone, _ = call(capsys, "predict", run, "--input", f"3 1 4{inside}2 7")
    assert out.splitlines()[0] == alone.strip()


def test_standard_input_closed_is_one_error(runs, monkeypatch, capsys):
    """`attnlab predict RUN --input-file - <&-`: Python has no sys.stdin at all."""
    run, _ = runs["reverse"]
    monkeypatch.setattr(sys, "stdin", None)
    code, out, err = call(capsys, "predict", run, "--input-file", "-")
    assert code == 2 and out == ""
    assert err == "attnlab: error: --input-file -: standard input is closed; no inputs\n"


@pytest.mark.parametrize("content, said", [
    (b"3 1 4\n\n2 7\n", "--input-file {p} line 2 is empty; give one input per line"),
    (b"3 1 4\n2 7\n3 x 1\n", "--input-file {p} line 3: token 'x' is not a symbol of this model"),
    (b"", "--input-file {p}: no inputs (the file is empty)"),
    (b"3 1\n\xff\xfe 2\n",
     "--input-file {p} line 2: not valid UTF-8 (byte 0xff at column 1); save the file as UTF-8"),
])
def test_a_bad_line_is_named_and_nothing_is_predicted(runs, content, said, tmp_path, capsys):
    run, _ = runs["reverse"]
    path = tmp_path / "inputs.txt"
    path.write_bytes(content)
    code, out, err = call(capsys, "predict", run, "--input-file", path)
    assert code == 2 and out == ""
    assert err.startswith("attnlab: error: " + said.format(p=path))
    assert len(err.strip().splitlines()) == 1


def test_one_of_input_and_input_file(runs, tmp_path, capsys):
    run, _ = runs["reverse"]
    (tmp_path / "x.txt").write_text("1 2\n")
    for argv in ([], ["--input", "1 2", "--input-file", tmp_path / "x.txt"]):
        code, out, err = call(capsys, "predict", run, *argv)
        assert code == 2 and "give --input TEXT or --input-file FILE (one of the two)" in err
    code, _, err = call(capsys, "predict", run, "--input-file", tmp_path / "missing.txt")
    assert code == 2 and err.strip().endswith("missing.txt: not found")
    code, _, err = call(capsys, "predict", run, "--input-file", tmp_path)
    assert code == 2 and "is a directory" in err


def test_translate_reads_a_file_like_its_arguments(runs, tmp_path, capsys):
    run, _ = runs["translate"]
    texts = MORE["translate"]
    code, out, err = call(capsys, "translate", run, *texts)
    assert code == 0, err
    path = tmp_path / "numbers.txt"
    path.write_text("\n".join(texts) + "\n")
    code, from_file, _ = call(capsys, "translate", run, "--input-file", path)
    assert from_file == out
    code, as_json, _ = call(capsys, "translate", run, "--input-file", path, "--json")
    assert [json.loads(line) for line in as_json.splitlines()] == [
        {"input": t, "translation": line} for t, line in zip(texts, out.splitlines())]
    code, _, err = call(capsys, "translate", run, "7", "--input-file", path)
    assert code == 2 and "(one of the two)" in err
    path.write_text("7\n" + "three hundred " * 200 + "\n")  # longer than the model reads
    code, out, err = call(capsys, "translate", run, "--input-file", path)
    assert code == 2 and out == ""
    assert err.startswith(f"attnlab: error: --input-file {path} line 2 has ")
    code, _, err = call(capsys, "translate", run, "7", "three hundred " * 200)
    assert code == 2 and err.startswith("attnlab: error: TEXT number 2 has ")


@pytest.mark.parametrize("name, argv, said", [
    ("translate", ["translate", "{run}", "342", "zzz seven qqq"],
     "TEXT number 2 holds pieces unknown to this model, each read as unk: 'zzz', 'qqq'"),
    ("lm", ["generate", "{run}", "--prompt", "the \u20ac", "--max-new-tokens", "2", "--greedy"],
     "--prompt holds pieces unknown to this model, each read as unk: '\u20ac'"),
    ("classify", ["predict", "{run}", "--input", "the zzz film"],
     "--input holds pieces unknown to this model, each read as unk: 'zzz'"),
])
def test_pieces_the_model_never_saw_are_named_on_stderr(runs, capsys, name, argv, said):
    """A word or character outside the vocabulary is read as unk: the output is the model's
    answer to less than was written, so a note says which (it once said nothing)."""
    run, _ = runs[name]
    code, out, err = call(capsys, *[a.format(run=run) for a in argv])
    assert code == 0 and out
    # besides: a tiny translate run's answer may reach its length limit, a note of its own
    assert _unlimited(err) == [f"note: {said}"]
    known = [a.replace("zzz ", "").replace(" qqq", "").replace(" zzz", "").replace(" \u20ac", "")
             for a in argv]
    code, _, err = call(capsys, *[a.format(run=run) for a in known])
    assert code == 0 and _unlimited(err) == []


def _unlimited(err: str) -> list[str]:
    """The lines of ``err`` but the note of a translation cut at the run's length limit."""
    return [line for line in err.splitlines()
            if not (line.startswith("note: the translation of ") and "stopped at" in line)]


def test_generate_continues_each_prompt_of_a_file_on_one_line(runs, tmp_path, capsys):
    run, _ = runs["lm"]
    prompts = MORE["lm"]
    alone = []
    for prompt in prompts:
        code, out, err = call(capsys, "generate", run, "--prompt", prompt, "--greedy",
                              "--max-new-tokens", "12")
        assert code == 0, err
        alone.append(out[:-1])  # the prompt and its continuation, then one newline
    path = tmp_path / "prompts.txt"
    path.write_text("\n".join(prompts) + "\n")
    code, out, err = call(capsys, "generate", run, "--input-file", path, "--greedy",
                          "--max-new-tokens", "12", "--json")
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["prompt"] + r["text"] for r in records] == alone
    code, plain, _ = call(capsys, "generate", run, "--input-file", path, "--greedy",
                          "--max-new-tokens", "12")
    assert len(plain.splitlines()) == len(prompts)  # newlines inside a text are escaped
    assert plain.splitlines() == [a.replace("\\", "\\\\").replace("\n", "\\n")
                                  .replace("\t", "\\t").replace("\r", "\\r") for a in alone]


def test_sampling_a_file_with_a_seed_is_reproducible(runs, tmp_path, capsys):
    run, _ = runs["lm"]
    path = tmp_path / "prompts.txt"
    path.write_text("the\na fox\n")
    outs = [call(capsys, "generate", run, "--input-file", path, "--seed", "3",
                 "--max-new-tokens", "10")[1] for _ in range(2)]
    assert outs[0] == outs[1] and len(outs[0].splitlines()) == 2


def test_one_prompt_with_json_is_one_json_line(runs, capsys):
    run, _ = runs["lm"]
    code, streamed, _ = call(capsys, "generate", run, "--prompt", "a fox", "--greedy",
                             "--max-new-tokens", "8")
    code, out, err = call(capsys, "generate", run, "--prompt", "a fox", "--greedy",
                          "--max-new-tokens", "8", "--json")
    assert code == 0, err
    (line,) = out.splitlines()
    record = json.loads(line)
    assert record["prompt"] + record["text"] == streamed[:-1]


def test_a_table_as_input_file_is_said_to_be_read_as_lines_header_and_all(tmp_path, capsys):
    """predict --input-file reviews.csv predicted the header 'text,label' and each row's label
    column as part of its text, without a word; a Parquet file was 'not UTF-8 text'."""
    from attnlab.commands.inputs import read_inputs
    from attnlab.errors import UsageError

    (tmp_path / "reviews.csv").write_text("text,label\ngood film,pos\n")
    assert read_inputs(str(tmp_path / "reviews.csv"))[0] == ["text,label", "good film,pos"]
    err = capsys.readouterr().err
    assert err.startswith(f"note: --input-file {tmp_path / 'reviews.csv'} is read as one input "
                          f"per line, whole: a table's header and every column too (2 inputs)")
    (tmp_path / "texts.txt").write_text("good film\n")
    assert read_inputs(str(tmp_path / "texts.txt"))[0] == ["good film"]
    assert capsys.readouterr().err == ""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    pd.DataFrame({"text": ["good film"] * 50}).to_parquet(tmp_path / "texts.parquet")
    with pytest.raises(UsageError, match="texts.parquet: is a Parquet file; give a text file"):
        read_inputs(str(tmp_path / "texts.parquet"))
