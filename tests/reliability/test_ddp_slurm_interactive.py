"""An srun step of several tasks in a SLURM job named ``bash`` or ``interactive`` (salloc's own
name, ``salloc -N2`` then ``srun attnlab train``): Lightning takes such a job for an interactive
shell and reads none of SLURM's variables, so each task trained a model of its own, all in one
run directory, without a word. A task above 0 (``SLURM_PROCID``) refuses in one line naming the
variable, before anything is written. Task 0 looks like the one shell of ``srun
--ntasks-per-node 4 --pty bash``, where ``--devices 4`` is how to train: it trains, warned."""
import pytest

from attnlab.cli import main
from attnlab.training import engine
from attnlab.training.hardware import check_hardware, check_launch

from .conftest import TINY_REVERSE
from .test_ddp_launchers import launched_as, one_line_error, srun  # noqa: F401 (a fixture)
from attnlab.commands import train as train_command


@pytest.mark.parametrize("name", ["bash", "interactive"])
@pytest.mark.parametrize("devices", ["1", "2"])
def test_a_later_task_of_an_srun_step_in_an_interactive_job_is_refused(
        name, devices, tmp_path, capsys, launched_as, monkeypatch):
    launched_as(**{**srun(1, 2), "SLURM_JOB_NAME": name})
    monkeypatch.setattr(engine, "launch", lambda *a: pytest.fail("launched: a model per task"))
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), "--devices", devices, "--accelerator",
                 "cpu", *TINY_REVERSE]) == 2
    line = one_line_error(capsys)
    assert line.startswith(f"attnlab: error: SLURM_JOB_NAME {name}: "), line
    assert "each of this srun step's 2 tasks (SLURM_STEP_NUM_TASKS)" in line, line
    assert "(this is task SLURM_PROCID 1)" in line and "--job-name" in line, line
    assert not out.exists()


def test_the_shell_of_srun_pty_with_the_steps_tasks_trains_warned(launched_as, capsys):
    """``srun --ntasks-per-node 4 --gres gpu:4 --pty bash`` runs one shell that holds the
    step's SLURM_STEP_NUM_TASKS 4; ``--devices 4`` there starts the other processes itself (as
    before the check): not refused, as task 0 of a real step of four cannot be told from it,
    but warned, in a line that names the way out (--job-name)."""
    launched_as(**{**srun(0, 4), "SLURM_JOB_NAME": "bash"})
    cfg = train_command.get_task("reverse").config(devices=2, strategy="ddp",
                                                   accelerator="cpu")
    check_hardware(cfg)
    err = capsys.readouterr().err
    warned = [line for line in err.splitlines() if line.startswith("warning: SLURM_JOB_NAME")]
    assert len(warned) == 1, err
    assert "step's 4 tasks (SLURM_STEP_NUM_TASKS), each trains a model of its own" in warned[0]
    assert "salloc or sbatch --job-name NAME" in warned[0], warned[0]
    check_hardware(cfg, quiet=True)  # a process Lightning started says nothing again
    assert "warning" not in capsys.readouterr().err


def test_the_interactive_shell_itself_and_torchrun_inside_it_pass():
    """``srun --pty bash`` as a step of one task: attnlab's --devices N starts the others there,
    as Lightning means it to; torchrun inside such a step sets WORLD_SIZE."""
    cfg = train_command.get_task("reverse").config(devices=2, strategy="ddp")
    shell = {key: str(value) for key, value in srun(0, 1).items()}
    assert check_launch(cfg, {**shell, "SLURM_JOB_NAME": "bash"}) is None
    torchrun_in_step = {**shell, "SLURM_JOB_NAME": "interactive", "SLURM_STEP_NUM_TASKS": "2",
                        "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "RANK": "0",
                        "LOCAL_RANK": "0", "TORCHELASTIC_RUN_ID": "none"}
    assert check_launch(cfg, torchrun_in_step) is None
