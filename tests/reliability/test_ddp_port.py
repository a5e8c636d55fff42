"""A MASTER_PORT that something on this machine already listens on (the run before's, another
program's), refused in one line before anything is written."""
import os
import socket
import subprocess
import sys

import pytest

from attnlab.errors import UsageError
from attnlab.tasks import get_task
from attnlab.training.hardware import check_port


@pytest.fixture
def taken():
    """A port that a socket of this test listens on."""
    with socket.socket() as held:
        held.bind(("", 0))
        held.listen()
        yield held.getsockname()[1]


def _cfg(devices):
    return get_task("reverse").config(devices=devices, strategy="ddp")


@pytest.mark.parametrize("env", [
    {},  # Lightning's launcher on one machine
    {"WORLD_SIZE": "2", "NODE_RANK": "0"},  # docs/scale.md's several machines: rank 0 listens
])
def test_a_taken_master_port_is_named_where_rank_zero_would_listen(taken, env):
    """With WORLD_SIZE set the check was skipped, as if torchrun's agent held the port."""
    with pytest.raises(UsageError, match=rf"^MASTER_PORT {taken}: .*give a free port"):
        check_port(_cfg(2), {**env, "MASTER_PORT": str(taken)})


@pytest.mark.parametrize("value", ["70000", "-1", "0", "abc", "29 500"])
def test_a_master_port_that_is_no_port_number_is_named(value):
    """70000 and -1 failed with bind's OverflowError traceback; abc was called not a whole
    number of processes."""
    with pytest.raises(UsageError, match=rf"^MASTER_PORT '{value}' is not a port number "
                                         rf"\(1 to 65535\)$"):
        check_port(_cfg(2), {"MASTER_PORT": value})
    check_port(_cfg(1), {"MASTER_PORT": value})  # one process uses no port


@pytest.mark.parametrize("env", [
    {},  # Lightning chooses a free port
    {"LOCAL_RANK": "1"},  # a rank that connects to rank 0's port, not listens on it
    {"WORLD_SIZE": "2", "RANK": "0", "TORCHELASTIC_RUN_ID": "x"},  # torchrun's agent listens
])
def test_a_port_that_this_process_does_not_listen_on_is_not_checked(taken, env):
    env = {**env, "MASTER_PORT": str(taken)} if env else env
    check_port(_cfg(2), env)
    check_port(_cfg(1), {"MASTER_PORT": str(taken)})  # one process listens on nothing


@pytest.mark.slow  # starts the train command
@pytest.mark.parametrize("port", ["taken", "70000", "abc"])
def test_train_with_a_taken_master_port_exits_2_in_one_line_and_writes_nothing(tmp_path, taken,
                                                                                port):
    """Rank 0 failed at launch with torch's EADDRINUSE traceback (exit 1), after the run
    directory was made and rank 1 started; 70000 failed with bind's OverflowError traceback."""
    out = tmp_path / "ddp"
    port = str(taken) if port == "taken" else port
    env = dict(os.environ, MASTER_PORT=port, OMP_NUM_THREADS="1")
    env.pop("ATTNLAB_RUN_DIR", None)
    proc = subprocess.run(
        [sys.executable, "-m", "attnlab", "train", "reverse", "--out", str(out), "--devices",
         "2", "--strategy", "ddp", "--accelerator", "cpu", "--threads", "1", "--max-steps", "5",
         "--train-size", "64", "--val-size", "16", "--test-size", "16", "--model-dim", "8",
         "--num-heads", "1"], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 2, proc.stderr[-3000:]
    named = f"MASTER_PORT {taken}: " if port == str(taken) else f"MASTER_PORT '{port}' is not"
    assert proc.stderr.startswith(f"attnlab: error: {named}"), proc.stderr[-3000:]
    assert len(proc.stderr.splitlines()) == 1, proc.stderr[-3000:]
    assert not out.exists()
