"""Two DDP processes on CPU (gloo) train one reversal model and leave one valid run directory."""
import csv
import json
import re
import signal

import pytest
import torch
from safetensors.torch import load_file

from attnlab.cli import main
from attnlab.settings import epoch_steps
from attnlab.tasks import get_task

from .conftest import start_ddp, train_ddp
from .test_ddp_seeds import rank_states

pytestmark = pytest.mark.slow  # trains with two DDP processes


def test_an_interrupted_ddp_run_says_so_once_from_rank_zero(tmp_path, spawn):
    """SIGTERM to rank 0 stops both ranks at the same step, each saving; the line that says
    where it stopped and how to continue used to come from each rank (issue #37)."""
    out = tmp_path / "ddp"
    proc = start_ddp(spawn, "reverse", out, "--max-steps", "1000", "--train-size", "256",
                     "--val-size", "32", "--test-size", "32", "--model-dim", "16",
                     "--num-heads", "1", "--batch-size", "16", "--val-every", "100000",
                     "--checkpoint-every", "100000", "--no-early-stop")
    seen = ""
    while "step 100/" not in seen and proc.poll() is None:  # progress every 100 steps
        seen += proc.stderr.readline()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    err = seen + err
    assert proc.returncode == 143, err
    lines = [line for line in err.splitlines() if line.startswith("attnlab: interrupted")]
    assert len(lines) == 1, err  # not once a rank
    assert re.fullmatch(rf"attnlab: interrupted at step \d+ of 1000; continue with: attnlab "
                        rf"train reverse --out {re.escape(str(out))} --resume", lines[0]), err
    assert (out / "checkpoints" / "last.ckpt").is_file()


def test_ddp_logs_the_mean_of_both_processes_not_rank_zeros_half(tmp_path):
    """Two processes of 8 examples and one process of 16 train the same first step from the
    same weights: its logged train_loss and accuracies are those of all 16 examples, not of
    rank 0's 8 (which differed by 0.02 in loss)."""
    args = ["--max-steps", "2", "--train-size", "64", "--val-size", "16", "--test-size", "16",
            "--model-dim", "16", "--num-heads", "2", "--warmup", "1", "--dropout", "0",
            "--accelerator", "cpu", "--threads", "1", "--no-early-stop"]
    proc = train_ddp("reverse", tmp_path / "ddp", *args, "--batch-size", "8")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert main(["train", "reverse", "--out", str(tmp_path / "one"), *args,
                 "--batch-size", "16"]) == 0
    rows = {name: next(csv.DictReader(open(tmp_path / name / "logs" / "metrics.csv")))
            for name in ("ddp", "one")}
    assert rows["ddp"]["step"] == rows["one"]["step"] == "1"
    for key in ("train_loss", "train_acc", "train_seq_acc"):
        assert float(rows["ddp"][key]) == pytest.approx(float(rows["one"][key]), abs=1e-6), key


def test_an_epoch_under_ddp_is_one_pass_over_the_data_not_one_per_process(tmp_path):
    """--epochs 1 over 64 examples with two processes of 8: 4 steps of 16 examples, each
    example once (not 8 steps, two passes); --epochs 2 with --accumulate 2: steps of 32.
    With dropout, each process draws its own masks (both drew the same ones from the run's
    --seed, reverse's batches all of one shape, their random states equal): the check of
    test_ddp_seeds.py for a run started on two processes, read from this launch."""
    args = ["--train-size", "64", "--val-size", "16", "--test-size", "16", "--model-dim", "16",
            "--num-heads", "2", "--warmup", "1", "--threads", "1", "--batch-size", "8",
            "--no-early-stop", "--dropout", "0.3"]
    proc = train_ddp("reverse", tmp_path / "ddp", *args, "--epochs", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((tmp_path / "ddp" / "metrics.json").read_text())["steps"] == 4
    first, second = rank_states(tmp_path / "ddp")
    assert not torch.equal(first, second)
    cfg = get_task("classify").config(epochs=2, accumulate=2, devices=2, strategy="ddp")
    assert epoch_steps(cfg, 10, cfg.epochs) == 2 * 3  # 5 batches a process: steps of 2, 2, 1


@pytest.mark.parametrize("precision", ["32", "64"])
def test_two_processes_weigh_their_batches_by_targets_as_one_process_accumulating(tmp_path,
                                                                                  precision):
    """Under DDP each process takes every other batch of the epoch, so two processes of a
    batch train as one process accumulating two. Translations differ in length: each
    process's loss is a mean over its own target tokens, and DDP averaged the two means as
    equals, where one process accumulating weighs each batch by its tokens; the second step
    (after one update) and the logged losses showed it. Under --precision 64 the float64
    weight of each process's share gave the DDP rows float64 digits, one process's float32."""
    args = ["--max-steps", "3", "--max-number", "1000", "--test-size", "16", "--val-size", "16",
            "--num-layers", "1", "--model-dim", "16", "--num-heads", "2", "--dropout", "0",
            "--warmup", "0", "--schedule", "constant", "--lr", "3e-2", "--batch-size", "4",
            "--accelerator", "cpu", "--threads", "1", "--val-every", "100",
            "--precision", precision]
    proc = train_ddp("translate", tmp_path / "ddp", *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert main(["train", "translate", "--out", str(tmp_path / "one"), *args,
                 "--accumulate", "2"]) == 0
    rows = {name: list(csv.DictReader(open(tmp_path / name / "logs" / "metrics.csv")))
            for name in ("ddp", "one")}
    losses = {name: [float(r["train_loss"]) for r in rows[name] if r.get("train_loss")]
              for name in rows}
    assert len(losses["ddp"]) == len(losses["one"]) == 3
    assert losses["ddp"] == pytest.approx(losses["one"], abs=1e-5)
    for name, logged in losses.items():  # float32 numbers, as the log's rows promise
        assert logged == [float(torch.tensor(x, dtype=torch.float32)) for x in logged], name


def test_a_resumed_ddp_run_with_dropout_trains_as_the_uninterrupted_one(tmp_path):
    """Six steps, then --resume to twelve, trains as twelve in one go, with dropout under
    two processes. Each process draws its own dropout masks (classify's batches differ in
    length, so the processes' random states part after the first step); the checkpoint held
    rank 0's random state only, which both processes took back, so rank 1's masks after the
    resume were not those of the uninterrupted run: later losses and the weights differed."""
    data = tmp_path / "reviews.csv"
    with open(data, "w", newline="") as f:  # texts of 1 to 12 words: batches of many lengths
        csv.writer(f).writerows([("text", "label")] + [
            (" ".join(["very"] * (i * 7 % 12) + [("great", "awful")[i % 2]]),
             ("pos", "neg")[i % 2]) for i in range(120)])
    args = ["--data", str(data), "--tokenizer", "word", "--model-dim", "16", "--num-heads",
            "2", "--num-layers", "1", "--dropout", "0.3", "--batch-size", "8", "--warmup", "0",
            "--schedule", "constant", "--lr", "3e-3", "--val-every", "100", "--threads", "1"]
    for name, steps in (("whole", "12"), ("split", "6")):
        proc = train_ddp("classify", tmp_path / name, *args, "--max-steps", steps)
        assert proc.returncode == 0, proc.stderr[-3000:]
    proc = train_ddp("classify", tmp_path / "split", "--resume", "--max-steps", "12")
    assert proc.returncode == 0, proc.stderr[-3000:]
    logs = tmp_path / "split" / "logs"
    rows = {"whole": read_rows(tmp_path / "whole" / "logs" / "metrics.csv"),
            "split": read_rows(logs / "metrics.csv")}  # the whole run, each step once
    losses = {name: [(r["step"], r["train_loss"]) for r in rows[name] if r.get("train_loss")]
              for name in rows}
    assert len(losses["whole"]) == 12
    assert losses["split"] == losses["whole"]
    weights = {name: load_file(tmp_path / name / "model.safetensors") for name in rows}
    for key, value in weights["whole"].items():
        assert torch.equal(weights["split"][key], value), key


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _few_reviews(path):
    """Twelve rows: in batches of 32, one batch, for two processes."""
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([("text", "label")] + [
            (("great", "awful")[i % 2] + " film", ("pos", "neg")[i % 2]) for i in range(12)])
    return path


FEW_BATCHES = ["--tokenizer", "word", "--model-dim", "16", "--num-heads", "2", "--num-layers",
               "1", "--batch-size", "32", "--max-steps", "3"]
TOO_FEW = "--batch-size 32: the training split makes fewer batches than the 2 processes"


def test_fewer_training_batches_than_processes_is_refused_not_an_endless_search(tmp_path,
                                                                             spawn):
    """Twelve rows in batches of 32 make one batch for two processes: the one without a batch
    looked for one forever, deaf to Ctrl-C and SIGTERM (the test's timeout ends a hang)."""
    out = tmp_path / "run"
    proc = start_ddp(spawn, "classify", out, "--data", str(_few_reviews(tmp_path / "few.csv")),
                     *FEW_BATCHES)
    _, err = proc.communicate(timeout=240)  # (the spawn fixture ends both ranks of a hang)
    assert proc.returncode == 2, err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("attnlab: error")]
    assert len(errors) == 1 and TOO_FEW in errors[0], err
    assert not out.exists()


def test_too_few_training_batches_are_refused_before_the_other_processes_start(
        tmp_path, monkeypatch, capsys):
    """The refusal came only once both processes had started and joined (minutes on a busy
    machine, for a user error the first process can tell from its data alone)."""
    def launched(*args):
        raise AssertionError("the other processes were started for a refused run")

    monkeypatch.setattr("attnlab.training.engine.launch", launched)
    out = tmp_path / "run"
    assert main(["train", "classify", "--out", str(out), "--devices", "2", "--strategy", "ddp",
                 "--accelerator", "cpu", "--data", str(_few_reviews(tmp_path / "few.csv")),
                 *FEW_BATCHES]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and TOO_FEW in errors[0], errors
    assert not out.exists()
