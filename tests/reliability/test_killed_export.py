"""An export killed (SIGKILL, out of memory) after it claimed OUT and before it renamed its
files there left an empty OUT, and every later export to OUT refused it ("already exists"),
leaving the model-sized temporary directory beside it for good. The next export now removes
that claim and writes OUT, saying so; a directory a user made is never removed."""
import os
import signal
from pathlib import Path

import pytest

from attnlab.cli import main

from .conftest import tiny_args, write_corpus
from .test_leftovers import _killed

fcntl = pytest.importorskip("fcntl")  # (and os.fork: POSIX only)


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export")
    run = tmp / "run"
    data = {"lm": write_corpus(tmp / "corpus.txt")}
    assert main(["train", "lm", "--out", str(run), "--max-steps", "4",
                 *tiny_args("lm", data)]) == 0
    return run


def _killed_at_the_last_rename(out):
    """The rename of the written model onto the claimed ``out``: the process is killed
    instead."""
    def patch():
        rename = Path.rename

        def killed(self, target):
            if Path(target) == out and self.name.endswith(".partial"):
                os.kill(os.getpid(), signal.SIGKILL)
            return rename(self, target)

        Path.rename = killed

    return patch


@pytest.mark.slow  # trains a run and kills a process
def test_an_export_killed_at_its_last_rename_is_finished_by_the_next(lm_run, tmp_path, capsys):
    out = tmp_path / "hf"
    _killed(_killed_at_the_last_rename(out), tmp_path, "export", str(lm_run), "--hf", str(out))
    left = [p for p in tmp_path.iterdir() if p.name.startswith(".hf.")]
    assert out.is_dir() and len(left) == 1 and (left[0] / "config.json").is_file()
    capsys.readouterr()

    assert main(["export", str(lm_run), "--hf", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert (f"note: --hf: removed {out}, the empty directory by which an export to it that "
            f"was killed before it finished had claimed it") in err, err
    assert any(line.startswith(f"note: --hf: removed {left[0]} (") for line in err), err
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "killed.log") == ["hf"]
    assert oct(out.stat().st_mode & 0o777) != oct(0)  # readable as any directory written


def test_an_empty_directory_a_user_made_is_never_removed(tmp_path, capsys):
    """A user's empty OUT beside a stopped export's temporary directory: refused in one line
    that says what was found; both are kept."""
    out, left = tmp_path / "hf", tmp_path / ".hf.abcdefgh.partial"
    out.mkdir()
    left.mkdir()
    (left / "config.json").write_text("{}")
    assert main(["export", str(tmp_path / "run"), "--hf", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"attnlab: error: --hf {out} already exists (empty; beside it, {left} is "
                   f"what an export to it left when it was stopped: if you did not make hf, "
                   f"remove it and export again); give a new directory (export never writes "
                   f"over a path)\n")
    assert out.is_dir() and (left / "config.json").read_text() == "{}"


def test_the_claim_of_an_export_writing_now_is_left_to_it(tmp_path, capsys):
    """An empty OUT of the claim's mode while another export holds its temporary directory
    beside it (it is between its claim and its rename): refused, and kept."""
    from attnlab.commands.export import CLAIM_MODE

    out, writing = tmp_path / "hf", tmp_path / ".hf.abcdefgh.partial"
    out.mkdir(mode=CLAIM_MODE)
    writing.mkdir()
    held = os.open(writing, os.O_RDONLY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert main(["export", str(tmp_path / "run"), "--hf", str(out)]) == 2
    finally:
        os.close(held)
    err = capsys.readouterr().err
    assert f"--hf {out} already exists" in err and len(err.splitlines()) == 1, err
    assert out.is_dir() and writing.is_dir()


def test_a_directory_of_the_claims_mode_that_holds_files_is_kept(tmp_path):
    """A directory of mode 000 with files in it is no export's claim: refused, kept whole."""
    from attnlab.commands.export import CLAIM_MODE, _write_atomically
    from attnlab.errors import UsageError

    out = tmp_path / "hf"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    out.chmod(CLAIM_MODE)
    try:
        with pytest.raises(UsageError) as e:
            _write_atomically(out, _Model(), {})
        assert str(e.value) == (f"--hf {out} already exists; give a new directory (export "
                                f"never writes over a path)")
    finally:
        out.chmod(0o755)
    assert (out / "mine.txt").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]


class _Model:
    """Stands in for the Hugging Face model: ``save_pretrained`` writes one file."""

    def save_pretrained(self, where):
        (where / "config.json").write_text("{}")


@pytest.mark.slow  # trains a run, kills a process and starts one
def test_an_owner_not_root_finishes_a_killed_export(lm_run, tmp_path):
    """Not root, the claim (mode 000) cannot be written in: the next export still removes it
    and writes OUT (it writes in OUT's parent), where it exited 2 "cannot write there"."""
    from .conftest import as_an_owner

    out = tmp_path / "hf"
    _killed(_killed_at_the_last_rename(out), tmp_path, "export", str(lm_run), "--hf", str(out))
    done = as_an_owner(tmp_path, "export", str(lm_run), "--hf", str(out))
    assert done.returncode == 0, done.stderr
    assert (f"note: --hf: removed {out}, the empty directory by which an export to it that "
            f"was killed before it finished had claimed it") in done.stderr.splitlines()
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "killed.log") == ["hf"]
