"""``attnlab evaluate RUN --data FILE`` of a language model encodes FILE into a token file in
a temporary folder (``attnlab-eval-*``); killed (SIGKILL, out of memory) it left that folder,
as large as the text, in /tmp for good. The next such evaluate removes it, saying so; one
that a running evaluate holds is left."""
import fcntl
import os
import signal
import tempfile

import pytest

from attnlab.cli import main

from .conftest import tiny_args, write_corpus
from .test_leftovers import _killed

pytestmark = pytest.mark.slow  # trains a run, and kills a process


def _killed_when_encoded():
    """evaluate --data: its token file written, then killed as it was to read it."""
    from attnlab.tasks.lm import runtime

    def killed(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    runtime.TokenWindows = killed


def test_the_next_evaluate_removes_the_folder_a_killed_one_left(tmp_path, monkeypatch, capsys):
    temporary = tmp_path / "tmp"  # the system's temporary folder, for this test
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    corpus, run = write_corpus(tmp_path / "corpus.txt"), tmp_path / "run"
    assert main(["train", "lm", "--out", str(run), "--max-steps", "2",
                 *tiny_args("lm", {"lm": corpus})]) == 0
    _killed(_killed_when_encoded, tmp_path, "evaluate", str(run), "--data", str(corpus))
    left = _folders(temporary)
    assert len(left) == 1, left
    size = (left[0] / "tokens.bin").stat().st_size
    running = temporary / "attnlab-eval-abcd1234"  # an evaluate running now holds its own
    (running / "tokens.bin").parent.mkdir()
    (running / "tokens.bin").write_bytes(b"\0" * 8)
    held = os.open(running, os.O_RDONLY)
    capsys.readouterr()
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert main(["evaluate", str(run), "--data", str(corpus)]) == 0
    finally:
        os.close(held)
    assert (f"note: removed {left[0]} ({size:,} bytes), left by an attnlab evaluate --data "
            f"that was stopped") in capsys.readouterr().err.splitlines()
    assert _folders(temporary) == [running]


def _folders(temporary):
    return sorted(temporary.glob("attnlab-eval-*"))
