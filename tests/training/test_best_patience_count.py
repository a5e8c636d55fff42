"""The line a run stopped by ``--patience`` ends with counts the validations it actually
waited: a run that had stopped early and is resumed with a raised budget validates once more
before it stops again, and then has waited one validation more than --patience."""
from attnlab.training.best import BestWatch


def test_the_stop_line_counts_the_validations_waited_after_a_resume():
    stopped = BestWatch("val_acc", patience=4, keep=False)
    for step, value in [(70, 0.625), (80, 0.5), (90, 0.54), (100, 0.58), (110, 0.58)]:
        stopped.see(step, {"val_acc": value})
    assert stopped.exhausted()
    assert stopped.reason() == "val_acc did not improve for 4 validations (best 0.625 at step 70)"
    resumed = BestWatch("val_acc", patience=4, keep=False)
    assert resumed.load_state_dict(stopped.state_dict(), "runs/kb/checkpoints/last.ckpt") is None
    resumed.see(120, {"val_acc": 0.6})  # the budget was raised: one more validation
    assert resumed.exhausted()
    assert resumed.reason() == "val_acc did not improve for 5 validations (best 0.625 at step 70)"
