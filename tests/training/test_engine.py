"""Engine pieces that do not need a full run: early stopping at a target."""
from types import SimpleNamespace

import pytest
import torch

from attnlab.training import StopAtTarget


def _validate(callback, trainer, value):
    trainer.callback_metrics = {"val_seq_acc": torch.tensor(value)}
    trainer.global_step += 10
    callback.on_validation_end(trainer, None)
    return trainer.should_stop


def test_stops_after_target_reached_twice_in_a_row():
    cb = StopAtTarget("val_seq_acc", 1.0, times=2)
    trainer = SimpleNamespace(sanity_checking=False, should_stop=False, global_step=0, callback_metrics={})
    assert not _validate(cb, trainer, 1.0)
    assert not _validate(cb, trainer, 0.99)  # the streak restarts
    assert not _validate(cb, trainer, 1.0)
    assert _validate(cb, trainer, 1.0)
    assert cb.stopped_at == 40


def test_missing_metric_or_sanity_check_never_stops():
    cb = StopAtTarget("val_seq_acc", 1.0, times=1)
    trainer = SimpleNamespace(sanity_checking=True, should_stop=False, global_step=0,
                              callback_metrics={"val_seq_acc": torch.tensor(1.0)})
    cb.on_validation_end(trainer, None)
    trainer.sanity_checking, trainer.callback_metrics = False, {}
    cb.on_validation_end(trainer, None)
    assert not trainer.should_stop
    with pytest.raises(ValueError, match="mode"):
        StopAtTarget("val_loss", 0.1, mode="lowest")
