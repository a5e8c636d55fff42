"""``--resume`` on another number of processes keeps the run's batches a step. A run trained on
two processes and resumed on one halved each step's examples without a word (one resumed on
two: doubled them), and trained on to other losses than the run would have. Now --accumulate
takes up the difference (two processes to one: 2 batches a step on the one), said in a note;
where the new processes cannot share a step evenly (--accumulate and --batch-size stay the
run's, so no flag could keep it) a note says each step takes more batches than the run's."""
import shutil

import pytest
import torch

from attnlab.cli import main
from attnlab.commands.preflight import kept_accumulate, resume_notes
from attnlab.runs import read_yaml

from .conftest import train_ddp, train_losses

# no dropout: each process draws its own masks, which one process accumulating would not
TINY = ["--train-size", "256", "--val-size", "32", "--test-size", "64", "--model-dim", "16",
        "--num-heads", "1", "--batch-size", "16", "--val-every", "5", "--checkpoint-every", "5",
        "--dropout", "0", "--threads", "1", "--warmup", "2", "--no-early-stop"]


def _one_process(out, *args):
    assert main(["train", "reverse", "--out", str(out), *TINY, "--accelerator", "cpu",
                 *args]) == 0


@pytest.mark.slow  # two DDP runs of two processes
def test_a_resume_on_another_number_of_processes_trains_on_to_the_same_losses(tmp_path, capsys):
    """The reference: one process taking 2 batches a step (--accumulate 2), stopped at step 5
    and resumed to 10 on one process. The same steps on two processes of 1 batch each,
    resumed on one process, and the other way round, log the same losses after the resume
    (within float32's rounding of a sum in another order: rtol 1e-5)."""
    ref = tmp_path / "ref"
    _one_process(ref, "--accumulate", "2", "--max-steps", "5")
    started_on_one = tmp_path / "one-then-two"
    shutil.copytree(ref, started_on_one)
    _one_process(ref, "--resume", "--max-steps", "10")
    expected = train_losses(ref)
    assert len(expected) == 10, expected

    done = train_ddp("reverse", started_on_one, *TINY, "--resume", "--max-steps", "10")
    assert done.returncode == 0, done.stderr
    assert ("note: --resume: --accumulate 1 in place of the run's 2, so that each step still "
            "takes its 2 batches of 16") in done.stderr, done.stderr
    torch.testing.assert_close(train_losses(started_on_one), expected, rtol=1e-5, atol=1e-6)
    saved = read_yaml(started_on_one / "config.yaml")
    assert (saved["devices"], saved["accumulate"]) == (2, 1), saved

    started_on_two = tmp_path / "two-then-one"
    done = train_ddp("reverse", started_on_two, *TINY, "--max-steps", "5")
    assert done.returncode == 0, done.stderr
    capsys.readouterr()
    _one_process(started_on_two, "--resume", "--devices", "1", "--max-steps", "10")
    assert ("--accumulate 2 in place of the run's 1, so that each step still takes its 2 "
            "batches of 16") in capsys.readouterr().err
    torch.testing.assert_close(train_losses(started_on_two), expected, rtol=1e-5, atol=1e-6)
    assert read_yaml(started_on_two / "config.yaml")["accumulate"] == 2


def test_a_resume_on_processes_that_cannot_share_a_step_says_so():
    """A one-process run of 1 batch a step resumed on two: each step takes a batch on each,
    twice the run's (--accumulate and --batch-size stay the run's, so no flag could keep it).
    It trains on, as a user who gained a node wants, but not unsaid."""
    saved = {"devices": 1, "num_nodes": 1, "accumulate": 1, "batch_size": 16, "threads": 1}
    asked = {**saved, "devices": 2}
    asked["accumulate"] = kept_accumulate(saved, asked)
    assert asked["accumulate"] == 1
    assert resume_notes(saved, asked)[-1] == (
        "note: --resume: each step now takes 2 batches of 16, where the run's took 1 "
        "(--accumulate 1 on 1 process, which 2 processes cannot share evenly): its losses will "
        "not go on as the run's would have; resume it on a number of processes that divides 1 "
        "to keep its steps")
