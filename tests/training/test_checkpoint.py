"""Checkpoints: a run checkpointed by Lightning's Trainer (attnlab before its own loop)
continues under the Fabric loop as the Trainer would have continued it, or is refused in one
line naming why; and a checkpoint is never left half written.

The fixture ``tests/fixtures/reverse-trainer`` is a reversal run of 20 steps (dropout 0.1,
checkpoints every 10 steps) made by the Trainer-based attnlab (main at cf84a97, the code before
the loop moved to Fabric); ``reverse-trainer-resumed-to-30.safetensors`` is the model that code
made from it with ``--resume --max-steps 30``.

Exact equality across machines needs the same arithmetic: the same matrix product rounds
differently with AVX2 and AVX-512 kernels, and Adam turns that rounding into differences of
1e-4 in weights whose gradients are near zero. So the continuation runs in a process with
the vector kernels fixed (``SAME_ARITHMETIC``: MKL's conditional numerical reproducibility,
ATen's and oneDNN's kernels without vector extensions, one thread), and the fixture was made
the same way, by that code on this fixture:

    git worktree add /tmp/trainer cf84a97 && cp -r tests/fixtures/reverse-trainer /tmp/run
    cd /tmp/trainer && env MKL_CBWR=COMPATIBLE ATEN_CPU_CAPABILITY=default \
        ONEDNN_MAX_CPU_ISA=SSE41 OMP_NUM_THREADS=1 PYTHONPATH=$PWD \
        python -m attnlab train reverse --out /tmp/run --resume --max-steps 30 --threads 1
    cp /tmp/run/model.safetensors tests/fixtures/reverse-trainer-resumed-to-30.safetensors
"""
import errno
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from attnlab.cli import main

FIXTURES = Path(__file__).parent.parent / "fixtures"
ROOT = Path(__file__).parent.parent.parent

SAME_ARITHMETIC = {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "default",
                   "ONEDNN_MAX_CPU_ISA": "SSE41", "OMP_NUM_THREADS": "1"}

pytestmark = pytest.mark.slow  # trains runs


def _copy(tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "reverse-trainer", run)
    return run


def test_a_trainer_checkpoint_continues_exactly_as_the_trainer_continued_it(tmp_path):
    run = _copy(tmp_path)
    env = {**os.environ, **SAME_ARITHMETIC,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "attnlab", "train", "reverse", "--out", str(run),
                           "--resume", "--max-steps", "30", "--threads", "1"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    ours = load_file(run / "model.safetensors")
    theirs = load_file(FIXTURES / "reverse-trainer-resumed-to-30.safetensors")
    assert ours.keys() == theirs.keys()
    for name in ours:  # the same batches, dropout masks, optimiser state and schedule
        torch.testing.assert_close(ours[name], theirs[name], rtol=0, atol=1e-6,
                                   msg=lambda m: f"{name}: {m}")
    saved = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert saved["format"] == 2 and saved["global_step"] == 30


def test_a_trainer_checkpoint_without_the_data_position_is_refused_in_one_line(tmp_path, capsys):
    run = _copy(tmp_path)
    ckpt = run / "checkpoints" / "last.ckpt"
    state = torch.load(ckpt, weights_only=True)
    del state["loops"]  # e.g. saved with save_weights_only, or by another Lightning version
    torch.save(state, ckpt)
    kept = {p.name: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    assert main(["train", "reverse", "--out", str(run), "--resume", "--max-steps", "30"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"attnlab: error: --resume: {ckpt} was written by Lightning's Trainer "
                       f"and lacks the position in the training data, so the run cannot "
                       f"continue as it would have; start it again with another --out")
    assert {p.name: p.read_bytes() for p in run.rglob("*") if p.is_file()} == kept


def test_a_checkpoint_of_an_unknown_format_is_refused(tmp_path, capsys):
    run = _copy(tmp_path)
    ckpt = run / "checkpoints" / "last.ckpt"
    torch.save({"format": 7, "state_dict": {}}, ckpt)
    assert main(["train", "reverse", "--out", str(run), "--resume", "--max-steps", "30"]) == 2
    assert "checkpoint of format 7, which this attnlab does not read" in capsys.readouterr().err


def test_a_checkpoint_is_written_whole_or_not_at_all(tmp_path, monkeypatch, capsys):
    """A disk that fills while the checkpoint is written leaves the previous last.ckpt as it
    was (the new one is written under another name and renamed), takes back the space of the
    half-written file, and says in one line which file could not be written."""
    run = _copy(tmp_path)
    ckpt = run / "checkpoints" / "last.ckpt"
    before = ckpt.read_bytes()

    def fail(obj, f, *args, **kwargs):
        f.write(b"half a checkpoint")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", fail)
    assert main(["train", "reverse", "--out", str(run), "--resume", "--max-steps", "30"]) == 1
    assert ckpt.read_bytes() == before
    assert sorted(p.name for p in ckpt.parent.iterdir()) == ["last.ckpt"]
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == f"attnlab: cannot write to {ckpt}: No space left on device"


def test_a_checkpoint_does_not_pass_through_tmpdir(tmp_path, monkeypatch):
    """The checkpoint goes straight into the run directory: a full or unusable $TMPDIR (a
    small /tmp on many machines) does not stop a run whose directory has room."""
    run = _copy(tmp_path)
    unusable = tmp_path / "tmpdir-is-a-file"
    unusable.write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(unusable))
    assert main(["train", "reverse", "--out", str(run), "--resume", "--max-steps", "30"]) == 0
    state = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert state["global_step"] == 30
