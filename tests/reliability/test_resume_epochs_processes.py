"""``--resume`` of a run whose budget is ``--epochs`` on another number of processes: its steps
count batches of all the processes, so on another number the steps done and those the epochs
make did not add up. A one-epoch run on two processes (20 steps of two batches) resumed on one
to --epochs 2 trained to step 80, 2.5 epochs, without a word; one resumed on more, fewer than
asked. Refused in one line naming the flag, the run left as it was."""
import hashlib

import pytest

from attnlab.cli import main

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
    assert main([*args, "--epochs", "1", "--accelerator", "cpu"]) == 0
    before = _checksums(out)
    capsys.readouterr()
    assert main([*args, "--resume", "--epochs", "2", "--devices", "2", "--strategy", "ddp",
                 "--accelerator", "cpu"]) == 2
    line = _one_line(capsys)
    assert line == ("attnlab: error: --resume: --devices 2 trains on 2 processes where the run "
                    "had 1, and its budget, --epochs 2, counts steps of 1 processes' batches: "
                    "on 2 it would train fewer epochs than that; resume it on 1 process"), line
    assert _checksums(out) == before


@pytest.mark.slow  # trains two DDP processes
def test_an_epochs_run_of_two_processes_resumed_on_one_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    data = write_reviews(tmp_path / "reviews.csv")
    tiny = ["--data", str(data), "--batch-size", "16", "--model-dim", "16", "--num-heads", "2",
            "--threads", "1"]
    done = train_ddp("classify", out, "--epochs", "1", *tiny)
    assert done.returncode == 0, done.stderr
    before = _checksums(out)
    assert main(["train", "classify", "--out", str(out), "--resume", "--epochs", "2",
                 "--devices", "1", *tiny]) == 2
    line = _one_line(capsys)
    assert line.startswith("attnlab: error: --resume: --devices 1 trains on 1 process where "
                           "the run had 2, and its budget, --epochs 2"), line
    assert line.endswith("on 1 it would train more epochs than that; resume it on 2 processes")
    assert _checksums(out) == before
