"""What a save or an export killed while writing (SIGKILL, out of memory, a node lost) leaves:
its hidden temporary file, as large as a checkpoint or a model, is removed by the next
``--resume`` or export to the same place, which says so; a user's file beside it never is."""
import json
import os
import signal
import sys
import traceback

import pytest

from attnlab.cli import main

from .conftest import TINY_REVERSE, tiny_args, write_corpus

pytestmark = pytest.mark.slow  # trains, and kills real processes

fcntl = pytest.importorskip("fcntl")  # (and os.fork: POSIX only)


def _second_save_killed():
    """The second checkpoint's save: half of its bytes written, then the process killed."""
    from lightning_fabric import Fabric

    real, saves = Fabric.save, []

    def save(self, path, state, *args, **kwargs):
        real(self, path, state, *args, **kwargs)
        saves.append(path)
        if len(saves) == 2:
            with open(path, "r+b") as f:
                f.truncate(os.path.getsize(path) // 2)
            os.kill(os.getpid(), signal.SIGKILL)

    Fabric.save = save


def _save_pretrained_killed():
    """The model's save_pretrained: its files written, the tokenizer's not, then killed."""
    import transformers

    real = transformers.PreTrainedModel.save_pretrained

    def save_pretrained(self, where, *args, **kwargs):
        real(self, where, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)

    transformers.PreTrainedModel.save_pretrained = save_pretrained


def _killed(patch, tmp_path, *argv):
    """``attnlab ARGV`` in a process of its own that ``patch`` (run in it) makes kill itself
    (SIGKILL) in the middle of writing: forked from this one, so that torch, Lightning and
    transformers are imported once, not by a fresh interpreter per test; what it prints goes
    to ``tmp_path``/killed.log, shown if it was not killed."""
    log = tmp_path / "killed.log"
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            with open(log, "w", buffering=1) as out:
                sys.stdout = sys.stderr = out
                try:
                    os.environ.pop("ATTNLAB_RUN_DIR", None)
                    patch()
                    print(f"exited {main(list(argv))} without being killed")
                except BaseException:
                    traceback.print_exc()
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, log.read_text()


def test_resume_removes_the_checkpoint_a_killed_save_was_writing(tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    _killed(_second_save_killed, tmp_path, "train", "reverse", "--out", str(run), *TINY_REVERSE)
    checkpoints = run / "checkpoints"
    partial = checkpoints / ".last.ckpt.partial"
    size = partial.stat().st_size
    assert size > 0 and (checkpoints / "last.ckpt").is_file()  # step 10's, whole
    (checkpoints / ".last.ckpt.partial.mine").write_text("a user's file")
    seen = _seen_at_saves(monkeypatch, partial)

    assert main(["train", "reverse", "--out", str(run), *TINY_REVERSE, "--resume"]) == 0
    err = capsys.readouterr().err
    assert (f"note: --resume: removed {partial} ({size:,} bytes), the checkpoint a stopped "
            f"save was writing") in err.splitlines()
    assert seen and seen[0] is None  # gone before the first save (which writes that name)
    assert (checkpoints / ".last.ckpt.partial.mine").read_text() == "a user's file"
    assert (run / "metrics.json").is_file()


def test_export_removes_what_a_killed_export_to_the_same_directory_left(tmp_path, capsys):
    run, hf = tmp_path / "run", tmp_path / "hf"
    data = {"lm": write_corpus(tmp_path / "corpus.txt")}
    assert main(["train", "lm", "--out", str(run), "--max-steps", "4",
                 *tiny_args("lm", data)]) == 0
    _killed(_save_pretrained_killed, tmp_path, "export", str(run), "--hf", str(hf))
    left = [p for p in tmp_path.iterdir() if p.name.startswith(".hf.")]
    assert len(left) == 1 and (left[0] / "config.json").is_file(), left
    size = sum(f.stat().st_size for f in left[0].rglob("*") if f.is_file())
    mine = [tmp_path / ".hf.backup01", tmp_path / ".hf.notes"]  # a user's, named like ours
    mine[0].mkdir()
    mine[1].write_text("a user's file")
    writing = tmp_path / ".hf.abcdefgh.partial"  # an export writing it now holds it
    writing.mkdir()
    held = os.open(writing, os.O_RDONLY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        capsys.readouterr()
        assert main(["export", str(run), "--hf", str(hf)]) == 0
    finally:
        os.close(held)
    err = capsys.readouterr().err.splitlines()
    assert (f"note: --hf: removed {left[0]} ({size:,} bytes), left by an export to {hf} that "
            f"was stopped while writing it") in err, err
    assert (f"note: --hf: {mine[0]} may be left by an export to {hf} that was stopped while "
            f"writing it; remove it if no export is writing {hf} now") in err, err
    assert not left[0].exists() and (hf / "config.json").is_file()
    assert mine[0].is_dir() and mine[1].read_text() == "a user's file" and writing.is_dir()


def test_a_leftover_export_cannot_remove_is_named_and_the_export_goes_on(tmp_path, monkeypatch,
                                                                         capsys):
    """A leftover it may not remove (another user's, in a shared directory) ended the export
    in a PermissionError traceback: it is named instead."""
    from attnlab.commands import export

    left = tmp_path / ".hf.abcdefgh.partial"
    (left / "config.json").parent.mkdir()
    (left / "config.json").write_text("{}")

    def not_allowed(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path / "config.json"))

    monkeypatch.setattr("shutil.rmtree", not_allowed)
    export._remove_leftovers(tmp_path / "hf")
    assert capsys.readouterr().err.splitlines() == [
        f"note: --hf: {left} may be left by an export to {tmp_path / 'hf'} that was stopped "
        f"while writing it; remove it if no export is writing {tmp_path / 'hf'} now"]
    assert (left / "config.json").is_file()


class _Model:
    """What ``export._write_atomically`` asks of a model: a ``save_pretrained``."""

    def save_pretrained(self, where):
        (where / "config.json").write_text("{}")


def test_a_second_export_starting_as_the_first_makes_its_directory_leaves_it_alone(
        tmp_path, monkeypatch, capsys):
    """A second export to the same OUT whose sweep ran between the first's making its hidden
    directory and holding it removed it: the first ended in a FileNotFoundError traceback,
    the second said it removed a leftover."""
    import tempfile

    from attnlab.commands import export

    out, real = tmp_path / "hf", tempfile.mkdtemp

    def mkdtemp(*args, **kwargs):
        made = real(*args, **kwargs)
        export._remove_leftovers(out)  # the second export starts at this moment
        return made

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    export._write_atomically(out, _Model(), {})
    assert (out / "config.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["hf"]  # nothing hidden left beside it
    assert capsys.readouterr().err == ""  # no false note of a removal


def test_an_export_into_a_drop_box_is_written(tmp_path, monkeypatch):
    """A parent that may be written and searched but not read (mode 0333) cannot be listed
    for leftovers: the export ended in a PermissionError traceback; it is written."""
    from pathlib import Path

    from attnlab.commands import export

    out, real = tmp_path / "hf", Path.iterdir

    def iterdir(self):
        if self == tmp_path:  # (as root, chmod would not refuse the listing)
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    export._write_atomically(out, _Model(), {})
    assert (out / "config.json").is_file()


def _seen_at_saves(monkeypatch, path):
    """The bytes of ``path`` (None where there is none) as each checkpoint save starts: a
    resumed run's saves write the same name, so what the run found is seen only then."""
    from lightning_fabric import Fabric

    real, seen = Fabric.save, []

    def save(self, where, state, *args, **kwargs):
        seen.append(path.read_bytes() if path.is_file() else None)
        return real(self, where, state, *args, **kwargs)

    monkeypatch.setattr(Fabric, "save", save)
    return seen


def _with_partial(reverse_run, tmp_path):
    """A copy of ``reverse_run`` with a half-written checkpoint left in it; its path."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(reverse_run, run)
    partial = run / "checkpoints" / ".last.ckpt.partial"
    partial.write_bytes(b"half a checkpoint")
    return run, partial


def test_a_leftover_checkpoint_resume_cannot_remove_is_named_and_the_run_goes_on(
        reverse_run, tmp_path, monkeypatch, capsys):
    """One in a read-only checkpoints/ ended --resume in a PermissionError traceback, and, in
    the Python API, left the run held: the next --resume was refused "in use"."""
    from pathlib import Path

    run, partial = _with_partial(reverse_run, tmp_path)
    real = Path.unlink

    def unlink(self, *args, **kwargs):
        if self == partial:
            raise PermissionError(1, "Operation not permitted", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", unlink)
    seen = _seen_at_saves(monkeypatch, partial)
    argv = ["train", "reverse", "--out", str(run), *TINY_REVERSE, "--resume"]
    capsys.readouterr()
    assert main([*argv, "--max-steps", "40"]) == 0
    assert (f"note: --resume: {partial} may be left by a save that was stopped while writing "
            f"it; remove it if no attnlab train is writing {run} now (it could not be removed: "
            f"Operation not permitted)") in capsys.readouterr().err.splitlines()
    assert seen[0] == b"half a checkpoint"
    assert main([*argv, "--max-steps", "50"]) == 0  # not held by the first
    assert json.loads((run / "metrics.json").read_text())["steps"] == 50


def test_without_locks_resume_names_a_leftover_checkpoint_and_leaves_it(reverse_run, tmp_path,
                                                                        monkeypatch, capsys):
    """On a file system without locks (NFS), a save of another process may be writing it:
    --resume removed it all the same."""
    run, partial = _with_partial(reverse_run, tmp_path)
    monkeypatch.setattr("attnlab.commands.preflight.hold", lambda *args, **kwargs: None)
    seen = _seen_at_saves(monkeypatch, partial)
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(run), *TINY_REVERSE, "--max-steps", "40",
                 "--resume"]) == 0
    assert (f"note: --resume: {partial} may be left by a save that was stopped while writing "
            f"it; remove it if no attnlab train is writing {run} now"
            ) in capsys.readouterr().err.splitlines()
    assert seen[0] == b"half a checkpoint"  # left as it was until the run's first save
