"""The TensorBoard event files of a training run (``logs/`` beside ``metrics.csv``), read back
with TensorBoard's own reader: the CSV's numbers at the CSV's steps, the rate each step trained
at, the gradients' norm before clipping, the throughput, and a resumed run that shows no step
twice. (DDP: ``tests/reliability/test_all_tasks.py``; commands that do not train never import
TensorBoard: ``tests/cli/test_plot_explain.py``.)"""
import copy

import pytest
import torch

from attnlab.cli import main
from attnlab.schedulers import schedule_lr

from .event_files import as_scalars, csv_rows, scalars
from .loop_probe import probe_loop

pytestmark = pytest.mark.slow  # every test trains a run

TINY = ["--train-size", "256", "--val-size", "32", "--test-size", "32", "--model-dim", "16",
        "--num-heads", "1", "--batch-size", "16", "--no-early-stop", "--threads", "1"]
STEPS, LR, WARMUP = 12, 0.01, 4  # 12 steps: a row after every step (one per 20th of the run)
SCHEDULE = dict(lr=LR, warmup=WARMUP, max_iters=STEPS, min_lr=LR / 10, cooldown=0.5)  # wsd


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tb") / "reverse"
    assert main(["train", "reverse", "--out", str(out), *TINY, "--max-steps", str(STEPS),
                 "--val-every", "4", "--lr", str(LR), "--warmup", str(WARMUP),
                 "--schedule", "wsd", "--cooldown", "0.5", "--min-lr", str(LR / 10)]) == 0
    return out


def test_the_event_files_hold_the_csv_rows_at_their_steps(run):
    rows = csv_rows(run / "logs" / "metrics.csv")
    events = scalars(run / "logs")
    assert set(events) == {"train/loss", "train/acc", "train/seq_acc", "train/lr",
                           "train/grad_norm", "train/samples_per_second", "val/loss", "val/acc",
                           "val/seq_acc"}
    assert events == as_scalars(rows)  # every value, step and order, to float32
    assert [s for s, _ in events["train/loss"]] == list(range(1, STEPS + 1))
    assert [s for s, _ in events["val/loss"]] == [4, 8, 12]
    assert len(list((run / "logs").glob("events.out.tfevents.*"))) == 1


def test_lr_is_the_rate_each_logged_step_trained_at(run):
    """Step s trains at the schedule's rate after s - 1 updates (0 at the first step of the
    course's warm-up), not at the rate the schedule moved on to after it: the last step one
    step of the decay above --min-lr, which the schedule reaches as training stops, the rate
    the checkpoint resumes at (docs/schedules.md)."""
    rows = [r for r in csv_rows(run / "logs" / "metrics.csv") if r["lr"]]
    assert [int(r["step"]) for r in rows] == list(range(1, STEPS + 1))  # every step logged
    expected = [schedule_lr("wsd", int(r["step"]) - 1, **SCHEDULE) for r in rows]
    assert [float(r["lr"]) for r in rows] == pytest.approx(expected, rel=1e-9)
    assert float(rows[0]["lr"]) == 0.0 < float(rows[1]["lr"])
    assert float(rows[-1]["lr"]) > LR / 10  # the last step still above the floor
    saved = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert saved["optimizer"]["param_groups"][0]["lr"] == pytest.approx(LR / 10)  # the floor


def test_throughput_is_the_examples_trained_per_training_second(run):
    """Between two training rows one step of 16 examples trained; the rate times the
    ``train_seconds`` between the rows gives them back, to the CSV's rounding of the seconds
    (a millisecond each)."""
    rows = [r for r in csv_rows(run / "logs" / "metrics.csv") if r["train_loss"]]
    for before, row in zip(rows, rows[1:]):
        rate, seconds = float(row["samples_per_second"]), float(row["train_seconds"])
        elapsed = seconds - float(before["train_seconds"])
        assert abs(rate * elapsed - 16) <= rate * 0.001 + 1e-9, (row, before)


@pytest.mark.parametrize("clip", ["0.01", "0"])
def test_grad_norm_is_the_norm_before_clipping(tmp_path, monkeypatch, clip):
    """The logged norm equals the norm of the gradients of the step's batch, computed apart
    on a copy of the model: above --grad-clip 0.01 (so it was taken before clipping), and
    measured too where nothing clips."""
    expected = []

    class Norm:
        def on_train_batch_start(self, loop, batch):
            model = copy.deepcopy(loop.module)  # the weights the step starts from
            loss, _ = model.loss(batch)
            loss.backward()
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            expected.append(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])).item())

    probe_loop(monkeypatch, Norm())
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), *TINY, "--max-steps", "6",
                 "--dropout", "0", "--grad-clip", clip]) == 0
    logged = [float(r["grad_norm"]) for r in csv_rows(out / "logs" / "metrics.csv")
              if r["train_loss"]]
    # the same gradients summed by the same kernels: equal to float32 rounding
    torch.testing.assert_close(torch.tensor(logged), torch.tensor(expected), rtol=1e-5, atol=0)
    assert min(logged) > 0.01


class _Crash(Exception):
    pass


def test_a_resumed_run_shows_each_step_once(tmp_path, monkeypatch):
    """Killed at step 15 with its checkpoint at step 10, then resumed: TensorBoard shows steps
    1..10 as the first process logged them and 11..20 as the resumed one did, once each (the
    first process's rows 11..14 stay in its event file and in metrics.part1.csv, hidden), as
    metrics.csv does."""

    class Kill:
        def on_train_batch_end(self, loop):
            if loop.step == 15:
                raise _Crash

    out = tmp_path / "run"
    argv = ["train", "reverse", "--out", str(out), *TINY, "--max-steps", "20",
            "--checkpoint-every", "10", "--val-every", "5"]
    with monkeypatch.context() as m:
        probe_loop(m, Kill())
        with pytest.raises(_Crash):
            main(argv)
    assert main([*argv, "--resume"]) == 0

    logs = out / "logs"
    first, second = csv_rows(logs / "metrics.part1.csv"), csv_rows(logs / "metrics.csv")
    assert max(int(r["step"]) for r in first) == 14  # logged after the checkpoint, then lost
    kept = [r for r in first if int(r["step"]) <= 10]
    assert second[:len(kept)] == kept
    assert scalars(logs) == as_scalars(second)
    assert len(list(logs.glob("events.out.tfevents.*"))) == 2  # the first file is kept
