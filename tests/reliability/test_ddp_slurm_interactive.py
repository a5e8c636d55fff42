"""An srun step of several tasks in a SLURM job named ``bash`` or ``interactive`` (``srun --pty
bash``'s): Lightning takes such a job for an interactive shell and reads none of SLURM's
variables, so each task trained a model of its own, all in one run directory, without a word.
Refused in one line naming the variable, before anything is written."""
import pytest

from attnlab.cli import main
from attnlab.training import engine
from attnlab.training.hardware import check_launch

from .conftest import TINY_REVERSE
from .test_ddp_launchers import launched_as, one_line_error, srun  # noqa: F401 (a fixture)
from attnlab.commands import train as train_command


@pytest.mark.parametrize("name", ["bash", "interactive"])
@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("devices", ["1", "2"])
def test_an_srun_step_of_several_tasks_in_an_interactive_job_is_refused(
        name, rank, devices, tmp_path, capsys, launched_as, monkeypatch):
    launched_as(**{**srun(rank, 2), "SLURM_JOB_NAME": name})
    monkeypatch.setattr(engine, "launch", lambda *a: pytest.fail("launched: a model per task"))
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), "--devices", devices, "--accelerator",
                 "cpu", *TINY_REVERSE]) == 2
    line = one_line_error(capsys)
    assert line.startswith(f"attnlab: error: SLURM_JOB_NAME {name}: "), line
    assert "each of this srun step's 2 tasks (SLURM_STEP_NUM_TASKS)" in line, line
    assert not out.exists()


def test_the_interactive_shell_itself_and_torchrun_inside_it_pass():
    """``srun --pty bash`` is a step of one task: attnlab's --devices N starts the others there,
    as Lightning means it to; torchrun inside such a step sets WORLD_SIZE."""
    cfg = train_command.get_task("reverse").config(devices=2, strategy="ddp")
    shell = {key: str(value) for key, value in srun(0, 1).items()}
    check_launch(cfg, {**shell, "SLURM_JOB_NAME": "bash"})
    torchrun_in_step = {**shell, "SLURM_JOB_NAME": "interactive", "SLURM_STEP_NUM_TASKS": "2",
                        "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "RANK": "0",
                        "LOCAL_RANK": "0", "TORCHELASTIC_RUN_ID": "none"}
    check_launch(cfg, torchrun_in_step)
