"""Processes that torchrun or srun start themselves (simulated here by the variables those
launchers set): the run's --devices and --num-nodes must be the processes the launcher started,
and every process must train in the one run directory that --out names, or the launch is
refused in one line before anything is written."""
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from attnlab.cli import main
from attnlab.commands import train as train_command
from attnlab.training import engine

from .conftest import TINY_REVERSE

LAUNCHER_KEYS = ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "MASTER_ADDR",
                 "MASTER_PORT", "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS_PER_NODE",
                 "SLURM_LOCALID", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_JOB_NAME",
                 "SLURM_NNODES", "SLURM_NODEID", "ATTNLAB_RUN_DIR", *train_command.RANK_KEYS)


@pytest.fixture
def launched_as(monkeypatch):
    """Set the environment a launcher gives one of its processes (and nothing else of any)."""
    def launch(**env):
        for key in LAUNCHER_KEYS:
            monkeypatch.delenv(key, raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, str(value))
    return launch


def torchrun(rank, world, local_world=None):
    """What ``torchrun --nproc-per-node N`` gives process ``rank``."""
    return dict(RANK=rank, LOCAL_RANK=rank, WORLD_SIZE=world,
                LOCAL_WORLD_SIZE=local_world or world, TORCHELASTIC_RUN_ID="none",
                MASTER_ADDR="127.0.0.1", MASTER_PORT="29591")


def srun(rank, tasks, step_tasks=None, per_node=None):
    """What ``srun`` gives task ``rank`` of a job step in a job of ``tasks`` tasks."""
    return dict(SLURM_PROCID=rank, SLURM_LOCALID=rank, SLURM_NTASKS=tasks,
                SLURM_STEP_NUM_TASKS=step_tasks or tasks,
                SLURM_NTASKS_PER_NODE=per_node or tasks, SLURM_JOB_ID="4242",
                SLURM_STEP_ID="0", SLURM_JOB_NAME="train", SLURM_NNODES=1, SLURM_NODEID=0)


def one_line_error(capsys):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_torchrun_processes_with_the_default_one_device_are_refused_not_trained_apart(
        tmp_path, capsys, launched_as):
    """Under ``torchrun --nproc-per-node 2`` without --devices 2, each process trained a model
    of its own on the whole data as a run of one process, and both wrote one run directory:
    refused before anything is written, naming WORLD_SIZE and --devices."""
    launched_as(**torchrun(0, 2))
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), "--max-steps", "2",
                 *TINY_REVERSE[2:]]) == 2
    line = one_line_error(capsys)
    assert line.startswith("attnlab: error: WORLD_SIZE 2: torchrun started 2 processes, but "
                           "--devices 1 --num-nodes 1 trains on 1"), line
    assert not out.exists()


@pytest.mark.parametrize("flags, named", [
    (["--devices", "4"], "WORLD_SIZE 2: torchrun started 2 processes, but --devices 4"),
    (["--devices", "1", "--num-nodes", "2"], "LOCAL_WORLD_SIZE 2 (the processes torchrun "
                                            "started on this node) but --devices 1"),
])
def test_devices_that_disagree_with_torchrun_are_refused_before_the_run_directory(
        flags, named, tmp_path, capsys, launched_as):
    launched_as(**torchrun(1, 2))
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), "--strategy", "ddp",
                 "--accelerator", "cpu", *flags, *TINY_REVERSE]) == 2
    assert named in one_line_error(capsys)
    assert not out.exists()


def test_a_local_rank_beyond_the_devices_is_refused(tmp_path, capsys, launched_as):
    """Two nodes of two processes, but this node's launcher numbered its processes to 3."""
    launched_as(**dict(torchrun(3, 4, local_world=2), LOCAL_RANK=3))
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), "--devices", "2", "--num-nodes", "2",
                 "--strategy", "ddp", "--accelerator", "cpu", *TINY_REVERSE]) == 2
    assert "LOCAL_RANK 3 (this process's place on its node) is beyond --devices 2" in \
        one_line_error(capsys)
    assert not out.exists()


def test_an_srun_step_of_fewer_tasks_than_the_job_is_refused_not_a_wait_forever(
        tmp_path, capsys, launched_as, monkeypatch):
    """``srun -n 2`` inside an ``sbatch`` of 4 tasks: Lightning takes the job's SLURM_NTASKS
    (4) as the processes and rank 0 waited for two that were never started."""
    launched_as(**srun(0, 4, step_tasks=2, per_node=2))
    monkeypatch.setattr(engine, "launch", lambda *a: pytest.fail("launched: waits for 4"))
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), "--devices", "2", "--strategy", "ddp",
                 "--accelerator", "cpu", *TINY_REVERSE]) == 2
    line = one_line_error(capsys)
    assert "SLURM_NTASKS 4 (the job's tasks) but this srun step started " \
           "SLURM_STEP_NUM_TASKS 2" in line, line
    assert not out.exists()


@pytest.mark.parametrize("rank", [0, 1])
def test_srun_processes_without_out_are_refused_not_each_its_own_directory(
        rank, tmp_path, capsys, launched_as, monkeypatch):
    """srun sets no WORLD_SIZE: without --out, rank 0 took runs/reverse-<time> and rank 1,
    which had no directory handed to it, made one of its own (the processes then waited for
    each other: stopped here at the launch)."""
    monkeypatch.chdir(tmp_path)
    launched_as(**srun(rank, 2))
    monkeypatch.setattr(engine, "launch", lambda *a: pytest.fail("launched"))
    assert main(["train", "reverse", "--devices", "2", "--strategy", "ddp", "--accelerator",
                 "cpu", *TINY_REVERSE]) == 2
    assert one_line_error(capsys) == ("attnlab: error: 2 processes started by srun need --out "
                                      "DIR: each would choose its own default run directory")
    assert list(tmp_path.iterdir()) == []


def test_processes_that_agree_with_their_launcher_pass(launched_as):
    cfg = train_command.get_task("reverse").config(devices=2, num_nodes=2, strategy="ddp")
    from attnlab.training.hardware import check_launch

    check_launch(cfg, {**torchrun(1, 4, local_world=2), "LOCAL_RANK": "1"})
    check_launch(cfg, {**srun(3, 4, per_node=2), "SLURM_LOCALID": "1", "SLURM_NNODES": "2"})
    check_launch(cfg, {})  # started by hand (Lightning's launcher starts the others)
    one = train_command.get_task("reverse").config()
    check_launch(one, torchrun(0, 1))  # torchrun --nproc-per-node 1


def batch_shell(tasks, per_node=None):
    """The shell of an ``sbatch`` script (or ``salloc``): the job's variables, no step's."""
    return dict(SLURM_NTASKS=tasks, SLURM_NTASKS_PER_NODE=per_node or tasks, SLURM_PROCID=0,
                SLURM_LOCALID=0, SLURM_JOB_ID="4242", SLURM_JOB_NAME="train", SLURM_NNODES=1,
                SLURM_NODEID=0)


@pytest.mark.parametrize("devices, env", [
    (1, batch_shell(4)),  # sbatch --ntasks-per-node=4 running `attnlab train ...` (no srun)
    (1, {**srun(0, 1), "SLURM_NTASKS_PER_NODE": "4"}),  # srun -n1 in a job of 4 tasks a node
    (2, {**srun(1, 2), "SLURM_NTASKS_PER_NODE": "4"}),  # srun -n2 in a job of 4 tasks a node
])
def test_slurm_processes_that_run_as_their_devices_ask_pass(devices, env):
    """Refused before with advice (--devices 4) that would have waited forever: srun's step
    keeps the job's SLURM_NTASKS_PER_NODE, and the job's own shell is one process (Lightning
    runs --devices 1 there on one device), whatever tasks the job has."""
    from attnlab.training.hardware import check_launch, launched

    cfg = train_command.get_task("reverse").config(devices=devices, strategy="ddp")
    check_launch(cfg, {key: str(value) for key, value in env.items()})
    if devices == 1 and "SLURM_STEP_NUM_TASKS" not in env:
        assert launched({key: str(value) for key, value in env.items()}) is None


def test_an_srun_step_of_fewer_processes_than_its_devices_is_still_refused():
    from attnlab.errors import UsageError
    from attnlab.training.hardware import check_launch

    cfg = train_command.get_task("reverse").config(devices=4, strategy="ddp")
    env = {key: str(value) for key, value in srun(0, 2, per_node=4).items()}
    with pytest.raises(UsageError, match="SLURM_NTASKS 2: srun started 2 processes, but "
                                         "--devices 4 --num-nodes 1 trains on 4"):
        check_launch(cfg, env)


def test_devices_in_an_sbatch_shell_without_srun_are_refused_naming_no_srun(
        tmp_path, capsys, launched_as, monkeypatch):
    """In the job's own shell Lightning starts no process: --devices 4 would wait forever for
    three. Refused in one line that says no srun started them (it once said srun had)."""
    launched_as(**batch_shell(4))
    monkeypatch.setattr(engine, "launch", lambda *a: pytest.fail("launched: waits for 4"))
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), "--devices", "4", "--strategy", "ddp",
                 "--accelerator", "cpu", *TINY_REVERSE]) == 2
    line = one_line_error(capsys)
    assert "SLURM_NTASKS 4 without an srun step (no SLURM_STEP_NUM_TASKS)" in line, line
    assert "srun started" not in line, line
    assert not out.exists()


@pytest.mark.slow  # waits a second for a rank 0 that is not there
def test_a_process_torchrun_started_above_rank_zero_waits_for_rank_zero_to_prepare(
        tmp_path, capsys, launched_as, monkeypatch):
    """torchrun starts every process at once: rank 1 prepared RUN_DIR/data from --data FILE
    while rank 0 did, the two writing its files together (one stopped on a file the other
    had renamed). Rank 1 now starts its run only once rank 0 reached the launch, as a process
    Lightning's launcher starts does; here rank 0 never does."""
    from attnlab.training import hardware

    from .conftest import write_corpus

    launched_as(**torchrun(1, 2))
    monkeypatch.setattr(hardware, "RANK_ZERO_TIMEOUT", 1.0, raising=False)
    monkeypatch.setattr(engine, "launch", lambda *a: pytest.fail("rank 1 went on alone"))
    out = tmp_path / "run"
    out.mkdir()
    (out / ".launched").write_text("torchrun of an earlier launch")  # not this one's
    assert main(["train", "lm", "--data", str(write_corpus(tmp_path / "c.txt")), "--out",
                 str(out), "--devices", "2", "--strategy", "ddp", "--accelerator", "cpu",
                 "--max-steps", "2", "--num-layers", "1", "--model-dim", "16",
                 "--num-heads", "2", "--batch-size", "8", "--block-size", "16"]) == 2
    assert "rank 0 of this launch (torchrun none 127.0.0.1:29591 restart 0) did not " \
           "start the run" in capsys.readouterr().err
    assert not (out / "data").exists()


def test_rank_zero_removes_its_note_when_the_join_fails(tmp_path, launched_as):
    """A join that failed (a process that never came) left OUT/.launched, which the next
    launch of the same torchrun command (same run id, port and restart) took as its own."""
    from attnlab.training import hardware

    launched_as(**torchrun(0, 2))

    class Unjoined:
        def launch(self):
            assert (tmp_path / ".launched").exists()  # the others were let start
            raise RuntimeError("timed out joining the process group")

    cfg = train_command.get_task("reverse").config(devices=2, strategy="ddp", out=str(tmp_path))
    with pytest.raises(RuntimeError, match="timed out joining"):
        hardware.launch(Unjoined(), cfg)
    assert not (tmp_path / ".launched").exists()


@pytest.mark.slow  # starts torchrun: two training processes
def test_torchrun_prepares_an_lm_corpus_once_and_writes_one_run(tmp_path, spawn):
    """``torchrun --nproc-per-node 2 attnlab train lm --data FILE --devices 2``: the corpus
    prepared once (by rank 0; each rank prepared it, into the same files, before), one
    summary, metrics.json and last.ckpt written, no note of the launch left behind."""
    from .conftest import write_corpus

    corpus = tmp_path / "c.txt"  # large enough for two preparations to overlap (300 kB)
    corpus.write_text(write_corpus(tmp_path / "line.txt").read_text() * 70)
    args = ["--data", str(corpus), "--accelerator", "cpu", "--max-steps", "3",
            "--num-layers", "1", "--model-dim", "16", "--num-heads", "2", "--block-size", "16",
            "--val-batches", "2", "--warmup", "1", "--threads", "1"]
    # TMPDIR: torchrun's agent makes a torchelastic_* log directory there and leaves it
    env = dict(os.environ, OMP_NUM_THREADS="1", TMPDIR=str(tmp_path))
    for key in LAUNCHER_KEYS:
        env.pop(key, None)
    torchrun_bin = Path(sys.executable).with_name("torchrun")
    with socket.socket() as free:  # a port no other test's processes hold
        free.bind(("127.0.0.1", 0))
        port = str(free.getsockname()[1])
    proc = spawn([str(torchrun_bin), "--nproc-per-node", "2", "--master-port", port,
                  str(Path(sys.executable).with_name("attnlab")), "train", "lm", "--out",
                  str(tmp_path / "two"), "--devices", "2", "--strategy", "ddp", *args,
                  "--batch-size", "4"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                 text=True, env=env, start_new_session=True)  # ended with its ranks
    said, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert said.count("preparing ") == 1, said  # not once a rank
    assert said.count("lm run:") == 1, said
    two = tmp_path / "two"
    assert (two / "checkpoints" / "last.ckpt").is_file() and (two / "metrics.json").is_file()
    assert not (two / ".launched").exists()
    assert [p.name for p in tmp_path.glob("torchelastic_*")], "torchrun's logs were elsewhere"
