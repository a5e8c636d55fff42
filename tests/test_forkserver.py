"""The tests' fork server (tests/forkserver.py) when it fails: a server that is gone or never
starts is named in one line with its log, and DDP runs go on without it."""
import os
import subprocess
import sys

import pytest

from . import forkserver
from .reliability import conftest as reliability


@pytest.mark.slow
def test_the_shim_names_the_socket_and_the_log_when_the_server_is_gone(tmp_path):
    """A command sent to a server that has died fails in one line naming the socket and the
    server's log, not with a ConnectionRefusedError traceback from the shim."""
    address = str(tmp_path / "socket")
    shim = forkserver.write_shim(str(tmp_path), address)
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}{os.pathsep}"
                                f"{os.environ.get('PATH', '')}")
    done = subprocess.run([shim, "--version"], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 1
    assert done.stderr == (f"attnlab (test fork server): cannot connect to {address} (No such "
                           f"file or directory); its log: {tmp_path / 'server.log'}\n")


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
    """While the worker's fork server runs, a DDP run's first process starts from it; once it
    has died, each DDP run starts as ``python -m attnlab`` (with a warning naming the server's
    log) instead of failing to connect."""
    monkeypatch.setattr(reliability, "_forks", lambda: str(tmp_path))
    monkeypatch.setitem(forkserver._servers, str(tmp_path), _Server(exit_code))
    plain, env = reliability._ddp_command("reverse", tmp_path / "run")
    if forked:
        command, _ = reliability._through_the_fork_server(plain, env)
        assert command == [str(tmp_path / "attnlab"), *plain[3:]]
    else:
        with pytest.warns(UserWarning, match="fork server has stopped .*server.log"):
            command, _ = reliability._through_the_fork_server(plain, env)
        assert command == plain and plain[1:3] == ["-m", "attnlab"]


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
