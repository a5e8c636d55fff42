"""Two DDP processes on CPU (gloo) train one reversal model and leave one valid run directory."""
import json

import pytest

from attnlab.cli import main

from .conftest import train_ddp

pytestmark = pytest.mark.slow  # trains with two DDP processes


def test_two_process_ddp_run_writes_a_valid_run_directory(tmp_path, capsys):
    out = tmp_path / "ddp"
    proc = train_ddp("reverse", out, "--max-steps", "40", "--train-size", "512", "--val-size",
                     "64", "--test-size", "128", "--model-dim", "16", "--num-heads", "1",
                     "--batch-size", "32", "--val-every", "20", "--no-early-stop")
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == 40
    assert 0.0 <= metrics["test_token_accuracy"] <= 1.0
    # one summary (rank 0 only) and a model that loads and predicts
    assert proc.stdout.count("reverse run:") == 1
    assert proc.stderr.count("attnlab train reverse ->") == 1, proc.stderr  # not once a rank
    capsys.readouterr()
    assert main(["predict", str(out), "--input", "1 2 3 4"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()[-1].split()) == 4
