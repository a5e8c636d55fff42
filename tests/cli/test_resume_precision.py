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


def _a_gpu_run_of_16_mixed(tmp_path):
    """A run as a GPU leaves it (config.yaml: 16-mixed), trained here in float32 for speed."""
    run = tmp_path / "run"
    flags = [f for f in TINY if f not in ("--precision", "16-mixed")]
    assert main(["train", "reverse", "--out", str(run), "--max-steps", "2", *flags]) == 0
    saved = read_yaml(run / "config.yaml")
    write_yaml(run / "config.yaml", {**saved, "precision": "16-mixed"})
    return run, flags


@pytest.mark.slow
def test_a_gpu_run_of_16_mixed_resumes_on_a_cpu_without_the_flag(tmp_path, capsys):
    run, flags = _a_gpu_run_of_16_mixed(tmp_path)
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(run), "--max-steps", "4", *flags,
                 "--resume"]) == 0, capsys.readouterr().err
    assert "running bf16-mixed" in capsys.readouterr().err
    assert read_json(run / "metrics.json")["steps"] == 4


@pytest.mark.slow
def test_a_precision_given_that_a_cpu_runs_as_another_is_refused_in_one_line(tmp_path, capsys):
    run, flags = _a_gpu_run_of_16_mixed(tmp_path)
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(run), "--max-steps", "4", *flags,
                 "--precision", "16-mixed", "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnlab: error: --resume: --precision 16-mixed runs as bf16-mixed "
                          "here (the run has 16-mixed)"), err
    assert err.count("\n") == 1, err  # no note above the refusal
    config = tmp_path / "settings.yaml"
    write_yaml(config, {"precision": "bf16-mixed"})  # another than the run's: asked for
    assert main(["train", "reverse", "--out", str(run), "--max-steps", "4", *flags,
                 "--config", str(config), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "precision: bf16-mixed in --config" in err and "drop the setting" in err, err
    assert err.count("\n") == 1, err
