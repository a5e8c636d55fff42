"""SIGTERM (``kill PID``, a batch scheduler's stop, ``timeout``) stops a command that does not
train as Ctrl-C does: what it undoes when interrupted it undoes, and it exits 143 with one
line. (``train``'s own handling, a checkpoint and the resume command, is test_kill_resume's
and tests/cli/test_train_reverse.py's.)"""
import os
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow  # starts and kills real processes

PATIENCE = 600  # seconds, on a busy two-core machine


def test_a_terminated_prepare_leaves_nothing_that_blocks_its_next_run(tmp_path, spawn):
    """Killed while it wrote its token files, prepare left --out holding half-written
    .train.bin.tmp and .val.bin.tmp, and its next run was refused: "--out ... already holds a
    prepared corpus; add --force"."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat and the dog ran far away\n" * 200_000)
    out = tmp_path / "prepared"
    proc = spawn([sys.executable, "-m", "attnlab", "prepare", str(corpus), "--out", str(out),
                  "--tokenizer", "char"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                 text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    deadline = time.time() + PATIENCE
    while not out.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)  # the directory appears as the token files start
    assert out.exists() and proc.poll() is None, "prepare ended before it wrote anything"
    proc.terminate()
    stdout, stderr = proc.communicate(timeout=PATIENCE)
    assert (proc.returncode, stdout, stderr) == (143, "", "attnlab: terminated (SIGTERM)\n")
    assert not out.exists()


def test_a_sigterm_during_a_files_read_stops_the_command_not_blamed_on_the_file(
        tmp_path, capsys, monkeypatch):
    """A SIGTERM that arrives while a reader guards a load with `except Exception` (the GGUF
    header here; a checkpoint, a tokenizer the same) was taken for that file's error: exit 2,
    "x.gguf is not a readable GGUF file (terminated (SIGTERM))", or swallowed and the command
    went on. It stops the command, as Ctrl-C does: 143 and one line. (In-process: the handler
    raises where the signal lands, so the read raising it is the same.)"""
    gguf = pytest.importorskip("gguf")
    from attnlab.cli import main
    from attnlab.errors import Interrupted

    def terminated(*args, **kwargs):
        raise Interrupted("terminated (SIGTERM)", 15)

    monkeypatch.setattr(gguf, "GGUFReader", terminated)
    (tmp_path / "x.gguf").write_bytes(b"GGUF" + bytes(60))
    assert main(["generate", str(tmp_path / "x.gguf"), "--prompt", "hi"]) == 143
    assert capsys.readouterr().err == "attnlab: terminated (SIGTERM)\n"
