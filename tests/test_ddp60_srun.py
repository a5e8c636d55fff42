"""Processes that SLURM's srun starts need --out, as torchrun's do."""
import pytest

from attnlab.cli import main
from tests.reliability.conftest import TINY_REVERSE

SRUN_RANK_ZERO = {"SLURM_NTASKS": "2", "SLURM_NTASKS_PER_NODE": "2", "SLURM_PROCID": "0",
                  "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_JOB_NAME": "train",
                  "SLURM_JOB_ID": "41", "SLURM_NODELIST": "localhost"}


def one_line_error(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.slow  # imports Lightning for the refusal it should not reach
def test_processes_started_by_srun_without_out_are_refused(tmp_path, capsys, monkeypatch):
    """srun starts every process itself, with no WORLD_SIZE: rank 0 took runs/TASK-<time>
    and wrote its config.yaml there, and rank 1 (which is no child of rank 0, so has no
    ATTNLAB_RUN_DIR) found that name taken and made runs/TASK-<time>-2, a second directory
    that nothing used. Refused, naming --out, before anything is written."""
    monkeypatch.chdir(tmp_path)
    for name, value in SRUN_RANK_ZERO.items():
        monkeypatch.setenv(name, value)
    for name in ("WORLD_SIZE", "LOCAL_RANK", "RANK", "ATTNLAB_RUN_DIR"):
        monkeypatch.delenv(name, raising=False)
    assert main(["train", "reverse", "--max-steps", "2", *TINY_REVERSE[2:]]) == 2
    assert one_line_error(capsys) == ("attnlab: error: 2 processes started by srun need "
                                      "--out DIR: each would choose its own default run "
                                      "directory")
    assert list(tmp_path.iterdir()) == []


def test_an_interactive_slurm_job_is_not_taken_for_srun(monkeypatch):
    """Lightning leaves a job named bash or interactive to another launcher (its
    SLURMEnvironment): such a job's one process chooses its own default directory."""
    from attnlab.commands.train import _launched

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    for name, value in SRUN_RANK_ZERO.items():
        monkeypatch.setenv(name, value)
    assert _launched() == (2, "srun")
    monkeypatch.setenv("SLURM_JOB_NAME", "interactive")
    assert _launched() == (1, "")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert _launched() == (4, "torchrun")


@pytest.mark.slow  # imports Lightning for the refusal it should not reach
def test_srun_processes_that_are_not_the_runs_devices_are_refused(tmp_path, capsys,
                                                                 monkeypatch):
    """srun started 2 processes for a run of --devices 1 (the default): Lightning trained each
    process alone, and both wrote the same --out as its only process (rank 0 trained into it
    and exited 0; rank 1 alone would too). Refused, naming --devices, before anything is
    written."""
    for name, value in SRUN_RANK_ZERO.items():
        monkeypatch.setenv(name, value)
    for name in ("WORLD_SIZE", "LOCAL_RANK", "RANK", "ATTNLAB_RUN_DIR"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), "--max-steps", "2",
                 *TINY_REVERSE[2:]]) == 2
    assert one_line_error(capsys) == (
        "attnlab: error: 2 processes started by srun, but --devices 1 --num-nodes 1 make 1: "
        "each would train a run of its own; give the --devices (srun's --ntasks-per-node) and "
        "--num-nodes (its --nodes) that make 2")
    assert not out.exists()
