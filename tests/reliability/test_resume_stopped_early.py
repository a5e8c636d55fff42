"""A run that stopped early (--patience) and was interrupted before it wrote metrics.json
resumes to the run that never stopped: it stays stopped at its step, it does not train on."""
import json
import os
import signal

import pytest
import torch
from safetensors.torch import load_file

from attnlab.cli import main
from attnlab.training import engine

from .conftest import TINY_REVERSE

pytestmark = pytest.mark.slow  # trains runs

# --min-delta 10: no validation gains that much on the first, so the second (step 20 of 30)
# ends the wait of --patience 1
STOPS = [*TINY_REVERSE, "--patience", "1", "--min-delta", "10", "--dropout", "0.1",
         "--threads", "1"]
STOP_STEP = 20


class _Killed(Exception):
    """Stands in for a kill."""


def _ctrl_c_during_the_last_validation(monkeypatch):
    validate = engine.Loop.validate

    def validating(loop):
        if loop.step == STOP_STEP:
            os.kill(os.getpid(), signal.SIGINT)
        return validate(loop)

    monkeypatch.setattr(engine.Loop, "validate", validating)


def _killed_after_the_last_checkpoint(monkeypatch):
    """Killed while the test split is scored: the checkpoint of the stop is written."""
    save = engine.Loop.save

    def saving(loop):
        save(loop)
        if loop.stopped is not None:
            raise _Killed

    monkeypatch.setattr(engine.Loop, "save", saving)


@pytest.mark.parametrize("interrupt", [_ctrl_c_during_the_last_validation,
                                       _killed_after_the_last_checkpoint])
def test_a_run_interrupted_after_its_early_stop_resumes_stopped(tmp_path, monkeypatch, capsys,
                                                                 interrupt):
    whole = tmp_path / "whole"
    assert main(["train", "reverse", "--out", str(whole), *STOPS]) == 0
    expected = json.loads((whole / "metrics.json").read_text())
    assert expected["steps"] == STOP_STEP and "stopped_early" in expected

    out = tmp_path / "run"
    with monkeypatch.context() as m:
        interrupt(m)
        try:
            assert main(["train", "reverse", "--out", str(out), *STOPS]) == 130
        except _Killed:
            pass
    assert not (out / "metrics.json").exists()
    saved = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    assert saved == STOP_STEP
    capsys.readouterr()

    assert main(["train", "reverse", "--out", str(out), "--resume"]) == 0
    assert f"stopped early at step {STOP_STEP}/30" in capsys.readouterr().err
    metrics = json.loads((out / "metrics.json").read_text())
    metrics.pop("train_seconds"), expected.pop("train_seconds")
    assert metrics == expected  # steps, stopped_early, the val_* and test_* of the weights
    weights = load_file(out / "model.safetensors")
    uninterrupted = load_file(whole / "model.safetensors")
    for name in uninterrupted:
        torch.testing.assert_close(weights[name], uninterrupted[name], rtol=1e-5, atol=1e-6)


def test_a_lowered_budget_still_above_the_stop_resumes_stopped(tmp_path, monkeypatch, capsys):
    """Killed while its test split was scored, resumed with --max-steps 25 (of 30): it trained
    on from its stop at 20 to 25, where the run that was not killed stopped at 20."""
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        _killed_after_the_last_checkpoint(m)
        with pytest.raises(_Killed):
            main(["train", "reverse", "--out", str(out), *STOPS])
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(out), "--resume", "--max-steps", "25"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == STOP_STEP and "stopped_early" in metrics, metrics
