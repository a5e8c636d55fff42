"""A training run killed (SIGKILL, out of memory) while it wrote a file of its run directory
at the end (``model.safetensors``, ``metrics.json``) left that file's hidden temporary copy,
as large as the model, which no ``--resume`` removed. The resume that finishes the run
removes it, saying so."""
import os
import signal

import pytest

from attnlab.cli import main

from .conftest import TINY_REVERSE
from .test_leftovers import _killed

pytestmark = pytest.mark.slow  # trains, and kills a real process

pytest.importorskip("fcntl")  # (os.fork: POSIX only)


def _killed_writing(name):
    """The write of the run's ``name``: its temporary file written, then the process
    killed before the rename."""
    def patch():
        import attnlab.runs as runs

        write_through = runs.write_through

        def killed(path, write):
            def then_killed(tmp):
                write(tmp)
                os.kill(os.getpid(), signal.SIGKILL)

            return write_through(path, then_killed if os.path.basename(path) == name else write)

        runs.write_through = killed

    return patch


@pytest.mark.parametrize("name", ["model.safetensors", "metrics.json"])
def test_the_resume_after_a_kill_at_the_end_removes_the_half_written_file(name, tmp_path,
                                                                         capsys):
    run = tmp_path / "run"
    argv = ["train", "reverse", "--out", str(run), *TINY_REVERSE, "--threads", "1"]
    _killed(_killed_writing(name), tmp_path, *argv)
    left = [p for p in run.iterdir() if p.name.startswith(f".{name}.")]
    assert len(left) == 1 and not (run / "metrics.json").exists(), left
    size = left[0].stat().st_size
    capsys.readouterr()

    assert main([*argv, "--resume"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert (f"note: --resume: removed {left[0]} ({size:,} bytes), left by a write that was "
            f"stopped") in err, err
    assert not left[0].exists() and (run / "metrics.json").is_file()
    assert not [p for p in run.rglob(".*.tmp")]


def test_a_resume_passes_over_a_folder_it_cannot_list_and_the_files_of_others(tmp_path):
    """Not root, a folder of the run that cannot be listed (``mkdir -m 000 run/hf``: what a
    killed ``export run --hf run/hf`` leaves) made --resume fail with a traceback; a plot's
    temporary file, of a plot writing there now (without holding the run), is not the
    resume's to remove."""
    import fcntl

    from .conftest import as_an_owner

    run = tmp_path / "run"
    argv = ["train", "reverse", "--out", str(run), *TINY_REVERSE, "--threads", "1"]
    _killed(_killed_writing("metrics.json"), tmp_path, *argv)
    left = [p for p in run.iterdir() if p.name.startswith(".metrics.json.")]
    (run / "hf").mkdir(mode=0)
    plotting = run / ".attention.png.0123abcd.tmp"
    plotting.write_bytes(b"png")
    held = os.open(plotting, os.O_RDONLY)  # (what the plot writing it holds: runs.write_through)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        done = as_an_owner(tmp_path, *argv, "--resume")
    finally:
        os.close(held)
        (run / "hf").chmod(0o755)
    assert done.returncode == 0, done.stderr
    assert len(left) == 1 and (f"note: --resume: removed {left[0]} (" in done.stderr), done.stderr
    assert not left[0].exists() and (run / "metrics.json").is_file()
    assert plotting.read_bytes() == b"png" and (run / "hf").is_dir()
