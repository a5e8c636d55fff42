"""A ``prepare`` killed (SIGKILL, out of memory) while it wrote its token files left them
under their temporary names in --out, and the next ``prepare`` to that --out called them "a
prepared corpus" to replace with --force. It now removes them, saying so, and prepares."""
import os
import signal

import pytest

from attnlab.cli import main

from .conftest import write_corpus
from .test_leftovers import _killed

pytest.importorskip("fcntl")  # (os.fork: POSIX only)


def _killed_after_the_first_chunk():
    """The second pass of prepare: its first chunk of tokens written, then killed."""
    import attnlab.data.corpus as corpus

    encoded = corpus._encoded

    def killed(*args, **kwargs):
        for chunk in encoded(*args, **kwargs):
            yield chunk
            os.kill(os.getpid(), signal.SIGKILL)

    corpus._encoded = killed


@pytest.mark.slow  # kills a process
def test_a_prepare_killed_while_writing_is_followed_by_one_that_prepares(tmp_path, capsys):
    text, out = write_corpus(tmp_path / "corpus.txt"), tmp_path / "corpus"
    _killed(_killed_after_the_first_chunk, tmp_path, "prepare", str(text), "--out", str(out))
    left = sorted(p.name for p in out.iterdir())
    assert left == [".train.bin.tmp", ".val.bin.tmp"], left
    size = sum((out / name).stat().st_size for name in left)
    capsys.readouterr()

    assert main(["prepare", str(text), "--out", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert (f"note: --out {out}: removed .train.bin.tmp, .val.bin.tmp ({size:,} bytes), left "
            f"by a prepare that was stopped while writing it") in err, err
    assert sorted(p.name for p in out.iterdir()) == ["meta.json", "tokenizer.json",
                                                     "train.bin", "val.bin"]


def test_without_file_locks_what_a_prepare_may_be_writing_is_named_not_removed(
        tmp_path, monkeypatch, capsys):
    """On a file system with no locks (NFS) a prepare cannot tell a killed prepare's
    temporary files from those of one writing now: it removed them under that one; it now
    names them and is refused, leaving them."""
    import attnlab.data.corpus as corpus

    text, out = write_corpus(tmp_path / "corpus.txt"), tmp_path / "corpus"
    out.mkdir()
    for name in (".train.bin.tmp", ".val.bin.tmp"):
        (out / name).write_bytes(b"\0" * 8)
    monkeypatch.setattr(corpus, "hold", lambda *args: None)
    assert main(["prepare", str(text), "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"attnlab: error: --out {out} holds .train.bin.tmp, .val.bin.tmp, left by a prepare "
        f"that was stopped while writing it, or written by one running now (this file system "
        f"has no locks to tell which); remove them if no attnlab prepare is writing {out}, "
        f"and prepare again\n")
    assert sorted(p.name for p in out.iterdir()) == [".train.bin.tmp", ".val.bin.tmp"]
    assert all((out / name).read_bytes() == b"\0" * 8 for name in (".train.bin.tmp",
                                                                     ".val.bin.tmp"))
