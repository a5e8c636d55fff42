"""`attnlab train reverse` end to end, in-process: the run directory, load, predict, evaluate,
reproducibility and --resume after an interrupted run."""
import csv
import json
import re
from pathlib import Path

import pytest
import torch

import attnlab
from attnlab.cli import main
from attnlab.data import SequenceDataset, batch_loader

pytestmark = pytest.mark.slow  # every test trains a run through the CLI or uses one

TEST_KEYS = {"test_token_accuracy", "test_sequence_accuracy", "steps", "train_seconds", "parameters"}
# the validation of the saved weights (the last step is validated: --val-every divides the steps)
VAL_KEYS = {"val_loss", "val_acc", "val_seq_acc"}
DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """The main job on its defaults (early stopping makes it a few seconds)."""
    out = tmp_path_factory.mktemp("runs") / "reverse"
    assert main(["train", "reverse", "--out", str(out)]) == 0
    return out


def test_run_directory_is_complete(run_dir, capsys):
    for name in ("config.yaml", "model.safetensors", "metrics.json", "checkpoints/last.ckpt",
                 "attention.png", "lr_schedule.png"):
        assert (run_dir / name).is_file(), name
    assert (run_dir / "attention.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    stopped = metrics["steps"] < 600  # and why the run stopped before its budget
    assert set(metrics) == (TEST_KEYS | VAL_KEYS | {"precision", "compile"}
                            | ({"stopped_early"} if stopped else set()))
    assert metrics["precision"] == "32" and metrics["compile"] is False  # how it trained
    assert metrics.get("stopped_early", "") == ("val_seq_acc reached 1 at 3 validations in a row"
                                                if stopped else "")
    # the defaults' promise (docs/reverse.md): every one of the 10,000 test sequences reversed
    assert metrics["test_sequence_accuracy"] == 1.0 and metrics["test_token_accuracy"] == 1.0
    assert 0 < metrics["steps"] <= 600 and metrics["parameters"] > 0



def test_the_default_run_stops_within_the_steps_the_pages_give(run_dir):
    """docs/reverse.md gives the range of steps the default reversal run stops at and
    docs/cli.md shows its stopping line; the pages once said 110 after the run came to stop at
    100, and another CPU's kernels or --threads 2 stop it at 110: the pages give the range
    (100-130), the step measured here and what made it differ, and this run falls in it."""
    metrics = json.loads((run_dir / "metrics.json").read_text())
    reverse = re.sub(r"\s+", " ", (DOCS / "reverse.md").read_text(encoding="utf-8"))
    low, high = map(int, re.search(r"the run stops after (\d+)–(\d+) steps", reverse).groups())
    assert low <= metrics["steps"] <= high, (low, high, metrics["steps"])
    said = re.search(r"the default 42 \((\d+) steps on our machine with one thread", reverse)
    assert said and low <= int(said[1]) <= high, said and said[0]
    cli = re.sub(r"\s+", " ", (DOCS / "cli.md").read_text(encoding="utf-8"))
    shown = re.search(r"`stopped early at step (\d+)/600: (.*?)`", cli)
    assert shown and low <= int(shown[1]) <= high, shown and shown[0]
    assert shown[2] == metrics["stopped_early"]

def test_loaded_model_reverses_held_out_sequences(run_dir):
    model = attnlab.load(run_dir)
    assert not any(isinstance(m, torch.nn.Module) and "lightning" in type(m).__module__
                   for m in model.modules())
    held_out = SequenceDataset("reverse", 10, 16, 500, seed=2024, split="test")  # another seed
    predicted = model.predict(held_out.inputs)
    assert (predicted == held_out.inputs.flip(-1)).all(-1).float().mean() >= 0.99


def test_predict_prints_the_reversal_as_last_line(run_dir, capsys):
    tokens = "3 1 4 1 5 9 2 6 5 3 5 8 9 7 9 3"
    assert main(["predict", str(run_dir), "--input", tokens]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == " ".join(reversed(tokens.split()))
    assert main(["predict", str(run_dir), "--input", "3 1 4 1 5"]) == 0  # shorter: padded
    assert capsys.readouterr().out.strip().splitlines()[-1] == "5 1 4 1 3"


def test_evaluate_reproduces_the_test_metrics(run_dir, capsys, tmp_path):
    assert main(["evaluate", str(run_dir)]) == 0
    printed = json.loads(capsys.readouterr().out)
    saved = json.loads((run_dir / "metrics.json").read_text())
    assert printed == {k: saved[k] for k in ("test_token_accuracy", "test_sequence_accuracy")}
    data = tmp_path / "seqs.txt"
    data.write_text("1 2 3\n9 8 7 6 5 4 3 2 1 0 1 2 3 4 5 6\n")
    assert main(["evaluate", str(run_dir), "--data", str(data)]) == 0
    assert json.loads(capsys.readouterr().out)["test_sequence_accuracy"] == 1.0


TINY = ["--max-steps", "30", "--no-early-stop", "--test-size", "300", "--val-size", "64",
        "--train-size", "2000", "--model-dim", "16", "--val-every", "10"]


def test_same_seed_same_metrics(tmp_path):
    results = []
    for name in ("a", "b"):
        assert main(["train", "copy", "--out", str(tmp_path / name), "--seed", "3", *TINY]) == 0
        m = json.loads((tmp_path / name / "metrics.json").read_text())
        m.pop("train_seconds")
        results.append(m)
    assert results[0] == results[1]
    wa = torch.load(tmp_path / "a" / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    wb = torch.load(tmp_path / "b" / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


class _Interrupt(Exception):
    pass


@pytest.mark.filterwarnings("error:.*dataloader is not resumable")
def test_resume_continues_from_checkpoint_to_the_budget(tmp_path, monkeypatch):
    """Crash at step 25 (checkpoints every 10), then --resume: training restarts at step 20
    (the last checkpoint, not 0) and ends at the budget of 40 steps."""
    from ..training.loop_probe import probe_loop

    starts, first_batches = [], []

    class Probe:
        def __init__(self, crash_at):
            self.crash_at = crash_at

        def on_train_start(self, loop):
            starts.append(loop.step)

        def on_train_batch_start(self, loop, batch):
            if len(first_batches) < len(starts):
                first_batches.append(batch[0].clone())

        def on_train_batch_end(self, loop):
            if loop.step == self.crash_at:
                raise _Interrupt(f"simulated kill at step {loop.step}")

    out = tmp_path / "run"
    flags = [*TINY, "--max-steps", "40", "--checkpoint-every", "10"]
    probe_loop(monkeypatch, Probe(25))
    with pytest.raises(_Interrupt):
        main(["train", "reverse", "--out", str(out), *flags])
    assert not (out / "metrics.json").exists()
    ckpt = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] == 20

    probe_loop(monkeypatch, Probe(None))
    assert main(["train", "reverse", "--out", str(out), "--resume"]) == 0
    assert starts == [0, 20]  # the second run started from the checkpoint, not from scratch
    # ... and with the batch an uninterrupted run would see at step 20: epoch 1, batch 4
    loader = batch_loader(SequenceDataset("reverse", 10, 16, 2000, seed=42), 128, shuffle=True, seed=42)
    list(loader)
    expected = [x for x, _ in loader][20 - 16]
    assert torch.equal(first_batches[1], expected)
    assert json.loads((out / "metrics.json").read_text())["steps"] == 40
    with open(out / "logs" / "metrics.csv") as f:  # the whole run, each step once
        logged = [int(r["step"]) for r in csv.DictReader(f) if r.get("train_loss")]
    assert logged == sorted(set(logged)) and logged[0] <= 20 < logged[-1] == 40
    with open(out / "logs" / "metrics.part1.csv") as f:  # the interrupted part's log is kept
        before = [int(r["step"]) for r in csv.DictReader(f) if r.get("train_loss")]
    assert before and 20 < max(before) < 25
