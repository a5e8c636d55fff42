"""``--resume`` of a run whose budget is ``--epochs`` on another number of processes. Each step
keeps the run's batches, but an epoch's steps are counted from each process's share of its
batches, and those the new processes cannot share evenly are left out: the steps done and those
the epochs make need not add up (a one-epoch run on two processes resumed on one to --epochs 2
once trained to step 80, 2.5 epochs, without a word). Refused in one line naming the flag and
the way on (--max-steps in place of --epochs, which a run on another number of processes then
trains to), the run left as it was."""
import hashlib
import json
from types import SimpleNamespace

import pytest

from attnlab.cli import main
from attnlab.commands.preflight import check_epoch_processes
from attnlab.runs import read_yaml

from .conftest import TINY_REVERSE, train_ddp, write_reviews


def _checksums(run):
    return {p.relative_to(run): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run.rglob("*")) if p.is_file()}


def _one_line(capsys):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_an_epochs_run_of_one_process_resumed_on_two_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    assert TINY_REVERSE[0] == "--max-steps"  # left out: the budget is --epochs
    args = ["train", "reverse", "--out", str(out), *TINY_REVERSE[2:], "--no-early-stop"]
    assert main([*args, "--epochs", "1", "--accumulate", "2", "--accelerator", "cpu"]) == 0
    before = _checksums(out)
    capsys.readouterr()
    assert main([*args, "--resume", "--epochs", "2", "--devices", "2", "--strategy", "ddp",
                 "--accelerator", "cpu"]) == 2
    line = _one_line(capsys)
    assert line == ("attnlab: error: --resume: --devices 2 trains on 2 processes where the run "
                    "had 1, and its budget, --epochs 2, counts the steps of an epoch shared out "
                    "to 1 process: on 2 the batches that do not share evenly are left out, so "
                    "the steps done and those the epochs make may not add up; resume it on 1 "
                    "process, or give --max-steps N in place of --epochs (the step to end at; "
                    "it has done 4)"), line
    assert _checksums(out) == before


@pytest.mark.slow  # trains two DDP processes
def test_an_epochs_run_of_two_processes_resumed_on_one_is_refused_and_trains_to_max_steps(
        tmp_path, capsys):
    """Refused, the run left as it was; then a user who lost a node continues with the way
    out the refusal names: the budget becomes --max-steps, recorded so, and the run trains to
    that step on one process, which takes the run's 2 batches a step (--accumulate 2). One
    DDP run for both: its launch is most of the test's time."""
    out = tmp_path / "run"
    data = write_reviews(tmp_path / "reviews.csv")
    tiny = ["--data", str(data), "--batch-size", "16", "--model-dim", "16", "--num-heads", "2",
            "--num-layers", "1", "--dim-feedforward", "32", "--threads", "1"]
    done = train_ddp("classify", out, "--epochs", "1", *tiny)
    assert done.returncode == 0, done.stderr
    before = _checksums(out)
    assert main(["train", "classify", "--out", str(out), "--resume", "--epochs", "2",
                 "--devices", "1", *tiny]) == 2
    line = _one_line(capsys)
    assert line.startswith("attnlab: error: --resume: --devices 1 trains on 1 process where "
                           "the run had 2, and its budget, --epochs 2"), line
    assert ("counts the steps of an epoch shared out to 2 processes: on 1 the batches that "
            "do not share evenly are left out, so the steps done and those the epochs make may "
            "not add up; resume it on 2 processes, or give --max-steps N in place of --epochs"
            ) in line, line
    assert _checksums(out) == before

    steps = json.loads((out / "metrics.json").read_text())["steps"] + 2
    assert main(["train", "classify", "--out", str(out), "--resume", "--max-steps", str(steps),
                 "--devices", "1", *tiny]) == 0
    saved = read_yaml(out / "config.yaml")
    assert (saved["max_steps"], saved["epochs"], saved["devices"], saved["accumulate"]) == (
        steps, None, 1, 2), saved
    assert json.loads((out / "metrics.json").read_text())["steps"] == steps


def test_an_older_epochs_run_is_not_refused_on_another_number_of_processes():
    """A run made before ``epochs_of_all_processes`` counted each process's passes (its budget
    in steps is the same on any number of processes): not refused with a claim that does not
    hold for it."""
    saved = {"devices": 1, "num_nodes": 1, "epochs": 1}
    older = SimpleNamespace(epochs=2, devices=2, num_nodes=1, epochs_of_all_processes=False)
    check_epoch_processes(saved, older)  # no UsageError
    with pytest.raises(Exception, match="trains on 2 processes where the run had 1"):
        check_epoch_processes(saved, SimpleNamespace(**{**vars(older),
                                                        "epochs_of_all_processes": True}))
