"""A tag user's held-out sentences that training has too: a --data file that repeats
sentences, whose random test and validation splits then hold sentences also trained on, and
``evaluate RUN --data FILE`` of the training file itself. Their scores are partly of trained
sentences; before, tag said nothing of it (classify and jets warn). Now the warning of a
--test file that shares sentences is given, in the same words, naming how many."""
import pytest

from attnlab.cli import main
from attnlab.runs import read_yaml
from attnlab.tasks.tag import TASKS
from attnlab.tasks.tag.data import load_splits

from .test_tag import TINY, capitalised, write_conll

TASK = TASKS["tag"]
ONE_STEP = ["--max-steps", "1", *TINY[2:]]


def _splits(out):
    return load_splits(TASK.typed(read_yaml(out / "config.yaml"), out))


def _shared_lines(splits, key):
    """The first lines of the sentences of split ``key`` that the training split has too."""
    trained = {tuple(w) for w in splits["train"].words}
    return [line for w, line in zip(splits[key].words, splits[key].lines)
            if tuple(w) in trained]


@pytest.mark.slow  # trains a run
def test_a_data_file_that_repeats_sentences_names_the_held_out_ones_trained_on(tmp_path, capsys):
    data = write_conll(tmp_path / "twice.conll", capitalised(30) * 2)
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["train", "tag", "--data", str(data), "--out", str(out), *ONE_STEP]) == 0
    err = capsys.readouterr().err.splitlines()
    splits = _splits(out)
    for key in ("val", "test"):
        shared = _shared_lines(splits, key)
        assert shared, key  # each half of the file is the other: a drawn sentence is trained
        expected = (f"warning: the {key} sentences of --data {data}: {len(shared)} of its "
                    f"{len(splits[key])} rows have an input that a training row has too "
                    f"(first: line {shared[0]}), so its scores are partly of inputs the model "
                    f"trained on")
        assert err.count(expected) == 1, err
    assert main(["evaluate", str(out)]) == 0  # the run's test split, re-drawn: said again
    assert expected in capsys.readouterr().err.splitlines()  # (test's)
    assert main(["train", "tag", "--out", str(out), "--resume", "--max-steps", "2"]) == 0
    assert "training row" not in capsys.readouterr().err  # said when the run starts, once


@pytest.mark.slow  # trains a run
def test_a_data_file_without_repeats_gets_no_warning(tmp_path, capsys):
    sentences = list({tuple(w): (w, t) for w, t in capitalised(60)}.values())
    data = write_conll(tmp_path / "once.conll", sentences)
    capsys.readouterr()
    assert main(["train", "tag", "--data", str(data), "--out", str(tmp_path / "run"),
                 *ONE_STEP]) == 0
    assert "training row" not in capsys.readouterr().err


@pytest.mark.slow  # trains a run
def test_evaluate_data_names_the_sentences_the_run_trained_on(tmp_path, capsys):
    sentences = list({tuple(w): (w, t) for w, t in capitalised(60)}.values())
    data = write_conll(tmp_path / "caps.conll", sentences)
    out = tmp_path / "run"
    assert main(["train", "tag", "--data", str(data), "--out", str(out), *ONE_STEP]) == 0
    train = _splits(out)["train"]
    capsys.readouterr()
    assert main(["evaluate", str(out), "--data", str(data)]) == 0
    first = min(train.lines)
    assert (f"warning: --data {data}: {len(train)} of its {len(sentences)} rows have an input "
            f"that a training row has too (first: line {first}), so its scores are partly of "
            f"inputs the model trained on") in capsys.readouterr().err.splitlines()

    fresh = write_conll(tmp_path / "fresh.conll", [(["Rome", "Rome", "river"] * 3,
                                                    ["B-X", "B-X", "O"] * 3)])
    assert main(["evaluate", str(out), "--data", str(fresh)]) == 0
    assert "training row" not in capsys.readouterr().err
