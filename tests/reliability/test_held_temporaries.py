"""The temporaries attnlab locks while it writes them (``runs.write_through``'s
``.FILE.<random>.tmp``, lm evaluate's ``attnlab-eval-*`` folder): a write or an evaluate
running now keeps its own, finished it leaves none, and only a stopped one's is removed or
named, once."""
import os
import shutil
import sys
import tempfile

import attnlab.runs as runs


def test_an_evaluate_folder_without_file_locks_is_made_and_removed(tmp_path, monkeypatch):
    """Windows: no ``fcntl``, and a directory cannot be opened: the folder is still made,
    used and removed (it was a PermissionError traceback, and the folder left)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    real = os.open

    def no_open_of_a_directory(path, *args, **kwargs):  # (attnlab's: shutil's own differ)
        if os.path.isdir(path) and sys._getframe(1).f_globals["__name__"] == "attnlab.runs":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(runs, "fcntl", None)
    monkeypatch.setattr(os, "open", no_open_of_a_directory)
    with runs.held_temporary_folder("attnlab-eval-", "an attnlab evaluate --data") as folder:
        (folder / "tokens.bin").write_bytes(b"\0" * 64)
    assert list(tmp_path.iterdir()) == []


def test_a_finished_evaluates_folder_is_not_taken_for_a_stopped_ones(tmp_path, monkeypatch,
                                                                     capsys):
    """An evaluate starting as another finishes: the finishing one removes its folder while
    it still holds it, so the starting one says nothing of a stopped evaluate."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    real = shutil.rmtree
    started = []

    def another_evaluate_starts_first(path, *args, **kwargs):
        if not started:
            started.append(path)
            with runs.held_temporary_folder("attnlab-eval-", "an attnlab evaluate --data"):
                pass
        return real(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", another_evaluate_starts_first)
    with runs.held_temporary_folder("attnlab-eval-", "an attnlab evaluate --data") as folder:
        (folder / "tokens.bin").write_bytes(b"\0" * 4096)
    assert started and "note:" not in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_write_that_finishes_while_its_temporary_is_checked_is_not_named(tmp_path,
                                                                          monkeypatch, capsys):
    """A write renames its temporary into place between another write's opening and locking
    it: the file it wrote is kept, and nothing is said of a stopped write."""
    out = tmp_path / "out.png"
    fd, tmp = runs._create_temporary(out)
    os.write(fd, b"x" * 100)
    real = runs.try_lock

    def the_write_finishes_first(descriptor):
        os.replace(tmp, out)
        os.close(fd)  # (its lock goes with it)
        monkeypatch.setattr(runs, "try_lock", real)
        return real(descriptor)

    monkeypatch.setattr(runs, "try_lock", the_write_finishes_first)
    runs.remove_stopped_writes(out)
    assert "note:" not in capsys.readouterr().err
    assert out.read_bytes() == b"x" * 100


def test_a_write_that_locks_its_temporary_itself_holds_it_until_renamed(tmp_path, monkeypatch,
                                                                       capsys):
    """data jets: HDF5 locks the file while it writes it (or not at all, with
    HDF5_USE_FILE_LOCKING=FALSE), and closes it before the sync and rename: a second write
    of the same file starting then leaves the temporary to the first, which completes."""
    out = tmp_path / "jets.h5"
    real = runs.sync

    def a_second_write_starts(path):
        runs.remove_stopped_writes(out)
        return real(path)

    monkeypatch.setattr(runs, "sync", a_second_write_starts)
    runs.write_through(out, lambda tmp: tmp.write_bytes(b"jets" * 100), lock=False)
    assert out.read_bytes() == b"jets" * 100
    assert "note:" not in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["jets.h5"]
