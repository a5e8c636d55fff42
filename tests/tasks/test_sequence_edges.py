"""The per-element tasks (reverse, copy, sort) at the edges of their flags, from the command
line."""
import pytest

from attnlab.cli import main
from attnlab.models.configs import ElementPredictorConfig


@pytest.mark.parametrize("task", ["reverse", "sort"])
def test_seq_len_past_the_position_table_exits_2_before_a_run_directory(tmp_path, capsys, task):
    # the model's sinusoidal table holds max_len positions: a longer --seq-len trained until the
    # first forward pass, then ended in a traceback (exit 1)
    longest = ElementPredictorConfig().max_len
    out = tmp_path / "r"
    argv = ["train", task, "--out", str(out), "--seq-len", str(longest + 1), "--train-size", "2",
            "--val-size", "1", "--test-size", "1", "--max-steps", "1", "--batch-size", "2"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--seq-len" in err and f"got {longest + 1}" in err
    assert "Traceback" not in err
    assert not out.exists()
