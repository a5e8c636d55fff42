"""A run directory copied while its run trained (rsync from a cluster mid-run): its checkpoint,
``metrics.json``/``model.safetensors`` and ``logs/metrics.csv`` are of different moments. Each
disagreement is said, naming the files: a checkpoint older than the finished weights refuses
``--resume`` (it would train those steps again and replace the weights, without a word); a
newer one is named by ``evaluate``, whose numbers are then of the older weights; a log older
than the checkpoint is named by ``--resume``, whose log would otherwise have a silent gap.

The copies are made from two real runs of the same settings, one of 10 steps and one of 20, as
a copy taken at step 10 and at the end of a 20-step run would hold them (a constant learning
rate: the first 10 steps of both are the same)."""
import shutil

import pytest

from attnlab.cli import main
from attnlab.runs import read_json

FLAGS = ["--schedule", "constant", "--val-every", "5", "--checkpoint-every", "5", "--model-dim", "16", "--num-heads",
         "2", "--num-layers", "1", "--batch-size", "8", "--train-size", "64", "--val-size",
         "16", "--test-size", "16", "--threads", "1"]


@pytest.fixture(scope="module")
def moments(tmp_path_factory):
    """{steps: run directory} of the runs finished at step 10 and at step 20."""
    tmp = tmp_path_factory.mktemp("moments")
    out = {}
    for steps in (10, 20):
        out[steps] = tmp / f"r{steps}"
        assert main(["train", "reverse", "--out", str(out[steps]), "--max-steps", str(steps),
                     *FLAGS]) == 0
    return out


def _copy(moments, tmp_path, name="copied run"):
    run = tmp_path / name
    shutil.copytree(moments[20], run)
    return run


@pytest.mark.slow
def test_resume_from_a_checkpoint_older_than_the_finished_run_is_refused(moments, tmp_path,
                                                                         capsys):
    run = _copy(moments, tmp_path)
    shutil.copy(moments[10] / "checkpoints" / "last.ckpt", run / "checkpoints" / "last.ckpt")
    weights = (run / "model.safetensors").read_bytes()
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(run), "--resume", "--max-steps", "30"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"{run}/checkpoints/last.ckpt is of step 10" in err
    assert (f"{run}/metrics.json is of step 20 ({run}/model.safetensors: step 20 of 20, the "
            f"last step)") in err
    # nothing trained, nothing rewritten
    assert (run / "model.safetensors").read_bytes() == weights
    assert read_json(run / "metrics.json")["steps"] == 20
    assert not (run / "logs" / "metrics.part1.csv").exists()


@pytest.mark.slow
def test_evaluate_names_a_checkpoint_newer_than_the_weights_it_evaluates(moments, tmp_path,
                                                                         capsys):
    run = tmp_path / "copied run"  # finished at 10, then resumed: its checkpoint is at 20
    shutil.copytree(moments[10], run)
    shutil.copy(moments[20] / "checkpoints" / "last.ckpt", run / "checkpoints" / "last.ckpt")
    capsys.readouterr()
    assert main(["evaluate", str(run), "--threads", "1"]) == 0
    err = capsys.readouterr().err
    assert (f"evaluating {run}/model.safetensors: step 10 of 10, the last step (metrics.json), "
            f"but {run}/checkpoints/last.ckpt is of step 20") in err
    assert "--checkpoint last uses step 20's weights" in err
    # the run as one process wrote it says nothing
    assert main(["evaluate", str(moments[20]), "--threads", "1"]) == 0
    assert "note:" not in capsys.readouterr().err


@pytest.mark.slow
def test_evaluate_of_a_keep_best_run_names_the_best_step_it_evaluates(tmp_path, capsys):
    """A --keep-best run's model.safetensors is of its best step, not of the steps
    metrics.json counts: resumed with a raised budget and killed after a checkpoint, its
    evaluate says which step's weights it evaluates."""
    import torch

    run = tmp_path / "kb"
    assert main(["train", "reverse", "--out", str(run), "--max-steps", "20", "--keep-best",
                 "--lr", "0.05", *FLAGS]) == 0
    metrics = read_json(run / "metrics.json")
    best = metrics["best_step"]
    assert best < 20, "the test needs a best step before the last"
    ckpt = run / "checkpoints" / "last.ckpt"  # as the resumed run's next checkpoint
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    state["global_step"] = 25
    torch.save(state, ckpt)
    capsys.readouterr()
    assert main(["evaluate", str(run), "--threads", "1"]) == 0
    err = capsys.readouterr().err
    assert (f"evaluating {run}/model.safetensors: step {best} of 20, the best val_loss "
            f"({metrics['best_value']}) (metrics.json), but {ckpt} is of step 25") in err
    assert "step 20's" not in err
    # resuming from a checkpoint before the end is still refused by the steps trained
    state["global_step"] = 15
    torch.save(state, ckpt)
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(run), "--resume", "--max-steps", "30"]) == 2
    err = capsys.readouterr().err
    assert (f"{run}/metrics.json is of step 20 ({run}/model.safetensors: step {best} of 20, "
            f"the best val_loss") in err


@pytest.mark.slow
@pytest.mark.parametrize("log", ["cut short", "missing"])
def test_resume_names_a_log_older_than_the_checkpoint(moments, tmp_path, capsys, log):
    run = _copy(moments, tmp_path)
    (run / "model.safetensors").unlink()  # copied before the run finished
    (run / "metrics.json").unlink()
    csv = run / "logs" / "metrics.csv"
    if log == "cut short":  # the rows up to step 8 only
        lines = csv.read_text().splitlines(keepends=True)
        csv.write_text("".join(line for line in lines
                               if not line[0].isdigit() or int(line.split(",")[0]) <= 8))
        had = "its last row before it is of step 8"
    else:
        csv.unlink()
        had = "it is missing"
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(run), "--resume", "--max-steps", "22"]) == 0
    err = capsys.readouterr().err
    assert (f"warning: --resume: {csv} has no row of the validation at step 20 that "
            f"{run}/checkpoints/last.ckpt holds ({had})") in err
    first = 9 if log == "cut short" else 1
    assert f"the resumed run's log has no rows of steps {first}-20" in err


@pytest.mark.slow
def test_resume_names_a_log_whose_row_at_the_checkpoint_holds_other_numbers(moments, tmp_path,
                                                                           capsys):
    """Another run's log: it has a row of the checkpoint's validation step, of other numbers."""
    import csv

    run = _copy(moments, tmp_path)
    (run / "model.safetensors").unlink()  # copied before the run finished
    (run / "metrics.json").unlink()
    log = run / "logs" / "metrics.csv"
    with open(log, newline="") as f:
        rows = list(csv.DictReader(f))
    row = next(r for r in rows if r["step"] == "20" and r["val_loss"])
    row["val_loss"] = str(float(row["val_loss"]) + 1)
    with open(log, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(run), "--resume", "--max-steps", "22"]) == 0
    err = capsys.readouterr().err
    assert (f"warning: --resume: {log}'s row of step 20 holds other numbers than the validation "
            f"at step 20 that {run}/checkpoints/last.ckpt holds (another run's log?)") in err
    assert "no rows of steps" not in err


@pytest.mark.slow
def test_resume_of_an_interrupted_run_whose_log_ran_past_its_checkpoint_says_nothing(
        moments, tmp_path, capsys):
    """The log of a run killed after its checkpoint holds rows after it: as expected."""
    run = _copy(moments, tmp_path)
    shutil.copy(moments[10] / "checkpoints" / "last.ckpt", run / "checkpoints" / "last.ckpt")
    (run / "model.safetensors").unlink()
    (run / "metrics.json").unlink()
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(run), "--resume", "--max-steps", "20"]) == 0
    err = capsys.readouterr().err
    assert "metrics.csv" not in err and "last.ckpt" not in err, err
