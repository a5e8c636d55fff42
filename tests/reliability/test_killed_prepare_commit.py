"""A ``prepare`` killed (SIGKILL, out of memory) after it moved its token files into place
but before it wrote meta.json left a directory that the next ``prepare`` to that --out
called "a prepared corpus" to replace with --force, and that --force then refused as no
corpus: it is named as a stopped prepare's, with what to do, and nothing is removed."""
import hashlib
import os
import signal

import pytest

from attnlab.cli import main

from .conftest import write_corpus
from .test_leftovers import _killed

pytestmark = pytest.mark.slow  # kills a process

pytest.importorskip("fcntl")  # (os.fork: POSIX only)


def _killed_before_meta():
    """prepare's commit: the token files and tokenizer.json renamed, then killed as it was to
    write meta.json."""
    import attnlab.runs as runs

    write_json = runs.write_json

    def killed(path, obj):
        if os.path.basename(path) == "meta.json":
            os.kill(os.getpid(), signal.SIGKILL)
        write_json(path, obj)

    runs.write_json = killed


def _files(out):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.iterdir())}


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_a_prepare_killed_before_its_meta_json_is_named_as_such(tmp_path, capsys, force):
    text, out = write_corpus(tmp_path / "corpus.txt"), tmp_path / "corpus"
    _killed(_killed_before_meta, tmp_path, "prepare", str(text), "--out", str(out))
    before = _files(out)
    assert sorted(before) == ["tokenizer.json", "train.bin", "val.bin"], before
    capsys.readouterr()

    assert main(["prepare", str(text), "--out", str(out), *force]) == 2
    assert capsys.readouterr().err == (
        f"attnlab: error: --out {out} holds tokenizer.json, train.bin, val.bin but no "
        f"meta.json: a prepare stopped while moving its files into place leaves this (so may "
        f"another tool, e.g. nanoGPT's train.bin); if a stopped prepare left them, remove them "
        f"and prepare again, or choose another --out (nothing was changed)\n")
    assert _files(out) == before


def test_one_killed_with_a_temporary_file_left_is_named_as_a_stopped_prepare(tmp_path, capsys):
    """Killed between its renames: the tokenizer's temporary file, a name of prepare's own,
    tells that a prepare left them."""
    out = tmp_path / "corpus"
    out.mkdir()
    for name in ("train.bin", "val.bin", ".tokenizer.json.tmp"):
        (out / name).write_bytes(b"\0\0")
    assert main(["prepare", str(write_corpus(tmp_path / "corpus.txt")), "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"attnlab: error: --out {out} holds .tokenizer.json.tmp, train.bin, val.bin but no "
        f"meta.json: left by a prepare stopped while moving its files into place; remove them "
        f"and prepare again, or choose another --out (nothing was changed)\n")
    assert sorted(p.name for p in out.iterdir()) == [".tokenizer.json.tmp", "train.bin",
                                                     "val.bin"]
