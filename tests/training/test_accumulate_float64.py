"""``--accumulate N --precision 64``: the accumulated step is the whole batch's step to float64
rounding, not to float32's. The precision meant for numerical checks (docs/scale.md) must not
lose its digits to the batches' weights: each batch's share of the step's targets (1/3, 1/9)
and the loss it multiplies were float32, so two runs that must agree differed by 1e-7 of the
update."""
import pytest
import torch

from attnlab.training import engine

from .test_loop_schedule_memory_time import B, _lm, _lm_with_unlabelled_targets, _sgd, _step


@pytest.mark.slow
@pytest.mark.parametrize("make, accumulate, first", [
    (_lm, 3, None), (_lm_with_unlabelled_targets, 2, B)],
    ids=["three-equal-batches", "unequal-targets"])
def test_an_accumulated_float64_step_is_the_whole_batchs_to_float64_rounding(
        make, accumulate, first, tmp_path, monkeypatch):
    _sgd(monkeypatch)
    # the float64 weights as trained, before fit turns them back into float32
    monkeypatch.setattr(engine, "back_to_float32", lambda module, tables: None)
    before, whole = _step(make, tmp_path / "whole", accumulate=1, precision="64")
    _, accumulated = _step(make, tmp_path / "accumulated", accumulate=accumulate, first=first,
                           precision="64")
    assert {t.dtype for t in whole.values()} == {torch.float64}
    assert sum(not torch.equal(whole[k], before[k]) for k in whole) > 10  # the step moved them
    for name in whole:  # the same sums in another order: float64 rounding apart
        update = (whole[name] - before[name]).abs().max()
        torch.testing.assert_close(accumulated[name], whole[name], rtol=0,
                                   atol=1e-12 * float(update) + 1e-18,
                                   msg=lambda m: f"{name}: {m}")
