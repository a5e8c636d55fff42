"""``--resume --config RUN/config.yaml``: the run's own config.yaml (or a copy of it) records
every setting, the precision among them, and asks for none of them. A GPU run of 16-mixed
resumed so on a CPU continues as bf16-mixed, as the same --resume without --config does; it
was refused, telling the user to drop a precision they never gave. A --config file written
with a precision is still asked for, and refused so (test_resume_precision.py)."""
import shutil

import pytest

from attnlab.cli import main
from attnlab.runs import read_json
from tests.cli.test_resume_precision import _a_gpu_run_of_16_mixed


@pytest.mark.slow
@pytest.mark.parametrize("given", ["itself", "a copy"])
def test_the_runs_own_config_asks_for_no_precision(tmp_path, capsys, given):
    run, flags = _a_gpu_run_of_16_mixed(tmp_path)
    config = run / "config.yaml"
    if given == "a copy":
        config = shutil.copy(config, tmp_path / "settings.yaml")
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(run), "--max-steps", "4", *flags,
                 "--config", str(config), "--resume"]) == 0, capsys.readouterr().err
    assert "running bf16-mixed" in capsys.readouterr().err  # the note without --config
    assert read_json(run / "metrics.json")["steps"] == 4
