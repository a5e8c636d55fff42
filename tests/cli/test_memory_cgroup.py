"""The memory check before a run counts a container's limit: a container given 4 GiB on a
host with far more available was told the host's MemAvailable, and a run that needed more
than 4 GiB started and was killed by the kernel. The limit is read from fake cgroup
directories here (v2 ``memory.max``, v1 ``memory.limit_in_bytes``), as Linux lays them out;
what is left is limit - (usage - inactive file pages, which the kernel reclaims first)."""
import pytest

from attnlab.cli import main
from attnlab.commands import preflight

GiB = 2**30


def _v2(tmp_path, *, limit="4294967296", current=GiB, inactive=GiB // 4, path="/box"):
    root = tmp_path / "cgroup"
    own = root / path.strip("/")
    own.mkdir(parents=True)
    (own / "memory.max").write_text(f"{limit}\n")
    (own / "memory.current").write_text(f"{current}\n")
    (own / "memory.stat").write_text(f"anon {current}\nfile 0\ninactive_file {inactive}\n")
    proc = tmp_path / "proc_cgroup"
    proc.write_text(f"0::{path}\n")
    return root, proc


def _v1(tmp_path, *, limit=4 * GiB, usage=GiB, inactive=GiB // 4):
    root = tmp_path / "cgroup"
    own = root / "memory" / "docker" / "abc"
    own.mkdir(parents=True)
    (own / "memory.limit_in_bytes").write_text(f"{limit}\n")
    (own / "memory.usage_in_bytes").write_text(f"{usage}\n")
    (own / "memory.stat").write_text(f"cache 0\ninactive_file 1\ntotal_inactive_file {inactive}\n")
    (root / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    proc = tmp_path / "proc_cgroup"
    proc.write_text("12:pids:/docker/abc\n4:memory:/docker/abc\n1:cpu,cpuacct:/docker/abc\n")
    return root, proc


LEFT = 4 * GiB - (GiB - GiB // 4)  # limit - (usage - inactive file pages)


def test_v2_limit(tmp_path):
    assert preflight.cgroup_available(*_v2(tmp_path)) == LEFT


def test_v1_limit(tmp_path):
    assert preflight.cgroup_available(*_v1(tmp_path)) == LEFT


def test_no_limit(tmp_path):
    assert preflight.cgroup_available(*_v2(tmp_path, limit="max")) is None
    assert preflight.cgroup_available(*_v1(tmp_path / "v1", limit=9223372036854771712)) is None
    assert preflight.cgroup_available(tmp_path, tmp_path / "absent") is None  # not Linux


def test_a_parents_limit_counts(tmp_path):
    """A limit set on the cgroup above the process's (a systemd slice, a pod) binds too."""
    root, proc = _v2(tmp_path, limit="max", path="/pod/box")
    (root / "pod" / "memory.max").write_text(f"{2 * GiB}\n")
    (root / "pod" / "memory.current").write_text(f"{GiB}\n")
    assert preflight.cgroup_available(root, proc) == GiB


def test_a_container_that_mounts_its_own_cgroup_at_the_root(tmp_path):
    """/proc/self/cgroup names the host's path, which the container's mount does not have."""
    root, proc = _v2(tmp_path, path="/")
    proc.write_text("0::/system.slice/docker-abc.scope\n")
    assert preflight.cgroup_available(root, proc) == LEFT


@pytest.mark.slow  # starts a training command (refused before the run)
def test_a_run_past_the_containers_limit_is_refused_before_its_directory(tmp_path, capsys,
                                                                          monkeypatch):
    root, proc = _v2(tmp_path)
    monkeypatch.setattr(preflight, "CGROUP_ROOT", root)
    monkeypatch.setattr(preflight, "PROC_CGROUP", proc)
    monkeypatch.setattr(preflight, "_machine_available", lambda: 24 * GiB)
    assert preflight.available_memory() == LEFT
    out = tmp_path / "run"
    # ~4.7 GB of one step's activations: under the host's 24 GiB, over the container's 4 GiB
    assert main(["train", "reverse", "--out", str(out), "--accelerator", "cpu", "--max-steps",
                 "1", "--batch-size", "52000", "--seq-len", "64", "--train-size", "52000",
                 "--val-size", "16", "--test-size", "16"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("attnlab: error: these settings need"), err
    # the container's limit named as such: the machine has 24 GiB available
    assert "; this container's memory limit (its cgroup) leaves 3.5 GB (" in err, err
    assert not out.exists()
