"""A new user's held-out file that holds training rows (``--data train.csv --test
train.csv``, or a test file cut from an older copy of the data): the test scores are then
partly of rows the model trained on, and nothing said so. ``attnlab train`` now says it in
one warning line naming the file, how many rows and the first one; a disjoint file gets none."""
import pytest

from attnlab.cli import main
from tests.tasks.test_tag import TINY, capitalised, write_conll

SMALL = ["--max-steps", "1", "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
         "--threads", "1"]


def _csv(path, rows):
    path.write_text("text,label\n" + "".join(f"{t},{lab}\n" for t, lab in rows))
    return path


@pytest.mark.slow  # trains a run
@pytest.mark.parametrize("test_rows, expected", [
    (None, "20 of its 20 rows have an input that a training row has too (first: line 2)"),
    ([("brand new", "a"), ("text 2", "a"), ("text 3", "b")],
     "2 of its 3 rows have an input that a training row has too (first: line 3)"),
])
def test_a_test_file_sharing_training_texts_is_named(tmp_path, capsys, test_rows, expected):
    data = _csv(tmp_path / "d.csv", [(f"text {i}", "ab"[i % 2]) for i in range(20)])
    val = _csv(tmp_path / "v.csv", [("unseen", "a"), ("unheard", "b")])
    test = data if test_rows is None else _csv(tmp_path / "t.csv", test_rows)
    capsys.readouterr()
    assert main(["train", "classify", "--data", str(data), "--test", str(test), "--val",
                 str(val), "--out", str(tmp_path / "run"), *SMALL]) == 0
    warning = [line for line in capsys.readouterr().err.splitlines() if "training row" in line]
    assert len(warning) == 1, warning
    assert warning[0].startswith(f"warning: --test {test}: {expected}"), warning


@pytest.mark.slow  # trains a run
def test_a_disjoint_test_file_gets_no_warning(tmp_path, capsys):
    data = _csv(tmp_path / "d.csv", [(f"text {i}", "ab"[i % 2]) for i in range(20)])
    test = _csv(tmp_path / "t.csv", [("other", "a"), ("another", "b")])
    capsys.readouterr()
    assert main(["train", "classify", "--data", str(data), "--test", str(test),
                 "--out", str(tmp_path / "run"), *SMALL]) == 0
    assert "training row" not in capsys.readouterr().err


@pytest.mark.slow  # trains a run
def test_a_tag_test_file_that_is_the_training_file_is_named(tmp_path, capsys):
    data = write_conll(tmp_path / "d.conll", capitalised(20))
    capsys.readouterr()
    assert main(["train", "tag", "--data", str(data), "--test", str(data), "--out",
                 str(tmp_path / "run"), *TINY[:1], "1", *TINY[2:]]) == 0
    err = capsys.readouterr().err
    assert f"warning: --test {data}: " in err and "have an input that a training row" in err
