"""A new user's sets: ``--max-len`` with ``--set-column`` was accepted, recorded in config.yaml
and ignored (every element of a set is read: there are no positions to cut at). Refused in one
line before the run directory is written, as the other settings sets do not use are."""
from attnlab.cli import main


def test_max_len_with_set_column_is_refused_naming_it(tmp_path, capsys):
    data = tmp_path / "clouds.csv"
    data.write_text("cloud,side,x\n" + "".join(f"c{i % 40},{'lr'[i % 2]},{i}\n"
                                                for i in range(120)))
    out = tmp_path / "run"
    capsys.readouterr()
    code = main(["train", "classify", "--data", str(data), "--set-column", "cloud",
                 "--label-column", "side", "--max-len", "2", "--max-steps", "1",
                 "--threads", "1", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("attnlab: error: --max-len"), err
    assert "--set-column" in err and not out.exists()
