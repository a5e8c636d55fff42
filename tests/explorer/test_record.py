"""What a page or figure of a run says of the run: which weights (file, step, the last or the
best validation's) and the numbers metrics.json holds, as the file holds them — a value the
file holds as null (a NaN loss) said to be so, and a run without metrics.json said to have
none, never a page that looks like a finished run's."""
import json

import pytest

from attnlab.explorer import Layer, attention_data, check_data
from attnlab.explorer.record import (metrics_of_text, metrics_text, run_record, shown_metrics,
                                     weights_text)

ONE_LAYER = [Layer("attn", "self", [[[0.25, 0.75], [1.0, 0.0]]])]


def write_metrics(run, metrics):
    run.mkdir(exist_ok=True)
    (run / "metrics.json").write_text(json.dumps(metrics))
    return run


def test_a_finished_run_names_its_last_step_and_every_metric_as_the_file_holds_it(tmp_path):
    run = write_metrics(tmp_path / "run", {
        "parameters": 7210, "steps": 30, "test_sequence_accuracy": 0.0,
        "test_token_accuracy": 0.0957031, "train_seconds": 0.389, "val_loss": 2.3061})
    record = run_record(run)
    assert weights_text(record) == "model.safetensors: step 30 of 30, the last step"
    # the held-out scores first, then validation, then the rest; no digit rounded away
    assert shown_metrics(record) == [
        ["test_sequence_accuracy", "0.0"], ["test_token_accuracy", "0.0957031"],
        ["val_loss", "2.3061"], ["parameters", "7210"], ["steps", "30"],
        ["train_seconds", "0.389"]]
    data = attention_data(ONE_LAYER, ["a", "b"], record=record)
    check_data(data)
    assert data["record"]["metrics"]["test_token_accuracy"] == 0.0957031
    assert data["record"]["shown"]["weights"] == weights_text(record)
    json.dumps(data, allow_nan=False)


def test_a_keep_best_run_names_the_best_step_its_weights_are_of(tmp_path):
    run = write_metrics(tmp_path / "run", {"best_metric": "val_loss", "best_step": 20,
                                           "best_value": 1.25, "steps": 50, "val_loss": 1.25})
    record = run_record(run)
    assert record["weights"] == {"file": "model.safetensors", "step": 20, "steps": 50,
                                 "which": "best", "monitor": "val_loss", "value": 1.25}
    assert weights_text(record) == "model.safetensors: step 20 of 50, the best val_loss (1.25)"


def test_a_value_that_was_not_finite_is_said_so_not_hidden(tmp_path):
    """metrics.json holds a NaN loss as null: shown as such, not left out or shown as 0."""
    run = write_metrics(tmp_path / "run", {"steps": 4, "val_loss": None, "val_perplexity": None})
    record = run_record(run)
    assert shown_metrics(record) == [["val_loss", "not finite (null)"],
                                     ["val_perplexity", "not finite (null)"], ["steps", "4"]]
    assert metrics_text(record, keys=("val_",)) == ("val_loss not finite (null), "
                                                    "val_perplexity not finite (null)")
    check_data(attention_data(ONE_LAYER, ["a", "b"], record=record))


def test_an_older_runs_nan_is_shown_as_not_finite_not_a_crash(tmp_path):
    """An older attnlab wrote a NaN loss into metrics.json as NaN, which Python's json reads:
    `attnlab view` of such a run stopped on a traceback (the page holds no NaN)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text('{"steps": 4, "val_loss": NaN, "test_auc": Infinity}')
    record = run_record(run)
    assert shown_metrics(record) == [["test_auc", "not finite (null)"],
                                     ["val_loss", "not finite (null)"], ["steps", "4"]]
    check_data(attention_data(ONE_LAYER, ["a", "b"], record=record))


@pytest.mark.parametrize("content, says", [
    (None, "no metrics yet: {run}/metrics.json is not written (training stopped before its "
           "end, or is still running)"),
    ("{oops", "no metrics: {run}/metrics.json is not a metrics file"),
    ("[1, 2]", "no metrics: {run}/metrics.json holds no table of metrics"),
])
def test_a_run_without_readable_metrics_says_so(tmp_path, content, says):
    run = tmp_path / "run"
    run.mkdir()
    if content is not None:
        (run / "metrics.json").write_text(content)
    record = run_record(run)
    assert record["metrics"] is None
    assert record["note"].startswith(says.format(run=run))
    assert metrics_text(record) == record["note"]
    assert weights_text(record) == "model.safetensors: step not recorded"
    check_data(attention_data(ONE_LAYER, ["a", "b"], record=record))


def test_a_checkpoints_step_is_the_one_named(tmp_path):
    run = write_metrics(tmp_path / "run", {"steps": 50})
    record = run_record(run, step=12, checkpoint="checkpoints/last.ckpt")
    assert weights_text(record) == "checkpoints/last.ckpt: step 12 of 50, the last saved step"


def test_a_page_record_that_is_not_the_layout_is_refused():
    data = attention_data(ONE_LAYER, ["a", "b"], record={
        "weights": {"file": "model.safetensors", "step": 3, "steps": 3, "which": "last"},
        "metrics": {"val_loss": 1.5}})
    data["record"]["metrics"]["val_loss"] = float("nan")
    with pytest.raises(ValueError, match="metrics must map names to numbers, text or null"):
        check_data(data)
    data["record"]["metrics"]["val_loss"] = 1.5
    data["record"]["shown"]["metrics"] = [["val_loss"]]
    with pytest.raises(ValueError, match=r"\[name, value\] pairs"):
        check_data(data)


@pytest.mark.parametrize("step, metrics, of", [
    (30, {"best_metric": "val_acc", "best_step": 18, "best_value": 0.5, "steps": 30},
     "metrics.json: of model.safetensors, step 18, not these weights"),
    (18, {"best_metric": "val_acc", "best_step": 18, "best_value": 0.5, "steps": 30}, None),
    (30, {"steps": 30, "test_token_accuracy": 0.1}, None),
    (25206, {"steps": 500, "test_token_accuracy": 0.1},
     "metrics.json: of model.safetensors, step 500, not these weights"),
    (None, {"steps": 500, "test_token_accuracy": 0.1}, "metrics.json: of model.safetensors, "
     "step 500, maybe not these weights (their step is not recorded)"),
])
def test_a_checkpoint_is_not_given_the_scores_of_other_weights(tmp_path, step, metrics, of):
    """metrics.json scores model.safetensors (the best step's, else the last's): a checkpoint
    of another step was shown beside them as if they were its own."""
    run = write_metrics(tmp_path / "run", metrics)
    record = run_record(run, step=step, checkpoint="checkpoints/last.ckpt")
    assert metrics_of_text(record) == of
    data = attention_data(ONE_LAYER, ["a", "b"], record=record)
    check_data(data)
    assert data["record"]["shown"]["metrics_of"] == of
    assert metrics_text(record)  # the page still lists every number, under that line


def test_a_step_past_the_runs_steps_is_not_said_to_be_of_them(tmp_path):
    """A finished run of 500 steps resumed and stopped at 25206 read "step 25206 of 500"."""
    run = write_metrics(tmp_path / "run", {"steps": 500})
    assert weights_text(run_record(run, step=25206, checkpoint="checkpoints/last.ckpt")) == \
        "checkpoints/last.ckpt: step 25206, the last saved step"
    assert weights_text(run_record(run, step=400, checkpoint="checkpoints/last.ckpt")) == \
        "checkpoints/last.ckpt: step 400 of 500, the last saved step"
