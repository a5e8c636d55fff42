"""``--resume`` of a run whose precision the machine changed: a CPU runs ``--precision
16-mixed`` as bf16-mixed, which config.yaml records; the same command with ``--resume`` was
refused as asking for another precision."""
import pytest

from attnlab.cli import main
from attnlab.commands.preflight import check_resumed_precision
from attnlab.errors import UsageError
from attnlab.runs import read_json, read_yaml, write_yaml

TINY = ["--model-dim", "8", "--num-heads", "1", "--num-layers", "1", "--batch-size", "4",
        "--train-size", "64", "--val-size", "8", "--test-size", "8", "--threads", "1",
        "--accelerator", "cpu", "--precision", "16-mixed"]


@pytest.mark.slow
def test_a_cpu_run_of_16_mixed_resumes_with_the_same_flags(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(run), "--max-steps", "2", *TINY]) == 0
    assert read_yaml(run / "config.yaml")["precision"] == "bf16-mixed"
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(run), "--max-steps", "4", *TINY,
                 "--resume"]) == 0, capsys.readouterr().err
    assert read_json(run / "metrics.json")["steps"] == 4


def test_a_resumed_precision_that_runs_as_another_is_refused_naming_both(tmp_path):
    """Where the device runs the precision asked as it is (16-mixed on a GPU), it is not the
    run's bf16-mixed, and the refusal says what runs and what the run has."""
    write_yaml(tmp_path / "config.yaml", {"task": "reverse", "precision": "bf16-mixed"})
    check_resumed_precision(tmp_path, "16-mixed", "bf16-mixed")  # a CPU: the same
    with pytest.raises(UsageError, match=r"^--resume: --precision 16-mixed runs as 16-mixed "
                                         r"here \(the run has bf16-mixed\)"):
        check_resumed_precision(tmp_path, "16-mixed", "16-mixed")
