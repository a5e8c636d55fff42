"""Predicting on a table's column: `predict RUN --input-file reviews.csv --text-column review`
(`translate --src-column`, `generate --text-column`) reads that column's cells, one input per
row in the file's order, with the project's table reader; a missing column, an empty or null
cell, the flag without --input-file or with a file that is no table is one error naming it,
before the run is loaded. Without the flag a table is still read as lines, and the note says
which flag reads a column."""
from __future__ import annotations

import json

import pytest

from attnlab.cli import main
from attnlab.commands.inputs import read_inputs


def call(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def write(path, text: str):
    path.write_text(text, encoding="utf-8", newline="")
    return path


@pytest.mark.parametrize("name, content", [
    ("films.csv", 'id,review,stars\n1,the film was great,5\n2,"dull, and long",1\n'
                  '3,"a great\nfilm",4\n'),
    ("films.tsv", "id\treview\n1\tthe film was great\n2\tdull, and long\n3\ta great film\n"),
    ("films.jsonl", '{"id": 1, "review": "the film was great"}\n'
                    '{"review": "dull, and long", "id": 2}\n\n{"id": 3, "review": 2.50}\n'),
])
def test_the_cells_of_the_column_are_the_inputs_one_per_row_in_order(tmp_path, name,
                                                                    content, capsys):
    """Not the header, not the other columns; a quoted comma or newline stays in its cell; a
    JSON Lines number is the text the line has (2.50, not 2.5)."""
    path = write(tmp_path / name, content)
    texts, labels = read_inputs(str(path), "review")
    third = {"films.csv": "a great\nfilm", "films.tsv": "a great film", "films.jsonl": "2.50"}
    assert texts == ["the film was great", "dull, and long", third[name]]
    lines = {"films.csv": [2, 3, 4], "films.tsv": [2, 3, 4], "films.jsonl": [1, 2, 4]}[name]
    assert labels == [f"--input-file {path} line {n}" for n in lines]
    assert capsys.readouterr().err == ""  # no note: the table is read as one


def test_a_parquet_column_is_read_by_rows(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    path = tmp_path / "films.parquet"
    pd.DataFrame({"review": ["great", "dull"], "stars": [5, 1]}).to_parquet(path)
    assert read_inputs(str(path), "review") == (
        ["great", "dull"], [f"--input-file {path} row 1", f"--input-file {path} row 2"])


@pytest.mark.parametrize("content, said", [
    ("id,review\n1,great\n", "--input-file {p}: no column 'text' (columns: id, review)"),
    ("id,text\n1,great\n2,\n", "--input-file {p} line 3: empty value in column 'text'"),
    ("id,text\n1,great\n2,   \n", "--input-file {p} line 3: empty value in column 'text'"),
])
def test_a_missing_column_or_an_empty_cell_is_one_error_before_the_run_is_read(
        tmp_path, content, said, capsys):
    """The run directory does not exist: the error is the table's, so it came first."""
    path = write(tmp_path / "films.csv", content)
    code, out, err = call(capsys, "predict", tmp_path / "no-run", "--input-file", path,
                          "--text-column", "text")
    assert (code, out) == (2, "")
    assert err == f"attnlab: error: {said.format(p=path)}\n"


@pytest.mark.parametrize("cell", ["null", '["EU", "rejects"]'])
def test_a_null_or_list_cell_of_json_lines_is_named_by_its_line(tmp_path, cell, capsys):
    """A tagging set's `tokens` list is no text: refused, not joined in some way unsaid."""
    path = write(tmp_path / "films.jsonl", f'{{"text": "great"}}\n{{"text": {cell}}}\n')
    code, _, err = call(capsys, "predict", tmp_path / "no-run", "--input-file", path,
                        "--text-column", "text")
    assert code == 2
    assert err == (f"attnlab: error: --input-file {path} line 2: field 'text' must be a string "
                   f"or number, got {cell}\n")


NEEDS_FILE = ("{0} names a column of the table given as --input-file FILE; give --input-file "
              "with it, or drop it")


@pytest.mark.parametrize("argv, said", [
    (["predict", "{run}", "--input", "great", "--text-column", "text"],
     NEEDS_FILE.format("--text-column text")),
    (["generate", "{run}", "--prompt", "the", "--text-column", "text"],
     NEEDS_FILE.format("--text-column text")),
    (["translate", "{run}", "342", "--src-column", "source"],
     NEEDS_FILE.format("--src-column source")),
    (["predict", "{run}", "--input-file", "{txt}", "--text-column", "text"],
     "--text-column text: --input-file {txt} is not a table (.csv, .tsv, .tab, .jsonl, "
     ".ndjson, .parquet); drop --text-column to read its lines, one input each"),
    (["translate", "{run}", "--input-file", "-", "--src-column", "source"],
     "--src-column source: --input-file - (standard input) has no file type to read a table "
     "by; give the table's file"),
    (["predict", "{run}", "--input-file", "{csv}", "--text-column", " "],
     "--text-column is empty; give the name of the table's column of inputs"),
])
def test_the_column_flag_needs_a_table_given_as_input_file(tmp_path, argv, said, capsys):
    txt = write(tmp_path / "texts.txt", "great\n")
    csv = write(tmp_path / "films.csv", "text\ngreat\n")
    names = {"run": tmp_path / "no-run", "txt": txt, "csv": csv}
    code, out, err = call(capsys, *[a.format(**names) for a in argv])
    assert (code, out) == (2, "")
    assert err == f"attnlab: error: {said.format(**names)}\n"


def test_without_the_flag_a_table_is_read_as_lines_and_the_note_names_the_flag(tmp_path,
                                                                                capsys):
    path = write(tmp_path / "films.csv", "text,label\ngreat,pos\n")
    assert read_inputs(str(path))[0] == ["text,label", "great,pos"]
    assert capsys.readouterr().err.rstrip().endswith("for the texts of one column, give "
                                                     "--text-column NAME")
    assert read_inputs(str(path), flag="--src-column")[0] == ["text,label", "great,pos"]
    assert capsys.readouterr().err.rstrip().endswith("give --src-column NAME")


@pytest.mark.slow
def test_predict_on_a_column_gives_what_a_file_of_its_texts_gives(runs, tmp_path, capsys):
    run, _ = runs["classify"]
    texts = ["the film was great", "dull, and long", "a great great film, truly", "bad"]
    lines = write(tmp_path / "texts.txt", "\n".join(texts) + "\n")
    table = write(tmp_path / "films.csv", "id,review\n" + "".join(
        f'{i},"{t}"\n' for i, t in enumerate(texts)))
    code, expected, err = call(capsys, "predict", run, "--input-file", lines)
    assert code == 0, err
    code, out, err = call(capsys, "predict", run, "--input-file", table, "--text-column",
                          "review")
    assert code == 0, err
    assert out == expected and len(out.splitlines()) == len(texts)
    code, out, err = call(capsys, "predict", run, "--input-file", table, "--text-column",
                          "review", "--json")
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["input"] for r in records] == texts
    assert [r["prediction"] for r in records] == expected.splitlines()


@pytest.mark.slow
def test_translate_and_generate_read_a_column_too(runs, tmp_path, capsys):
    run, _ = runs["translate"]
    table = write(tmp_path / "numbers.jsonl", '{"source": "342", "target": "x"}\n'
                                              '{"source": 7, "target": "y"}\n')
    code, expected, err = call(capsys, "translate", run, "342", "7")
    assert code == 0, err
    code, out, err = call(capsys, "translate", run, "--input-file", table, "--src-column",
                          "source", "--json")
    assert code == 0, err
    assert [json.loads(line) for line in out.splitlines()] == [
        {"input": t, "translation": line} for t, line in zip(["342", "7"], expected.splitlines())]
    run, _ = runs["lm"]
    table = write(tmp_path / "prompts.tsv", "id\ttext\n1\tthe\n2\ta fox\n")
    code, out, err = call(capsys, "generate", run, "--input-file", table, "--text-column", "text",
                          "--greedy", "--max-new-tokens", "4", "--json")
    assert code == 0, err
    assert [json.loads(line)["prompt"] for line in out.splitlines()] == ["the", "a fox"]
