"""``--resume`` of a run whose ``logs/metrics.csv`` was edited by hand: a step that is no whole
number is named in one line (the file, the line, the value), exit 2 before anything is written,
where it ended in a ``ValueError`` traceback, a ``nan`` or ``inf`` step's row was dropped in
silence, and each refused try left another copy of the log (``metrics.partN.csv``)."""
import shutil

import pytest

from attnlab.cli import main

from ..reliability.conftest import TINY_REVERSE


def _edited(reverse_run, tmp_path, step):
    """A copy of ``reverse_run`` whose log's second row has the step ``step``."""
    run = tmp_path / "run"
    shutil.copytree(reverse_run, run)
    log = run / "logs" / "metrics.csv"
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = step + lines[2][len(lines[2].split(",", 1)[0]):]  # a hand's edit
    log.write_text("".join(lines), encoding="utf-8")
    return run, log


@pytest.mark.slow  # resumes a run
@pytest.mark.parametrize("step", ["twenty", "nan", "inf", "2.5"])
def test_a_step_that_is_no_whole_number_is_named_and_nothing_is_written(reverse_run, tmp_path,
                                                                        capsys, step):
    run, log = _edited(reverse_run, tmp_path, step)
    edited = log.read_bytes()
    before = sorted(p.name for p in log.parent.iterdir())
    capsys.readouterr()
    argv = ["train", "reverse", "--out", str(run), *TINY_REVERSE, "--max-steps", "40", "--resume"]
    for _ in range(2):  # a retry, as refused, adds no copy of the log either
        assert main(argv) == 2
        err = capsys.readouterr().err.splitlines()
        assert err == [f"attnlab: error: --resume: {log} line 3: step {step!r} is not a whole "
                       f"number; correct that line, or remove it, and resume again"], err
        assert sorted(p.name for p in log.parent.iterdir()) == before
        assert log.read_bytes() == edited
