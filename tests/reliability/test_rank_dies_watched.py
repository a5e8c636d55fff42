"""A DDP rank that dies, where the one line said of it had gaps: the watch's way (rank 0 deaf
in a collective) left the run directory of a run with nothing saved, which rank 0's own way
removes, saying so; and under torchrun or srun, which start every process themselves, rank 0
printed gloo's "Connection closed by peer" traceback, naming no process. Stand-in processes:
no run is trained."""
import signal
import threading

import pytest

from attnlab.commands.train import _after_failure
from attnlab.errors import RankFailed
from attnlab.training import ranks

from .test_rank_dies import _Rank  # a rank launched from rank 0, as Popen shows it

GLOO = ("[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
        "[127.0.0.1]:18571. This is typically caused by a remote worker crashing.")
BEFORE = " at step 7, before the first checkpoint; the others were stopped"


@pytest.fixture
def watched(monkeypatch):
    monkeypatch.setattr(ranks, "_ENDING", threading.Event())
    monkeypatch.setattr(ranks, "DEATH_GRACE", 0.0)
    monkeypatch.setattr(ranks, "_WHERE", [lambda: BEFORE])
    monkeypatch.setattr(ranks, "_AFTER", [lambda failure: failure])
    exits = []
    monkeypatch.setattr(ranks.os, "_exit", exits.append)
    return exits


def test_the_watch_removes_a_run_with_nothing_saved_as_rank_zero_does(watched, tmp_path,
                                                                      capsys):
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "config.yaml").write_text("task: reverse\n")
    ranks.after(lambda failure: _after_failure(failure, None, run, "new"))
    rank = _Rank(4242, -signal.SIGKILL)
    assert ranks._look([rank], lambda: False)
    assert watched == [1]
    assert capsys.readouterr().err == (
        f"attnlab: rank 1 of this run (process 4242) was killed by SIGKILL during training"
        f"{BEFORE}; removed {run}, so the same command can run again\n")
    assert not run.exists()


def test_the_watch_keeps_a_run_that_saved_a_checkpoint(watched, tmp_path, capsys):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.ckpt").write_bytes(b"saved")
    ranks.after(lambda failure: _after_failure(failure, None, run, "new"))
    ranks._stop_all([], RankFailed("rank 1 of this run (process 4242) was killed by SIGKILL "
                                   "during training at step 21; the others were stopped"))
    assert watched == [1] and (run / "checkpoints" / "last.ckpt").is_file()
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("launcher", [
    {"WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "x", "RANK": "0"},
    {"SLURM_NTASKS": "2", "SLURM_STEP_NUM_TASKS": "2", "SLURM_JOB_NAME": "train",
     "SLURM_JOB_ID": "7", "SLURM_PROCID": "0"},
], ids=["torchrun", "srun"])
def test_a_process_that_torchrun_or_srun_started_is_said_in_one_line(monkeypatch, launcher):
    for key in ("WORLD_SIZE", "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS", "SLURM_JOB_NAME"):
        monkeypatch.delenv(key, raising=False)
    for key, value in launcher.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(ranks, "_PROCS", [])
    monkeypatch.setattr(ranks, "_WHERE", [lambda: BEFORE])
    failure = _said(RuntimeError(GLOO))  # as ``fit`` asks
    name = "torchrun" if "WORLD_SIZE" in launcher else "srun"
    assert isinstance(failure, RankFailed) and failure.exit_code == 1
    assert str(failure) == (f"another process of this run ended during training (its "
                            f"collective broke; {name} names which, and how){BEFORE}")
    # rank 0's own error is said as it is
    assert _said(RuntimeError("mat1 and mat2 shapes cannot be multiplied")) is None


def _said(error):
    from attnlab.training.hardware import launch_id

    return ranks.failed(error, grace=0.0) or ranks.elsewhere(error, launch_id())


@pytest.mark.parametrize("lightning", [False, True], ids=["by-hand", "lightning-launched"])
def test_a_process_that_torchrun_or_srun_did_not_start_is_left_as_it_was(monkeypatch,
                                                                           lightning):
    """One process started by hand; or a rank of Lightning's own launcher, which sets
    WORLD_SIZE in every process it starts (rank 0 there hears of a dead rank by ``failed``)."""
    for key in ("WORLD_SIZE", "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(key, raising=False)
    if lightning:
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(ranks, "_PROCS", [])
    assert _said(RuntimeError(GLOO)) is None


def test_the_watch_says_nothing_more_of_a_rank_that_said_its_usage_error(watched, tmp_path,
                                                                         capsys):
    """The rank's own line named what to fix: rank 0 adds the one line of the run removed,
    not also "rank 1 ... exited with status 2", as where rank 0 hears of it itself."""
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    ranks.after(lambda failure: _after_failure(failure, None, run, "new"))
    assert ranks._look([_Rank(4242, 2)], lambda: False)
    assert watched == [2] and not run.exists()
    assert capsys.readouterr().err == (f"attnlab: the run stopped before its first checkpoint; "
                                       f"removed {run}, so the same command can run again\n")


TINY = ["--max-steps", "2", "--train-size", "16", "--val-size", "8", "--test-size", "8",
        "--model-dim", "8", "--num-heads", "1", "--batch-size", "8", "--threads", "1",
        "--accelerator", "cpu"]


@pytest.mark.slow  # builds a run's model and Fabric
@pytest.mark.parametrize("rank", [0, 1])
def test_a_train_that_torchrun_started_says_a_dead_process_once(monkeypatch, tmp_path, capsys,
                                                                 rank):
    """``attnlab train`` on each of two processes that torchrun started, whose collective
    broke: rank 0 says it in one line and removes the run with nothing saved; rank 1 says
    nothing (each of 8 processes said it: 7 copies). Both exit 1."""
    from attnlab.cli import main
    from attnlab.training import engine, hardware

    for key in ("SLURM_NTASKS", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID"):
        monkeypatch.delenv(key, raising=False)
    for key, value in {"WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "x", "RANK": str(rank),
                       "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(ranks, "_PROCS", [])

    def broken(*args, **kwargs):
        raise RuntimeError(GLOO)

    monkeypatch.setattr(engine, "_fit", broken)
    monkeypatch.setattr(hardware, "wait_for_rank_zero", lambda run_dir, **kwargs: None)
    run = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(run), "--devices", "2", *TINY]) == 1
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if line.startswith("attnlab:")]
    if rank:
        assert said == []
        return
    assert said == [f"attnlab: another process of this run ended during training (its "
                    f"collective broke; torchrun names which, and how) at step 0, before the "
                    f"first checkpoint; the others were stopped; removed {run}, so the same "
                    f"command can run again"]
    assert not run.exists()


@pytest.mark.slow  # prepares a run
def test_a_train_whose_watch_ends_it_removes_the_run_with_nothing_saved(watched, tmp_path,
                                                                        monkeypatch, capsys):
    """``attnlab train`` where Lightning's watch, not rank 0, hears that a rank died: the run
    directory, with nothing saved, is removed, said in the rank's line."""
    from attnlab.cli import main
    from attnlab.commands import train

    died = RankFailed(f"rank 1 of this run (process 4242) was killed by SIGKILL during "
                      f"training{BEFORE}")
    monkeypatch.setattr(train, "_train", lambda *args: ranks._stop_all([], died))
    run = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(run), *TINY]) == 0  # os._exit: patched
    assert watched == [1] and not run.exists()
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"attnlab: {died}; removed {run}, so the same command can run again")
