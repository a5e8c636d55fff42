"""Loading never runs code hidden in a file, and refuses broken or mismatched files by name."""
import os
import pickle
import shutil

import pytest

from attnlab.cli import main

pytestmark = pytest.mark.slow  # every test uses a trained reverse run


class _Payload:
    """Unpickling this runs ``touch MARKER`` — what a poisoned checkpoint would do."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture
def run_copy(reverse_run, tmp_path):
    dest = tmp_path / "run"
    shutil.copytree(reverse_run, dest)
    return dest


def _one_error_line(capsys):
    """The error's one line (training may have printed its banner to stderr before it)."""
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("attnlab: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == errors[0]
    return errors[0]


def test_poisoned_checkpoint_is_refused_and_never_executed(run_copy, tmp_path, capsys):
    marker = tmp_path / "PAYLOAD_RAN"
    ckpt = run_copy / "checkpoints" / "last.ckpt"
    with open(ckpt, "wb") as f:
        pickle.dump({"state_dict": _Payload(marker)}, f)
    code = main(["train", "reverse", "--out", str(run_copy), "--resume", "--max-steps", "40"])
    assert code == 2
    line = _one_error_line(capsys)
    assert str(ckpt) in line and "refusing" in line
    assert not marker.exists(), "the poisoned checkpoint's code ran"


@pytest.mark.parametrize("damage", ["truncated", "random bytes"])
def test_truncated_checkpoint_is_refused_by_name(run_copy, capsys, damage):
    """A damaged file is called corrupt, not a file that could run code (random bytes fail
    weights-only unpickling too, on an unknown operand rather than a forbidden global)."""
    ckpt = run_copy / "checkpoints" / "last.ckpt"
    ckpt.write_bytes(ckpt.read_bytes()[:200] if damage == "truncated"
                     else bytes(range(256)) * 8)
    assert main(["train", "reverse", "--out", str(run_copy), "--resume", "--max-steps", "40"]) == 2
    line = _one_error_line(capsys)
    assert str(ckpt) in line and "truncated or corrupt" in line and "run code" not in line


def test_truncated_weights_are_refused_by_name(run_copy, capsys):
    weights = run_copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    assert main(["predict", str(run_copy), "--input", "1 2 3"]) == 2
    line = _one_error_line(capsys)
    assert str(weights) in line


def test_weights_that_are_a_pickle_are_refused(run_copy, tmp_path, capsys):
    marker = tmp_path / "PAYLOAD_RAN"
    with open(run_copy / "model.safetensors", "wb") as f:
        pickle.dump(_Payload(marker), f)
    assert main(["evaluate", str(run_copy)]) == 2
    assert "model.safetensors" in _one_error_line(capsys)
    assert not marker.exists()


def test_config_and_weights_that_disagree_name_the_mismatch(run_copy, capsys):
    cfg = run_copy / "config.yaml"
    cfg.write_text(cfg.read_text().replace("model_dim: 16", "model_dim: 32"))
    assert main(["predict", str(run_copy), "--input", "1 2 3"]) == 2
    line = _one_error_line(capsys)
    assert "does not match config.yaml" in line and "input_net" in line


def test_broken_config_in_run_directory(run_copy, capsys):
    (run_copy / "config.yaml").write_text("task: reverse\nmodel_dim: [16\n")
    assert main(["evaluate", str(run_copy)]) == 2
    assert "config.yaml" in _one_error_line(capsys)
