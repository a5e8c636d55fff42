"""--keep-best and --patience inside the loop, on a small regression whose validation reports a
scripted ``val_acc`` (one value per validation, the count kept in a buffer so that a resumed
run carries on the script where the checkpoint left it):

- model.safetensors holds the weights of the best validation's step, not the last step's, and
  metrics.json says which step and value;
- --patience stops at the validation it should, saying so in one line and in metrics.json;
- an interrupted run resumed from its checkpoint keeps the best so far, and ends with the
  weights of the run that was never interrupted.
"""
import json

import pytest
import torch
from safetensors.torch import load_file

from attnlab.data.resumable import ResumableBatches
from attnlab.training import TaskModule, finish, fit
from attnlab.training.best import BestWatch

from .loop_probe import probe_loop


class _Scripted(torch.nn.Module):
    def __init__(self, script):
        super().__init__()
        self.linear, self.script = torch.nn.Linear(4, 1), script
        self.register_buffer("validations", torch.zeros((), dtype=torch.long))


class _Regression(TaskModule):
    def loss(self, batch):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.model.linear(x), y)
        if self.training:
            return loss, {}
        script = self.model.script
        value = script[min(int(self.model.validations), len(script) - 1)]
        self.model.validations += 1
        return loss, {"acc": torch.tensor(float(value))}


def _data():
    torch.manual_seed(0)
    x, y = torch.randn(64, 4), torch.randn(64, 1)
    return [(x[i:i + 8], y[i:i + 8]) for i in range(0, 64, 8)], [(x[:8], y[:8])]


def _cfg(**kw):
    from attnlab.tasks import get_task

    return get_task("reverse").config(**{"lr": 1e-2, "warmup": 2, "model_dim": 4,
                                         "checkpoint_every": 100, "monitor": "val_acc", **kw})


class _Weights:
    """The model's weights after each step: {step: state dict}."""

    def __init__(self):
        self.at = {}

    def on_train_batch_end(self, loop):
        self.at[loop.step] = {k: v.detach().clone() for k, v in loop.module.model.state_dict().items()}


def _setup(script, cfg, max_steps=20):
    """(training batches, validation batches, module): the same each time."""
    train, val = _data()  # seeds the generator: the model's initial weights are the same
    # resumable: a resumed run goes on with the batch after the checkpoint's
    batches = ResumableBatches(lambda epoch, start: train[start:], length=len(train))
    return batches, val, _Regression(_Scripted(script), cfg, max_steps)


def _train(tmp_path, script, monkeypatch, *, max_steps=20, **settings):
    cfg = _cfg(**settings)
    train, val, module = _setup(script, cfg, max_steps)
    weights = _Weights()
    with monkeypatch.context() as m:
        probe_loop(m, weights)
        result = fit(module, train, val, cfg, tmp_path, max_steps=max_steps, val_check_interval=2)
    metrics = finish(cfg, tmp_path, module.model, {}, result, quiet=True)
    return result, metrics, weights.at


def _equal(saved, expected):
    """The same trained weights (the script's counter left out: it counts validations)."""
    names = saved.keys() - {"validations"}
    return names == expected.keys() - {"validations"} and all(torch.equal(saved[k], expected[k])
                                                              for k in names)


def test_keep_best_saves_the_best_validations_weights_and_names_its_step(tmp_path, monkeypatch):
    # validations at steps 2, 4, 6, ...: the best, 0.9, at the second (step 4)
    result, metrics, at = _train(tmp_path, [0.1, 0.9, 0.2, 0.5, 0.3], monkeypatch,
                                 keep_best=True)
    saved = load_file(tmp_path / "model.safetensors")
    assert _equal(saved, at[4]) and not _equal(saved, at[20])
    assert (metrics["best_step"], metrics["best_metric"], metrics["best_value"]) == (4, "val_acc", 0.9)
    written = json.loads((tmp_path / "metrics.json").read_text())
    # the val_ numbers are those of the weights saved: the best validation's
    assert written["best_step"] == 4 and written["val_acc"] == 0.9
    assert result.steps == 20 and "stopped_early" not in written
    # the last step stays in the checkpoint, which --resume continues from
    last = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["global_step"] == 20
    assert torch.equal(last["state_dict"]["model.linear.weight"], at[20]["linear.weight"])


def test_without_keep_best_the_last_steps_weights_are_saved(tmp_path, monkeypatch):
    _, metrics, at = _train(tmp_path, [0.1, 0.9, 0.2], monkeypatch)
    assert _equal(load_file(tmp_path / "model.safetensors"), at[20])
    assert "best_step" not in metrics and metrics["val_acc"] == 0.2  # the last validation's


@pytest.mark.parametrize("script, settings, stops_at, best", [
    ([0.5, 0.6, 0.6, 0.55, 0.7], {"patience": 2}, 8, "best 0.6 at step 4"),
    # 0.52 and 0.54 gain less than --min-delta 0.05 on 0.5: the wait goes on, though each is
    # the best so far
    ([0.5, 0.52, 0.54, 0.9], {"patience": 2, "min_delta": 0.05}, 6, "best 0.54 at step 6"),
    # 0.03 a validation: more than 0.05 on the wait's start every second one, so it goes on
    # (transformers' EarlyStoppingCallback, which compares with the best so far, would stop)
    ([0.5 + 0.03 * i for i in range(10)], {"patience": 2, "min_delta": 0.05}, None, None),
    ([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0], {"patience": 1}, None, None),
])
def test_patience_stops_after_that_many_validations_without_improvement(
        tmp_path, monkeypatch, capsys, script, settings, stops_at, best):
    result, metrics, _ = _train(tmp_path, script, monkeypatch, **settings)
    err = capsys.readouterr().err
    if stops_at is None:  # it improved at every validation: the whole budget
        assert result.steps == 20 and "stopped early" not in err
        assert "stopped_early" not in metrics
        return
    assert result.steps == stops_at
    line = [x for x in err.splitlines() if x.startswith("stopped early")]
    assert len(line) == 1 and line[0].startswith(f"stopped early at step {stops_at}/20: val_acc "
                                                 f"did not improve")
    assert line[0].endswith(f"for 2 validations ({best})")
    assert metrics["stopped_early"] == line[0].split(": ", 1)[1]
    state = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert state["global_step"] == stops_at


class _Crash(Exception):
    pass


def test_the_best_survives_an_interrupted_and_resumed_run(tmp_path, monkeypatch):
    """The best (step 4) is in the checkpoint of step 6; the run dies after step 8 and resumes
    from step 6: it ends with step 4's weights, as the run that never died, and its last
    checkpoint equals that run's (the resume is exact)."""
    script = [0.1, 0.9, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85]
    whole = tmp_path / "whole"
    _, expected, at = _train(whole, script, monkeypatch, keep_best=True, patience=8,
                             checkpoint_every=6)
    assert expected["best_step"] == 4

    out = tmp_path / "resumed"

    class CrashAt:
        def on_train_batch_end(self, loop):
            if loop.step == 8:
                raise _Crash

    cfg = _cfg(keep_best=True, patience=8, checkpoint_every=6)
    train, val, module = _setup(script, cfg)
    with monkeypatch.context() as m:
        probe_loop(m, CrashAt())
        with pytest.raises(_Crash):
            fit(module, train, val, cfg, out, max_steps=20, val_check_interval=2)
    kept = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    assert kept["global_step"] == 6 and kept["best"]["step"] == 4

    cfg = _cfg(keep_best=True, patience=8, checkpoint_every=6, resume=True)
    train, val, module = _setup(script, cfg)
    result = fit(module, train, val, cfg, out, max_steps=20, val_check_interval=2)
    metrics = finish(cfg, out, module.model, {}, result, quiet=True)
    assert result.resumed_from is not None
    assert (metrics["best_step"], metrics["best_value"]) == (4, 0.9)
    assert _equal(load_file(out / "model.safetensors"), at[4])
    assert _equal(load_file(out / "model.safetensors"), load_file(whole / "model.safetensors"))
    resumed = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    uninterrupted = torch.load(whole / "checkpoints" / "last.ckpt", weights_only=True)
    for name, tensor in uninterrupted["state_dict"].items():
        assert torch.equal(resumed["state_dict"][name], tensor), name
    assert resumed["best"]["waited"] == uninterrupted["best"]["waited"] == 8


def test_a_lower_is_better_metric_improves_downwards():
    watch = BestWatch("val_loss", min_delta=0.1)
    seen = [(watch.see(s, {"val_loss": v}), watch.waited)
            for s, v in [(1, 1.0), (2, 0.95), (3, 0.8), (4, float("nan")), (5, 1.2)]]
    # 0.95 is the best so far but not 0.1 below 1.0; 0.8 is both; NaN and 1.2 are neither
    assert seen == [(True, 0), (True, 1), (True, 0), (False, 1), (False, 2)]
    assert watch.summary() == {"best_step": 3, "best_metric": "val_loss", "best_value": 0.8}


def test_keep_best_keeps_a_gain_smaller_than_min_delta(tmp_path, monkeypatch):
    """--min-delta decides when the wait of --patience ends; the weights kept are the best
    validation's whatever its gain, as the Trainer's and Lightning's best checkpoint."""
    _, metrics, at = _train(tmp_path, [0.5, 0.52, 0.1], monkeypatch, keep_best=True,
                            min_delta=0.05)
    assert (metrics["best_step"], metrics["best_value"]) == (4, 0.52)
    assert _equal(load_file(tmp_path / "model.safetensors"), at[4])


def test_a_validation_without_the_declared_metric_is_attnlabs_fault_and_says_so():
    with pytest.raises(RuntimeError, match="computed no val_f1 .*computed val_acc, val_loss"):
        BestWatch("val_f1").see(10, {"val_loss": 1.0, "val_acc": 0.5})


def test_a_watch_measured_the_older_way_is_named_and_forgotten_on_resume():
    """A watch saved before validation numbers were per target of the whole split (no
    "measure") holds a mean of per-batch means: a resumed translate run's first plain,
    per-token val_loss would always "improve" on a label-smoothed best. It is forgotten,
    with a note naming it; a watch of today's measure is kept."""
    old = {"metric": "val_loss", "step": 4, "value": 0.5, "metrics": {"val_loss": 0.5},
           "waited": 1, "weights": None}
    watch = BestWatch("val_loss", patience=2)
    note = watch.load_state_dict(old, "last.ckpt")
    assert note == ("--resume: last.ckpt holds its best validation (val_loss 0.5 at step 4) as "
                    "an older attnlab measured it, a mean of per-batch means; it is not "
                    "compared with this one's numbers: the best is chosen again from here")
    assert (watch.value, watch.waited) == (None, 0)
    assert watch.see(6, {"val_loss": 0.9})  # the first validation after the resume is the best
    kept = BestWatch("val_loss", patience=2)
    kept.see(4, {"val_loss": 0.5})
    again = BestWatch("val_loss", patience=2)
    assert again.load_state_dict(kept.state_dict(), "last.ckpt") is None
    assert again.value == 0.5 and not again.see(6, {"val_loss": 0.9})
