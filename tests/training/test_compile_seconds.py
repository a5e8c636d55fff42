"""``--compile`` compiles in the run's first step: that time is recorded apart
(``compile_seconds``), not in ``train_seconds``, whose throughput a user compares with an
eager run's; and metrics.json says how the run trained (``precision``, ``compile``), which
only config.yaml said."""
import time

import pytest
import torch

from attnlab.cli import main
from attnlab.runs import read_json
from attnlab.training import engine
from attnlab.training.clock import TrainClock

TINY = ["--max-steps", "3", "--train-size", "32", "--val-size", "8", "--test-size", "8",
        "--model-dim", "8", "--num-heads", "1", "--num-layers", "1", "--batch-size", "8",
        "--threads", "1"]


@pytest.mark.slow
@pytest.mark.parametrize("compiled", [True, False])
def test_compile_time_is_recorded_apart_from_train_seconds(compiled, tmp_path, monkeypatch):
    """The model's compile is a no-op here, and the first step is made to last 1000 s more on
    the loop's clock, as compiling a real model makes it last (minutes on a loaded CPU)."""
    _slow_steps(monkeypatch, lambda loop: loop.step == 0)
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), *TINY,
                 *(["--compile"] if compiled else [])]) == 0
    metrics = read_json(out / "metrics.json")
    assert metrics["precision"] == "32" and metrics["compile"] is compiled
    if compiled:
        assert metrics["compile_seconds"] >= 1000 > metrics["train_seconds"]
    else:
        assert "compile_seconds" not in metrics and metrics["train_seconds"] >= 1000


@pytest.mark.slow
@pytest.mark.parametrize("old_checkpoint", [False, True])
def test_compile_time_adds_up_across_resume(old_checkpoint, tmp_path, monkeypatch):
    """Each process's compiling first step is made to last 1000 s more: a run compiled, then
    resumed and compiled again, compiled for 2000 s, as its train_seconds add up; from a
    checkpoint saved before compile_seconds was kept, for the 1000 s of the resumed process."""
    _slow_steps(monkeypatch, lambda loop: loop.to_compile)
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), *TINY, "--compile"]) == 0
    if old_checkpoint:
        last = out / "checkpoints" / "last.ckpt"
        state = torch.load(last, weights_only=True)
        del state["compile_seconds"]
        torch.save(state, last)
    assert main(["train", "reverse", "--out", str(out), *TINY, "--compile", "--resume",
                 "--max-steps", "5"]) == 0
    metrics = read_json(out / "metrics.json")
    assert metrics["steps"] == 5 and metrics["train_seconds"] < 1000
    compiled = 1000 if old_checkpoint else 2000
    assert compiled <= metrics["compile_seconds"] < compiled + 1000


def _slow_steps(monkeypatch, slow):
    """Steps for which ``slow(loop)`` holds last 1000 s more, as the run's clock sees them
    (compiling is faked: ``Module.compile`` does nothing)."""
    waited = [0.0]
    step = engine.Loop.train_step

    def slowed(loop, *batches):
        if slow(loop):
            waited[0] += 1000.0
        return step(loop, *batches)

    monkeypatch.setattr(torch.nn.Module, "compile", lambda module, **options: None)
    monkeypatch.setattr(engine.Loop, "train_step", slowed)
    monkeypatch.setattr(engine, "TrainClock", lambda *before, **kw: TrainClock(
        *before, **kw, now=lambda: time.perf_counter() + waited[0]))
