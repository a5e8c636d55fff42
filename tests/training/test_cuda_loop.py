"""The training loop on a GPU (skipped without one; ``pytest -m cuda``): FSDP trains with
gradient clipping and resumes, logs the gradient norm without clipping, and the steps between
the ones that log read nothing off the device."""
import json

import pytest
import torch

from attnlab.cli import main

from ..reliability.conftest import write_corpus

pytestmark = [pytest.mark.cuda, pytest.mark.slow,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

LM = ["--model-dim", "64", "--num-heads", "4", "--num-layers", "2", "--block-size", "32",
      "--batch-size", "8", "--warmup", "5", "--val-batches", "2", "--checkpoint-every", "10"]


def test_fsdp_trains_with_gradient_clipping_and_resumes(tmp_path):
    """--strategy fsdp used to crash at the first step (Lightning's Trainer: "gradient_clip_
    algorithm='norm' is currently not supported for FSDPPrecision"); Fabric clips the sharded
    gradients by norm."""
    out, data = tmp_path / "fsdp", write_corpus(tmp_path / "c.txt")
    argv = ["train", "lm", "--data", str(data), "--out", str(out), *LM, "--strategy", "fsdp",
            "--accelerator", "gpu", "--devices", "1", "--grad-clip", "1.0",
            "--precision", "bf16-mixed"]
    assert main([*argv, "--max-steps", "20"]) == 0
    assert json.loads((out / "metrics.json").read_text())["steps"] == 20
    assert main(["train", "lm", "--out", str(out), "--resume", "--max-steps", "30"]) == 0
    assert json.loads((out / "metrics.json").read_text())["steps"] == 30


@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed", "32"])
def test_steps_that_log_nothing_never_synchronise(tmp_path, monkeypatch, precision):
    """Between the steps that log, show, validate or save, the loop queues work without
    waiting for the GPU: torch's sync debug mode, set to raise, is on for every such step's
    forward, backward, clipping, (fused, scaled) optimiser step and schedule."""
    from .loop_probe import probe_loop

    quiet = []

    class NoSync:
        def on_train_batch_start(self, loop, batch):
            after = loop.step + 1
            if after % loop.log_every and not loop.progress.reads_train_loss(after):
                torch.cuda.set_sync_debug_mode("error")
                quiet.append(after)

        def on_train_batch_end(self, loop):
            torch.cuda.set_sync_debug_mode(0)

    probe_loop(monkeypatch, NoSync())
    try:
        out = tmp_path / "lm"
        assert main(["train", "lm", "--data", str(write_corpus(tmp_path / "c.txt")), "--out",
                     str(out), *LM, "--accelerator", "gpu", "--precision", precision,
                     "--max-steps", "60", "--checkpoint-every", "1000"]) == 0
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert len(quiet) > 30, quiet


@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed"])
def test_fsdp_logs_the_gradient_norm_without_clipping(tmp_path, precision):
    """At --grad-clip 0 the steps that log still measure the norm, through Fabric's clipping
    over the shards with no limit (16-mixed: the per-tensor AdamW, which Fabric unscales)."""
    import csv

    out = tmp_path / "fsdp"
    assert main(["train", "lm", "--data", str(write_corpus(tmp_path / "c.txt")), "--out",
                 str(out), *LM, "--strategy", "fsdp", "--accelerator", "gpu", "--devices", "1",
                 "--grad-clip", "0", "--precision", precision, "--max-steps", "20"]) == 0
    with open(out / "logs" / "metrics.csv") as f:
        norms = [float(r["grad_norm"]) for r in csv.DictReader(f) if r["train_loss"]]
    # 16-mixed: a step whose scaled gradients overflowed (skipped by the scaler) logs inf
    assert len(norms) == 20 and all(n > 0 for n in norms), norms  # NaN > 0 is False
    assert sum(n < float("inf") for n in norms) >= 15, norms
