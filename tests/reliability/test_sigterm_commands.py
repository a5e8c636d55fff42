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
