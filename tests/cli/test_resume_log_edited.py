"""``--resume`` of a run whose ``logs/metrics.csv`` was edited by hand: a step that is no number
is named in one line (the file, the line, the value), exit 2 before any step is trained, where
it ended in a ``ValueError`` traceback."""
import shutil

import pytest

from attnlab.cli import main

from ..reliability.conftest import TINY_REVERSE


@pytest.mark.slow  # resumes a run
def test_a_step_that_is_no_number_is_named(reverse_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(reverse_run, run)
    log = run / "logs" / "metrics.csv"
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    step = lines[2].split(",", 1)[0]
    lines[2] = "twenty" + lines[2][len(step):]  # a hand's edit
    log.write_text("".join(lines), encoding="utf-8")
    edited = log.read_bytes()
    capsys.readouterr()
    argv = ["train", "reverse", "--out", str(run), *TINY_REVERSE, "--max-steps", "40", "--resume"]
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == (f"attnlab: error: --resume: {log}: line 3: step 'twenty' is not a number; "
                       f"correct that line, or remove it, and resume again"), err
    assert not any(line.startswith("step ") for line in err), err  # no step trained
    assert log.read_bytes() == edited
