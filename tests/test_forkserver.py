"""The tests' fork server (tests/forkserver.py) when it fails: a server that is gone or never
starts is named in one line with its log, and DDP runs go on without it."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from . import forkserver
from .reliability import conftest as reliability


@pytest.mark.slow
def test_a_shim_whose_server_is_gone_runs_attnlab_cold(tmp_path):
    """A command sent to a server that has died runs as the plain ``attnlab`` (the next one on
    PATH), cold, instead of failing; a kernel's shim, which has no plain command to run, fails
    in one line naming the socket and the server's log, not with a ConnectionRefusedError."""
    address = str(tmp_path / "socket")
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}{os.pathsep}"
                                f"{os.environ.get('PATH', '')}")
    shim = forkserver.write_shim(str(tmp_path), address)
    done = subprocess.run([shim, "--version"], capture_output=True, text=True, env=env,
                          timeout=120)
    plain = subprocess.run([str(reliability.ATTNLAB), "--version"], capture_output=True,
                           text=True, env=env, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, plain.stdout, plain.stderr)
    assert plain.stdout.startswith("attnlab ")
    kernel = forkserver.write_shim(str(tmp_path), address, "kernel")
    done = subprocess.run([kernel, "-f", "connection.json"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 1
    assert done.stderr == (f"attnlab (test fork server): cannot connect to {address} (No such "
                           f"file or directory); its log: {tmp_path / 'server.log'}\n")


@pytest.mark.slow
def test_a_ddp_run_whose_fork_server_dies_after_its_first_process_still_finishes(spawn,
                                                                                  tmp_path):
    """The server dies once rank 0 is forked from it: Lightning's relaunch of rank 1 (through
    the shim) cannot connect and starts the real ``attnlab`` cold, so the run finishes; it used
    to fail ("rank 1 ... exited with status 1 before it joined the others")."""
    where = tmp_path / "forks"
    where.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATTNLAB_RUN_DIR", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE")}
    servers = []

    def spawn_server(argv, **kwargs):
        servers.append(spawn(argv, **kwargs))
        return servers[-1]

    out = tmp_path / "run"
    with forkserver.running(spawn_server, str(where), env):
        command, run_env = reliability._through_the_fork_server(*reliability._ddp_command(
            "reverse", out, *reliability.TINY_REVERSE[2:-4], "--max-steps", "2"),
            where=str(where))
        run = spawn(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                    env=run_env)
        server = servers[0]
        while not _grandchildren(server.pid):  # the monitor has forked rank 0's process
            assert run.poll() is None, run.communicate()
            time.sleep(0.02)
        server.kill()
        server.wait()
        _, err = run.communicate(timeout=300)
    assert run.returncode == 0, err[-3000:]
    assert (out / "metrics.json").is_file()
    ran = (where / "server.log").read_text().splitlines()  # rank 0's monitor outlives the server
    assert sum(f"--out {out} " in line for line in ran) == 1, ran  # rank 1 was not forked


def _grandchildren(pid: int) -> list[str]:
    return [g for c in _children(str(pid)) for g in _children(c)]


def _children(pid: str) -> list[str]:
    try:
        return open(f"/proc/{pid}/task/{pid}/children").read().split()
    except FileNotFoundError:  # the monitor has finished already
        return []


@pytest.mark.slow
def test_a_server_that_never_says_ready_fails_naming_its_log(spawn, tmp_path):
    """A server stuck in its imports does not hang the worker: ``running`` fails after its
    wait, in one line naming the server's log."""
    def stuck(argv, **kwargs):  # a server that never prints "ready"
        return spawn([sys.executable, "-c", "import time; time.sleep(60)"], **kwargs)

    with pytest.raises(AssertionError) as failed:
        with forkserver.running(stuck, str(tmp_path), dict(os.environ), ready_within=0.5):
            pass
    assert str(failed.value) == (f"the fork server did not say it was ready within 0.5 s; "
                                 f"its log: {tmp_path / 'server.log'}")


class _Server:
    """What ``forkserver.serving`` asks of a server process: ``poll()``."""

    def __init__(self, exit_code):
        self.exit_code = exit_code

    def poll(self):
        return self.exit_code


@pytest.mark.parametrize("exit_code, forked", [(None, True), (-9, False)])
def test_ddp_runs_start_the_plain_way_when_the_fork_server_is_gone(exit_code, forked, tmp_path,
                                                                    monkeypatch):
    """While the worker's fork server runs, a DDP run's processes are forked from it; once it
    has died, each DDP run starts as a user's does, the environment's ``attnlab`` console script
    (with a warning naming the server's log), instead of failing to connect."""
    monkeypatch.setattr(reliability, "_forks", lambda: str(tmp_path))
    monkeypatch.setitem(forkserver._servers, str(tmp_path), _Server(exit_code))
    plain, env = reliability._ddp_command("reverse", tmp_path / "run")
    if forked:
        command, _ = reliability._through_the_fork_server(plain, env)
        assert command == [str(tmp_path / "attnlab"), *plain[1:]]
    else:
        with pytest.warns(UserWarning, match="fork server has stopped .*server.log"):
            command, _ = reliability._through_the_fork_server(plain, env)
        assert command == plain


def test_a_cold_ddp_run_starts_the_console_script_as_a_user_does():
    """Lightning starts rank 1 as ``python sys.argv[0] ...``: the cold DDP runs (``start_ddp``)
    start the environment's ``attnlab`` console script, so that rank 1 is relaunched from it as
    a user's ``attnlab train --devices 2`` is, not as ``python -m attnlab``."""
    command, _ = reliability._ddp_command("reverse", "run")
    script = Path(sys.executable).with_name("attnlab")
    assert command[:3] == [str(script), "train", "reverse"]
    assert script.is_file() and os.access(script, os.X_OK)


@pytest.mark.slow
def test_both_processes_of_a_ddp_run_are_forked_from_the_server(forks, tmp_path):
    """Lightning starts a DDP run's second process as ``python sys.argv[0] ...``: with the
    real ``attnlab`` as sys.argv[0] it paid the imports a fork skips (~16 s of CPU a run);
    with the shim, the server's log lists the run once for each of its two processes."""
    out = tmp_path / "run"
    command, env = reliability._through_the_fork_server(*reliability._ddp_command(
        "reverse", out, *reliability.TINY_REVERSE[2:-4], "--max-steps", "2"), where=str(forks))
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "metrics.json").is_file()
    ran = (forks / "server.log").read_text().splitlines()
    assert sum(f"--out {out} " in line for line in ran) == 2, ran[-4:]
