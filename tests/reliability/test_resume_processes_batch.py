"""``--resume`` on another number of processes keeps the run's batches a step. A run trained on
two processes and resumed on one halved each step's examples without a word (one resumed on
two: doubled them), and trained on to other losses than the run would have. Now --accumulate
takes up the difference (two processes to one: 2 batches a step on the one), said in a note.
Where the new processes cannot share a step evenly (--accumulate and --batch-size stay the
run's, so no flag could keep it) each step would learn from another number of examples, another
recipe: refused in one line naming the numbers of processes that can, before anything is
written; so is an --accumulate given that is not the one the resume keeps."""
import hashlib
import shutil

import pytest
import torch

from attnlab.cli import main
from attnlab.commands.preflight import kept_accumulate
from attnlab.errors import UsageError
from attnlab.runs import read_yaml

from .conftest import train_ddp, train_losses

# no dropout: each process draws its own masks, which one process accumulating would not
TINY = ["--train-size", "256", "--val-size", "32", "--test-size", "64", "--model-dim", "16",
        "--num-heads", "1", "--batch-size", "16", "--val-every", "2", "--checkpoint-every", "2",
        "--dropout", "0", "--threads", "1", "--warmup", "2", "--no-early-stop"]
ON_TWO = ["--devices", "2", "--strategy", "ddp"]


def _one_process(out, *args):
    assert main(["train", "reverse", "--out", str(out), *TINY, "--accelerator", "cpu",
                 *args]) == 0


def _checksums(run):
    return {p.relative_to(run): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run.rglob("*")) if p.is_file()}


def _refused(capsys, out, *args):
    """The one line ``--resume`` of ``out`` with ``args`` is refused with; the run untouched."""
    before = _checksums(out)
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(out), *TINY, "--accelerator", "cpu",
                 "--resume", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert _checksums(out) == before
    return err


@pytest.mark.slow  # one DDP run of two processes, and three of one
def test_a_resume_on_another_number_of_processes_trains_on_to_the_same_losses(tmp_path, capsys):
    """The reference: one process taking 2 batches a step (--accumulate 2) to step 2, resumed
    to 4, then to 6 (the same budgets both ways: the cosine follows --max-steps). Its copy at
    step 2, resumed on two processes of 1 batch each to 4, then on one process to 6, logs the
    same losses (within float32's rounding of a sum in another order: rtol 1e-5)."""
    ref = tmp_path / "ref"
    _one_process(ref, "--accumulate", "2", "--max-steps", "2")
    moved = tmp_path / "one-two-one"
    shutil.copytree(ref, moved)
    _one_process(ref, "--resume", "--max-steps", "4")
    _one_process(ref, "--resume", "--max-steps", "6")
    expected = train_losses(ref)
    assert len(expected) == 6, expected

    done = train_ddp("reverse", moved, *TINY, "--resume", "--max-steps", "4")
    assert done.returncode == 0, done.stderr
    assert ("note: --resume: --accumulate 1 in place of the run's 2, so that each step still "
            "takes its 2 batches of 16") in done.stderr, done.stderr
    saved = read_yaml(moved / "config.yaml")
    assert (saved["devices"], saved["accumulate"]) == (2, 1), saved
    # the run's own value on its processes (1) is not the one this resume keeps: named
    assert _refused(capsys, moved, "--devices", "1", "--accumulate", "1", "--max-steps", "6") == (
        "attnlab: error: --resume: --accumulate 1: on 1 process this run goes on with "
        "--accumulate 2, so that each step takes its 2 batches of 16 as the run's did; give 2, "
        "or leave it out")
    _one_process(moved, "--resume", "--devices", "1", "--accumulate", "2", "--max-steps", "6")
    torch.testing.assert_close(train_losses(moved), expected, rtol=1e-5, atol=1e-6)
    assert read_yaml(moved / "config.yaml")["accumulate"] == 2


def test_a_resume_on_processes_that_cannot_share_a_step_is_refused(tmp_path, capsys):
    """A one-process run of 1 batch a step resumed on two: each step would take a batch on
    each, twice the run's (--accumulate and --batch-size stay the run's, so no flag could keep
    it): refused, naming the numbers of processes that divide the run's batches a step."""
    out = tmp_path / "run"
    _one_process(out, "--max-steps", "2")
    assert _refused(capsys, out, *ON_TWO) == (
        "attnlab: error: --resume: --devices 2 trains on 2 processes where the run had 1, which "
        "cannot share its 1 batch of 16 a step (--accumulate 1 on 1 process) evenly: each step "
        "would learn from another number of examples than the run's; resume it on 1 process, "
        "or start a new run with another --out")


def test_a_resume_given_another_accumulate_than_it_keeps_is_refused(tmp_path, capsys):
    """A run of 2 batches a step (--accumulate 2, one process) resumed on two keeps them with
    --accumulate 1: the run's own --accumulate 2 given again (by a flag or a --config file) is
    named, with the value the resume will use, where it was refused as "the run has 2"."""
    out = tmp_path / "run"
    _one_process(out, "--accumulate", "2", "--max-steps", "2")
    expected = ("--resume: {}: on 2 processes this run goes on with --accumulate 1, so that "
                "each step takes its 2 batches of 16 as the run's did; give 1, or leave it out")
    assert _refused(capsys, out, *ON_TWO, "--accumulate", "2") == (
        "attnlab: error: " + expected.format("--accumulate 2"))
    config = tmp_path / "more.yaml"
    config.write_text("accumulate: 2\n")
    assert _refused(capsys, out, *ON_TWO, "--config", str(config)) == (
        "attnlab: error: " + expected.format(f"accumulate: 2 in --config {config}"))


def test_the_resumes_of_a_run_keep_its_step_whether_the_last_one_finished_or_not():
    """1 process of 2 batches a step, resumed on 2 processes, then on 1 again: config.yaml is
    rewritten only when a run ends, so the third resume reads the first record (the second
    was interrupted) or the second's (it finished). Both keep 2 batches a step on one process;
    a record that cannot be shared on 3 processes is refused either way."""
    first = {"devices": 1, "num_nodes": 1, "accumulate": 2, "batch_size": 16}
    second = {**first, "devices": 2, "accumulate": kept_accumulate(first, {"devices": 2})}
    assert second["accumulate"] == 1
    assert kept_accumulate(first, {"devices": 1}) == kept_accumulate(second, {"devices": 1}) == 2
    for record in (first, second):
        with pytest.raises(UsageError, match="resume it on 1 or 2 processes"):
            kept_accumulate(record, {"devices": 3, "num_nodes": 1})
