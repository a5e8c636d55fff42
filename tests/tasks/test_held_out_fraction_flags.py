"""A new user's ``--val-fraction 0.3 --val v.csv``: the validation split is the file, so the
fraction holds nothing out; it was accepted, recorded in config.yaml and not used. Refused in
one line naming it, before the run directory is written (classify and tag); the default
fraction beside a --val file stays fine."""
import pytest

from attnlab.cli import main
from tests.tasks.test_tag import capitalised, write_conll


def _files(tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("text,label\n" + "".join(f"text {i},{'ab'[i % 2]}\n" for i in range(20)))
    return {"classify": csv, "tag": write_conll(tmp_path / "d.conll", capitalised(20))}


@pytest.mark.parametrize("task", ["classify", "tag"])
@pytest.mark.parametrize("split", ["val", "test"])
def test_a_fraction_given_with_its_own_file_is_refused(tmp_path, capsys, task, split):
    data, out = _files(tmp_path)[task], tmp_path / "run"
    capsys.readouterr()
    code = main(["train", task, "--data", str(data), f"--{split}", str(data),
                 f"--{split}-fraction", "0.3", "--out", str(out), "--max-steps", "1"])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith(f"attnlab: error: --{split}-fraction: not with --{split} FILE"), err
    assert len(err.splitlines()) == 1 and not out.exists()
