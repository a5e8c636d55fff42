"""``--resume`` on one process of a run of two, inside an epoch whose batches the two did not
share evenly (5 batches: each took 2, the fifth left out). Resumed on one process (2 batches a
step, ``--accumulate`` keeping the run's step), the epoch's fifth batch came back as a step of
its own, unsaid, where the run would have gone on to the next epoch: from there every step
held other batches than the uninterrupted run's. Now the resumed run leaves out what the run
left out, through every later resume too; one process resumed on two, which cannot train the
batch its run trained alone, says so in one line."""
import pytest

from attnlab.data import resumable


def _loader(batches=5):  # an epoch of ``batches`` batches, named by epoch and place: "e0b3"
    return resumable.ShuffledBatches(
        lambda shuffle, seed: [f"e{seed - 1}b{i}" for i in range(batches)],
        rows=batches, batch_size=1, seed=0)


def _steps(monkeypatch, world, accumulate, steps, state=None, per_epoch=5):
    """``steps`` steps on ``world`` processes of ``accumulate`` batches each, as the training
    loop takes them (an epoch's last step takes the batches left): each step's batches, all
    processes together; and rank 0's loader state after them."""
    per_rank, saved = [], None
    for rank in range(world):
        monkeypatch.setattr(resumable, "shard", lambda rank=rank: (rank, world))
        loader = _loader(per_epoch)
        if state is not None:
            loader.load_state_dict(state)
        taken = []
        while len(taken) < steps:
            batches = []
            for batch in loader:
                batches.append(batch)
                if len(batches) == accumulate:
                    taken.append(batches)
                    batches = []
                    if len(taken) == steps:
                        break
            if batches and len(taken) < steps:
                taken.append(batches)
        per_rank.append(taken)
        saved = saved or loader.state_dict()
    return [sorted(b for rank in per_rank for b in rank[s]) for s in range(steps)], saved


def test_a_run_of_two_processes_resumed_on_one_takes_the_steps_it_would_have(monkeypatch):
    straight, _ = _steps(monkeypatch, 2, 1, 6)
    assert straight[:3] == [["e0b0", "e0b1"], ["e0b2", "e0b3"], ["e1b0", "e1b1"]]
    first, state = _steps(monkeypatch, 2, 1, 1)
    resumed, state = _steps(monkeypatch, 1, 2, 3, state)  # to step 4 ...
    again, _ = _steps(monkeypatch, 1, 2, 2, state)  # ... and, resumed on one again, to 6
    assert first + resumed + again == straight


@pytest.mark.parametrize("batches", [5, 10])
@pytest.mark.parametrize("run, resumed", [((3, 2), (2, 3)), ((2, 3), (3, 2))])
def test_three_processes_and_two_resumed_on_each_other_train_no_batch_the_run_left_out(
        monkeypatch, batches, run, resumed):
    """Neither count divides the other: the resumed processes take, of an epoch's batches, at
    most those the run's took (3 of 5 on three processes: never the fourth, which two
    processes took before as a step of their own, unsaid), as many as they can share
    evenly (8 of 10 after three, 9 after two), and say that the steps are the run's no more."""
    (world, accumulate), (again, its_accumulate) = run, resumed
    _, state = _steps(monkeypatch, world, accumulate, 1, per_epoch=batches)
    steps, _ = _steps(monkeypatch, again, its_accumulate, 6, state, batches)
    trained = batches - batches % world  # each epoch, the run's batches 0 .. trained - 1
    assert {int(b.split("b")[1]) for step in steps for b in step} <= set(range(trained))
    loader = _loader(batches)
    loader.load_state_dict(state)
    share = trained - trained % again
    assert len(loader) == share // again
    note = (f"on {again} processes each epoch leaves out {batches - share} of its {batches} "
            f"batches, which the run on {world} processes trained: the steps from here are not "
            f"those of the run uninterrupted")
    assert loader.dealing_note() == note


def test_one_process_resumed_on_two_says_that_the_epochs_leave_a_batch_out(monkeypatch):
    _, state = _steps(monkeypatch, 1, 2, 1)
    monkeypatch.setattr(resumable, "shard", lambda: (0, 2))
    loader = _loader()
    loader.load_state_dict(state)
    assert loader.dealing_note() == (
        "on 2 processes each epoch leaves out 1 of its 5 batches, which the run on 1 process "
        "trained: the steps from here are not those of the run uninterrupted")
    monkeypatch.setattr(resumable, "shard", lambda: (0, 1))
    loader.load_state_dict(_steps(monkeypatch, 2, 1, 1)[1])  # two resumed on one: the same
    assert loader.dealing_note() is None


@pytest.mark.parametrize("world", [1, 2])
def test_a_run_not_resumed_on_other_processes_says_nothing(monkeypatch, world):
    _, state = _steps(monkeypatch, world, 1, 1)
    monkeypatch.setattr(resumable, "shard", lambda: (0, world))
    loader = _loader()
    loader.load_state_dict(state)
    assert loader.dealing_note() is None and len(loader) == 5 // world


@pytest.mark.slow  # two DDP runs of two processes, one of one
def test_a_classify_run_of_two_processes_resumed_on_one_logs_the_runs_losses(tmp_path):
    """120 reviews, batches of 20: two processes take 4 of an epoch's 5 training batches. The
    run stopped at step 1 and resumed on one process to step 6 logs the losses of the run
    resumed on two (within float32's rounding of a sum in another order: rtol 1e-5); it
    logged other ones from step 3 on, the epoch's fifth batch trained as a step of its own.
    Without --val-every it validates once an epoch at the run's steps (2, 4, 6), not at
    those of one process's five batches (3, 6)."""
    import shutil

    import torch

    from attnlab.cli import main

    from .conftest import train_ddp, train_losses, write_reviews

    tiny = ["--data", str(write_reviews(tmp_path / "reviews.csv")), "--batch-size", "20",
            "--model-dim", "16", "--num-heads", "2", "--threads", "1", "--dropout", "0",
            "--checkpoint-every", "1", "--warmup", "2"]
    ref, moved = tmp_path / "ref", tmp_path / "moved"
    done = train_ddp("classify", ref, *tiny, "--max-steps", "1")
    assert done.returncode == 0, done.stderr
    shutil.copytree(ref, moved)
    done = train_ddp("classify", ref, *tiny, "--max-steps", "6", "--resume")
    assert done.returncode == 0, done.stderr
    assert main(["train", "classify", "--out", str(moved), *tiny, "--max-steps", "6",
                 "--resume", "--devices", "1", "--accelerator", "cpu"]) == 0
    expected = train_losses(ref)
    assert len(expected) == 6, expected
    torch.testing.assert_close(train_losses(moved), expected, rtol=1e-5, atol=1e-6)
    assert _validated(moved) == _validated(ref)  # the first run's last step, then 2, 4, 6
    assert _validated(ref)[-3:] == [2, 4, 6]


def _validated(run):
    """The steps at which a run logged its validation (its logs/metrics.csv)."""
    import csv

    with open(run / "logs" / "metrics.csv", newline="") as f:
        return [int(r["step"]) for r in csv.DictReader(f) if r.get("val_loss")]
