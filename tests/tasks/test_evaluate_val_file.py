"""`attnlab evaluate DIR` refuses a data file that changed since training only when the test
rows come from it: no test row depends on a `--val FILE` (classify, tag and jets read one)."""
import pytest

from attnlab.cli import main
from attnlab.tasks.jets.data import write_jets
from tests.jets.test_task import synthetic_jets
from tests.tasks.test_classify import write_csv
from tests.tasks.test_tag import capitalised, write_conll

SMALL = ["--max-steps", "5", "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
         "--dim-feedforward", "32", "--threads", "1"]


def _classify(tmp_path):
    data, val = write_csv(tmp_path / "d.csv", n=120), write_csv(tmp_path / "v.csv", n=30, seed=1)
    flags = ["--text-column", "review", "--label-column", "sentiment"]
    return data, val, flags, lambda: _append(val, "999,an extra review,pos\n")


def _tag(tmp_path):
    data = write_conll(tmp_path / "d.conll", capitalised(60))
    val = write_conll(tmp_path / "v.conll", capitalised(10, seed=1))
    return data, val, [], lambda: _append(val, "Ann NN B-X\n\n")


def _jets(tmp_path):
    data, val = tmp_path / "d.h5", tmp_path / "v.h5"
    write_jets(data, *synthetic_jets(40))
    write_jets(val, *synthetic_jets(10, seed=1))
    return data, val, ["--max-constituents", "30"], lambda: write_jets(
        val, *synthetic_jets(12, seed=2))


def _append(path, text):
    with open(path, "a") as f:
        f.write(text)


@pytest.mark.slow
@pytest.mark.parametrize("task, files", [("classify", _classify), ("tag", _tag),
                                         ("jets", _jets)])
def test_evaluate_does_not_refuse_a_val_file_that_changed_since(task, files, tmp_path, capsys):
    """evaluate refused a run whose val file was edited (or removed) since, saying the test
    split drawn again would not be the held-out rows."""
    data, val, flags, change = files(tmp_path)
    run = tmp_path / "run"
    assert main(["train", task, "--data", str(data), "--val", str(val), "--out", str(run),
                 *flags, *SMALL]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(run)]) == 0
    before = capsys.readouterr().out
    change()
    assert main(["evaluate", str(run)]) == 0
    assert capsys.readouterr().out == before
    val.unlink()
    assert main(["evaluate", str(run)]) == 0
    assert capsys.readouterr().out == before
