"""``--resume --config FILE``: a FILE that repeats the run's precision (the run's own
config.yaml, a copy of it with max_steps raised, a file of that one line) asks for no
precision. A GPU run of 16-mixed resumed so on a CPU continues as bf16-mixed, as the same
--resume without --config does; it was refused, telling the user to drop a precision they never
gave (a copy was let through only unchanged). A --config file with another precision, or
--precision on the command line, is still asked for (test_resume_precision.py)."""
import shutil

import pytest

from attnlab.cli import main
from attnlab.runs import read_json, read_yaml, write_yaml
from tests.cli.test_resume_precision import _a_gpu_run_of_16_mixed


@pytest.mark.slow
@pytest.mark.parametrize("given", ["itself", "a copy", "a copy with max_steps raised",
                                   "the precision alone"])
def test_the_runs_own_precision_in_a_config_asks_for_none(tmp_path, capsys, given):
    run, flags = _a_gpu_run_of_16_mixed(tmp_path)
    config, budget = run / "config.yaml", ["--max-steps", "4"]
    if given == "a copy":
        config = shutil.copy(config, tmp_path / "settings.yaml")
    elif given == "a copy with max_steps raised":
        config, budget = tmp_path / "settings.yaml", []
        write_yaml(config, {**read_yaml(run / "config.yaml"), "max_steps": 4})
    elif given == "the precision alone":
        config = tmp_path / "settings.yaml"
        write_yaml(config, {"precision": "16-mixed"})
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(run), *budget, *flags,
                 "--config", str(config), "--resume"]) == 0, capsys.readouterr().err
    assert "running bf16-mixed" in capsys.readouterr().err  # the note without --config
    assert read_json(run / "metrics.json")["steps"] == 4
