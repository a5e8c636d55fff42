"""A tag run's held-out sentences without any entity (every tag O): their entity F1, precision
and recall are 0 whatever the model tags (none of no entity found reads as 0). Before, a
--val file so made gave val_f1 0 at every validation without a word, and --keep-best --monitor
val_f1 kept the first validation's weights as the "best"; evaluate of such a file printed
test_f1 0 as if the model had missed every entity. Now each is said, and --keep-best or
--patience on an entity score of such a validation split is refused."""
import json

import pytest

from attnlab.cli import main

from .test_tag import TINY, capitalised, write_conll

ONE_STEP = ["--max-steps", "1", *TINY[2:]]


def _files(tmp_path):
    data = write_conll(tmp_path / "d.conll", capitalised(40))
    plain = write_conll(tmp_path / "plain.conll", [(["the", "river"], ["O", "O"]),
                                                   (["a", "city"], ["O", "O"])])
    return data, plain


@pytest.mark.slow  # trains a run
def test_a_validation_file_without_an_entity_is_said(tmp_path, capsys):
    data, plain = _files(tmp_path)
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["train", "tag", "--data", str(data), "--val", str(plain), "--test", str(plain),
                 "--out", str(out), *ONE_STEP]) == 0
    err = capsys.readouterr().err.splitlines()
    for key in ("val", "test"):
        assert (f"warning: --{key} {plain}: no entity (every tag is 'O'), so {key}_f1, "
                f"{key}_precision and {key}_recall are 0 whatever the model tags" in err), err

    assert main(["evaluate", str(out)]) == 0  # the run's test split
    assert (f"warning: --test {plain}: no entity (every tag is 'O'), so test_f1, "
            f"test_precision and test_recall are 0 whatever the model tags"
            in capsys.readouterr().err.splitlines())

    assert main(["evaluate", str(out), "--data", str(plain)]) == 0
    out_, err = capsys.readouterr()
    assert json.loads(out_)["test_f1"] == 0.0
    assert (f"warning: --data {plain}: no entity (every tag is 'O'), so test_f1, "
            f"test_precision and test_recall are 0 whatever the model tags" in err.splitlines())


@pytest.mark.slow  # the CLI, in process
@pytest.mark.parametrize("flags", [["--keep-best"], ["--patience", "2"]])
def test_keep_best_on_val_f1_of_a_validation_without_an_entity_is_refused(tmp_path, capsys,
                                                                           flags):
    named = " ".join(flags)
    data, plain = _files(tmp_path)
    out = tmp_path / "run"
    assert main(["train", "tag", "--data", str(data), "--val", str(plain), "--out", str(out),
                 "--monitor", "val_f1", *flags, *ONE_STEP]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"attnlab: error: --monitor val_f1: --val {plain}: no entity (every tag "
                   f"is 'O'), so val_f1 is 0 at every validation and {named} would compare "
                   f"nothing; give a --val FILE with entities, or --monitor val_loss"], err
    assert not out.exists()


@pytest.mark.slow  # trains a run
def test_a_validation_file_with_an_entity_gets_no_warning(tmp_path, capsys):
    data, _ = _files(tmp_path)
    val = write_conll(tmp_path / "v.conll", [(["Rome", "river"], ["B-X", "O"])])
    capsys.readouterr()
    assert main(["train", "tag", "--data", str(data), "--val", str(val), "--out",
                 str(tmp_path / "run"), "--monitor", "val_f1", "--keep-best", *ONE_STEP]) == 0
    assert "no entity" not in capsys.readouterr().err
