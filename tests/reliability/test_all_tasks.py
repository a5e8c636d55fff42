"""The scale-out and resume promises (docs/scale.md) on every training task, not only reversal.

- ``--precision bf16-mixed`` trains each of anomaly, classify, tag, translate and lm to a valid run
  directory with sane metrics (the shared ``task_runs`` fixture);
- a run that dies after a checkpoint resumes with ``--resume`` from that checkpoint and
  finishes at the same step budget with the same weights as a run that never died (so it saw
  the same batches, none repeated or skipped, and drew the same dropout masks), for each task;
  how often a run validates does not change its training; one that dies before any
  checkpoint starts again from step 0 (in-process: the crash is an exception raised inside the
  training loop, which stops the run as a kill would: no final checkpoint, no model, no
  metrics);
- two DDP processes on CPU train an lm run (the task with the most DDP-specific code paths:
  a corpus prepared on the fly, training batches drawn per rank, rank-0-only evaluation and
  training log).
The SIGKILL itself is tested once, on reversal, in test_kill_resume.py.
"""
import csv
import json
import math
import re

import pytest
import torch
from safetensors.torch import load_file

import attnlab
from attnlab.cli import main

from ..training.event_files import as_scalars, csv_rows, scalars
from ..training.loop_probe import probe_loop
from .conftest import TINY, task_data, tiny_args, train_ddp

pytestmark = pytest.mark.slow  # every test trains runs through the CLI

TASK_KEYS = {
    "anomaly": {"test_accuracy"},
    "classify": {"test_accuracy", "test_macro_f1"},
    "tag": {"test_f1", "test_precision", "test_recall", "test_accuracy"},
    "translate": {"test_exact_match", "test_bleu", "test_chrf"},
    "lm": {"val_loss", "val_perplexity"},
}


def _metrics(run_dir):
    return json.loads((run_dir / "metrics.json").read_text())


@pytest.mark.parametrize("task", sorted(TINY))
def test_bf16_mixed_run_is_valid_and_sane(task, task_runs, capsys):
    run_dir = task_runs[task]
    metrics = _metrics(run_dir)
    assert TASK_KEYS[task] | {"steps", "train_seconds", "parameters"} <= set(metrics)
    assert metrics["steps"] == 40
    # classify also names the classes without a test example: none in this data
    assert metrics.pop("test_classes_without_examples", []) == []
    # tag also has a row per entity type
    assert [row["type"] for row in metrics.pop("test_per_type", [{"type": "PER"}])] == ["PER"]
    # classify has a row per class (precision, recall, f1, support), of finite numbers too
    per_class = metrics.pop("test_per_class", {})
    assert bool(per_class) == (task == "classify"), per_class
    assert all(math.isfinite(v) for row in per_class.values() for v in row.values()), per_class
    # how the run trained, as it ran: the precision asked for, not compiled
    assert (metrics.pop("precision"), metrics.pop("compile")) == ("bf16-mixed", False)
    assert all(math.isfinite(v) for v in metrics.values()), metrics
    for key in TASK_KEYS[task] - {"val_loss", "val_perplexity"}:
        assert 0 <= metrics[key] <= (100 if key in ("test_bleu", "test_chrf") else 1), metrics
    loaded = attnlab.load(run_dir)
    model = loaded[0] if isinstance(loaded, tuple) else loaded
    # weights are saved in float32 whatever the training precision
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    if task == "lm":  # better than guessing uniformly over the vocabulary
        assert metrics["val_loss"] < math.log(loaded[1].vocab_size)
    # evaluate reproduces the run's test metrics from the saved model
    capsys.readouterr()
    assert main(["evaluate", str(run_dir)]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    for key in TASK_KEYS[task]:
        assert evaluated[key] == pytest.approx(metrics[key], rel=1e-4, abs=1e-4), key


class _Crash(Exception):
    """Stands in for the process dying mid-run."""


def _crash_at(step, monkeypatch):
    """Make the next training run die right after optimiser step ``step``."""

    class CrashAt:
        def on_train_batch_end(self, loop):
            if loop.step == step:
                raise _Crash(f"died after step {step}")

    probe_loop(monkeypatch, CrashAt())


BUDGET, EVERY, CRASH = 40, 10, 25


@pytest.mark.filterwarnings("error:.*dataloader is not resumable")
@pytest.mark.parametrize("task", sorted(TINY))
def test_resume_continues_from_the_checkpoint_to_the_same_budget(task, tmp_path, monkeypatch,
                                                                 capsys):
    out = tmp_path / task
    # with dropout: a resumed run must draw the same batches and the same dropout masks as an
    # uninterrupted one, so that the final weights are equal
    args = ["--max-steps", str(BUDGET), "--checkpoint-every", str(EVERY), "--val-every", "20",
            *tiny_args(task, task_data(tmp_path), "--dropout", "0.1")]
    argv = ["train", task, "--out", str(out), *args]
    with monkeypatch.context() as m:
        _crash_at(CRASH, m)
        with pytest.raises(_Crash):
            main(argv)
    assert not (out / "metrics.json").exists() and not (out / "model.safetensors").exists()
    saved = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    assert saved == CRASH // EVERY * EVERY

    capsys.readouterr()
    assert main([*argv, "--resume"]) == 0
    assert _metrics(out)["steps"] == BUDGET
    # the resumed run's progress starts just past the checkpoint, not from scratch
    progress = [int(s) for s in re.findall(r"^step (\d+)/", capsys.readouterr().err, flags=re.M)]
    every = BUDGET // 10
    assert saved < progress[0] <= saved + every and progress[-1] == BUDGET, progress
    # its training log goes on from the checkpoint's rows (each step once); the interrupted
    # part of the log is kept beside it
    with open(out / "logs" / "metrics.csv") as f:
        steps = [int(row["step"]) for row in csv.DictReader(f) if row.get("train_loss")]
    assert steps == sorted(set(steps)) and steps[0] <= saved and steps[-1] == BUDGET, steps
    assert (out / "logs" / "metrics.part1.csv").is_file()

    whole = tmp_path / f"{task}-uninterrupted"
    assert main(["train", task, "--out", str(whole), *args]) == 0
    resumed, uninterrupted = load_file(out / "model.safetensors"), load_file(whole / "model.safetensors")
    assert resumed.keys() == uninterrupted.keys()
    for name in resumed:  # same arithmetic in the same order: equal to float rounding
        torch.testing.assert_close(resumed[name], uninterrupted[name], rtol=1e-5, atol=1e-6,
                                   msg=lambda m: f"{name}: {m}")


def test_a_run_killed_before_its_first_checkpoint_resumes_from_step_0(tmp_path, monkeypatch,
                                                                      capsys):
    out = tmp_path / "early"
    argv = ["train", "classify", "--out", str(out), "--max-steps", "20", "--checkpoint-every",
            "10", *tiny_args("classify", task_data(tmp_path))]
    with monkeypatch.context() as m:
        _crash_at(5, m)
        # a kill -9 gives the run no chance to clean up (an exception would remove the
        # unstarted run directory): what a kill leaves behind is what is resumed here
        m.setattr("attnlab.commands.preflight.discard_unstarted", lambda *a, **k: False)
        with pytest.raises(_Crash):
            main(argv)
    assert not (out / "checkpoints" / "last.ckpt").exists()
    capsys.readouterr()
    assert main([*argv, "--resume"]) == 0
    err = capsys.readouterr().err
    assert "no checkpoint yet" in err
    assert re.findall(r"^step (\d+)/", err, flags=re.M)[0] == "2"  # from the start
    assert _metrics(out)["steps"] == 20


def test_two_process_ddp_lm_run_writes_a_valid_run_directory(tmp_path, capsys):
    out = tmp_path / "ddp-lm"
    proc = train_ddp("lm", out, "--max-steps", "30", "--val-every", "15",
                     *tiny_args("lm", task_data(tmp_path)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("lm run:") == 1  # rank 0 alone evaluates and writes
    assert proc.stderr.count("attnlab train lm ->") == 1, proc.stderr  # not once a rank
    metrics = _metrics(out)
    assert metrics["steps"] == 30 and math.isfinite(metrics["val_loss"])
    # metrics.json holds 6 significant digits, so exp of the written loss agrees to ~1e-5
    assert metrics["val_perplexity"] == pytest.approx(math.exp(metrics["val_loss"]), rel=1e-5)
    capsys.readouterr()
    assert main(["generate", str(out), "--prompt", "the ", "--max-new-tokens", "8",
                 "--greedy"]) == 0
    assert capsys.readouterr().out.startswith("the ")
    assert main(["evaluate", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["val_loss"] == pytest.approx(metrics["val_loss"])
    # the training log: rank 0's alone (one event file, the CSV's numbers), its throughput
    # counting both processes: a row a step, each step 2 x 8 windows of 16 tokens
    logs = out / "logs"
    assert len(list(logs.glob("events.out.tfevents.*"))) == 1
    rows = csv_rows(logs / "metrics.csv")
    assert scalars(logs) == as_scalars(rows)
    rows = [r for r in rows if r["train_loss"]]
    for before, row in zip(rows, rows[1:]):
        rate = float(row["samples_per_second"])
        elapsed = float(row["train_seconds"]) - float(before["train_seconds"])
        assert abs(rate * elapsed - 2 * 8) <= rate * 0.001 + 1e-9, (row, before)  # ms rounding
        assert float(row["tokens_per_second"]) == pytest.approx(16 * rate, rel=1e-12)


def test_how_often_a_run_validates_does_not_change_its_training(tmp_path):
    """Validation draws from the global random generator (each DataLoader iterator does); it is
    made neutral, so --val-every changes what is measured, not the dropout masks trained with."""
    data = task_data(tmp_path)
    weights = []
    for every in ("5", "40"):
        out = tmp_path / f"every{every}"
        assert main(["train", "classify", "--out", str(out), "--max-steps", "20", "--val-every",
                     every, *tiny_args("classify", data, "--dropout", "0.1")]) == 0
        weights.append(load_file(out / "model.safetensors"))
    for name in weights[0]:
        torch.testing.assert_close(weights[0][name], weights[1][name], rtol=1e-5, atol=1e-6,
                                   msg=lambda m: f"{name}: {m}")
