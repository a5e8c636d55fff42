"""A .csv or .tsv of texts given to ``attnlab train lm --data`` was read whole, as text: its
header, commas, quotes and label column were trained on without a word. It is refused before
the run directory, naming the ``attnlab prepare`` command that reads its text column (which
works as said); a run that started on such a file resumes as it began."""
import shlex

import pytest

from attnlab.cli import main

ROWS = "text,label\n" + "the film was great,pos\nthe plot was dull,neg\n" * 40


@pytest.mark.parametrize("suffix, text", [(".csv", ROWS), (".tsv", ROWS.replace(",", "\t"))])
def test_a_table_of_texts_is_refused_naming_the_prepare_that_reads_it(tmp_path, capsys, suffix,
                                                                       text):
    data, out = tmp_path / f"reviews{suffix}", tmp_path / "run"
    data.write_text(text)
    assert main(["train", "lm", "--data", str(data), "--out", str(out), "--max-steps", "1",
                 "--threads", "1", "--block-size", "8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"attnlab: error: --data {data} is a table ({suffix}), and train lm reads such a file "
        f"whole, as text")
    assert err[0].endswith("or rename it .txt to read it whole")
    assert not out.exists()
    # the command it names reads the file's texts
    command = err[0][err[0].index("(attnlab prepare ") + 1:err[0].index(", then give")]
    assert command == f"attnlab prepare {data} --text-column NAME --out CORPUS"
    argv = shlex.split(command.replace("NAME", "text").replace("CORPUS", str(tmp_path / "c")))
    assert main(argv[1:]) == 0
    assert "prepared" in capsys.readouterr().out


def test_a_run_that_started_on_a_table_resumes_as_it_began(tmp_path):
    from attnlab.tasks.lm.checks import check_data

    data = tmp_path / "reviews.csv"
    data.write_text(ROWS)
    check_data({"data": str(data), "block_size": 8, "resume": True})  # no refusal
    with pytest.raises(Exception, match="is a table"):
        check_data({"data": str(data), "block_size": 8})


@pytest.mark.parametrize("init", [None, "tiny-llama"])
def test_a_small_table_is_told_it_is_a_table_before_its_size(tmp_path, init):
    """A 50-byte .csv under --block-size 64 was told it had too few bytes; given more, it was
    then told it was a table. Told first now, with --init's tokenizer in the prepare named."""
    from attnlab.errors import UsageError
    from attnlab.tasks.lm.checks import check_data

    data = tmp_path / "reviews.csv"
    data.write_text(ROWS[:50])
    with pytest.raises(UsageError) as e:
        check_data({"data": str(data), "block_size": 64, "init": init})
    tokenizer = f" --tokenizer {init}" if init else ""
    assert "is a table (.csv)" in str(e.value) and "bytes are too few" not in str(e.value)
    assert f"--text-column NAME{tokenizer} --out CORPUS" in str(e.value)


def test_the_same_bytes_named_txt_are_still_text(tmp_path):
    from attnlab.tasks.lm.checks import check_data

    data = tmp_path / "reviews.txt"
    data.write_text(ROWS)
    check_data({"data": str(data), "block_size": 8})  # no refusal


@pytest.mark.slow
def test_a_jsonl_corpus_prepares_and_trains(tmp_path, capsys):
    import json

    data = tmp_path / "corpus.jsonl"
    data.write_text("".join(json.dumps({"id": i, "text": f"the film number {i} was great"})
                            + "\n" for i in range(60)))
    assert main(["prepare", str(data), "--text-column", "text", "--out",
                 str(tmp_path / "c")]) == 0
    assert main(["train", "lm", "--data", str(tmp_path / "c"), "--out", str(tmp_path / "run"),
                 "--max-steps", "2", "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
                 "--dim-feedforward", "32", "--block-size", "8", "--batch-size", "4",
                 "--val-batches", "1", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "lm run:" in out and "val_loss" in out
    assert (tmp_path / "run" / "config.yaml").is_file()
