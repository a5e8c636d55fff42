"""``attnlab plot`` (and ``view --out``, ``data jets``: every file written through
``runs.write_through``) killed (SIGKILL, out of memory) between writing its hidden temporary
file and renaming it left ``.FILE.<random>.tmp`` beside the file for good. The next write of
that file removes it, saying so; one that a live write holds, or an empty one, is left."""
import fcntl
import os

import pytest

from attnlab.cli import main

from .test_killed_train import _killed_writing
from .test_leftovers import _killed


def _temporaries(folder, name):
    return sorted(p for p in folder.iterdir() if p.name.startswith(f".{name}.")
                  and p.name.endswith(".tmp"))


@pytest.mark.slow  # kills a process
def test_the_next_plot_removes_what_a_killed_plot_left(tmp_path, capsys):
    png = tmp_path / "pe.png"
    argv = ["plot", "pe", "--d-model", "8", "--max-len", "16", "--out", str(png)]
    _killed(_killed_writing("pe.png"), tmp_path, *argv)
    left = _temporaries(tmp_path, "pe.png")
    assert len(left) == 1 and not png.exists(), left
    size = left[0].stat().st_size
    capsys.readouterr()

    assert main(argv) == 0
    assert (f"note: removed {left[0]} ({size:,} bytes), left by a write of {png} that was "
            f"stopped") in capsys.readouterr().err.splitlines()
    assert _temporaries(tmp_path, "pe.png") == [] and png.read_bytes().startswith(b"\x89PNG")


def test_a_temporary_a_live_write_holds_and_a_users_file_are_left(tmp_path, capsys):
    png = tmp_path / "pe.png"
    writing = tmp_path / ".pe.png.0123abcd.tmp"  # another plot of pe.png, writing it now
    writing.write_bytes(b"half a PNG")
    empty = tmp_path / ".pe.png.89abcdef.tmp"  # (one just made, not yet locked)
    empty.touch()
    mine = [tmp_path / ".pe.png.mine.tmp", tmp_path / ".other.png.0123abcd.tmp"]
    for path in mine:
        path.write_bytes(b"a user's file")
    held = os.open(writing, os.O_RDONLY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert main(["plot", "pe", "--d-model", "8", "--max-len", "16", "--out", str(png)]) == 0
    finally:
        os.close(held)
    assert "note:" not in capsys.readouterr().err
    assert writing.read_bytes() == b"half a PNG" and empty.exists()
    assert all(path.read_bytes() == b"a user's file" for path in mine)
