"""A .csv or .tsv of texts given to ``attnlab train lm --data`` was read whole, as text: its
header, commas, quotes and label column were trained on without a word, while ``attnlab
prepare`` refuses the same file. Both refuse it now in the same words, before the run
directory; a run that started on such a file resumes as it began."""
import pytest

from attnlab.cli import main

ROWS = "text,label\n" + "the film was great,pos\nthe plot was dull,neg\n" * 40


@pytest.mark.parametrize("suffix, text", [(".csv", ROWS), (".tsv", ROWS.replace(",", "\t"))])
def test_a_table_of_texts_is_refused_as_prepare_refuses_it(tmp_path, capsys, suffix, text):
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
    # prepare, the other way in, says the same of the file
    assert main(["prepare", str(data), "--out", str(tmp_path / "corpus")]) == 2
    said = capsys.readouterr().err.strip()
    assert f"{data} is a table ({suffix}), and prepare reads such a file whole" in said
    assert said.endswith(err[0][err[0].index("reads such a file whole"):])


def test_a_run_that_started_on_a_table_resumes_as_it_began(tmp_path):
    from attnlab.tasks.lm.checks import check_data

    data = tmp_path / "reviews.csv"
    data.write_text(ROWS)
    check_data({"data": str(data), "block_size": 8, "resume": True})  # no refusal
    with pytest.raises(Exception, match="is a table"):
        check_data({"data": str(data), "block_size": 8})


def test_the_same_bytes_named_txt_are_still_text(tmp_path):
    from attnlab.tasks.lm.checks import check_data

    data = tmp_path / "reviews.txt"
    data.write_text(ROWS)
    check_data({"data": str(data), "block_size": 8})  # no refusal
