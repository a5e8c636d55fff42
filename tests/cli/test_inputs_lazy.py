"""`predict`, `generate` and `translate --input-file BIG` hold a chunk of its lines at a time,
not the file: every line is read and checked first (a bad line named before any answer), then
each chunk is read again as it is answered. A file changed in between is refused, naming it,
never answered as lines no one checked; standard input and a pipe are read once (copied)."""
from __future__ import annotations

import io
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
from types import SimpleNamespace

import pytest

from attnlab.cli import main
from attnlab.commands.generate import print_outputs
from attnlab.commands.inputs import checked_ids, read_inputs, write_in_chunks
from attnlab.data.tables import CHUNK_ROWS
from attnlab.errors import UsageError

# two chunks and a bit; "\r\n" endings, a byte-order mark and no final newline, as editors write
MANY = [f"{k % 10} {k % 7} {k % 3}" for k in range(2 * CHUNK_ROWS + 5)]
DATA = ("\ufeff" + "\r\n".join(MANY)).encode()


def test_every_line_read_and_a_chunk_held(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(DATA)
    lines, labels = read_inputs(str(path))
    assert len(lines) == len(labels) == len(MANY)
    assert list(lines) == MANY
    assert lines[CHUNK_ROWS - 2:CHUNK_ROWS + 2] == MANY[CHUNK_ROWS - 2:CHUNK_ROWS + 2]
    assert (lines[0], lines[-1]) == (MANY[0], MANY[-1])
    assert lines.held <= CHUNK_ROWS  # not the 16,389 lines of the file


def test_the_lines_behave_as_the_list_they_replace(tmp_path):
    """read_inputs returned a list: its count() and a tuple's inequality hold for the lines and
    their labels too (an int attribute `count` hid the method)."""
    path = tmp_path / "big.txt"
    path.write_bytes(DATA)
    lines, labels = read_inputs(str(path))
    assert lines.count(MANY[7]) == MANY.count(MANY[7]) > 1
    assert labels.count(f"--input-file {path} line 2") == 1
    assert lines == MANY and lines != tuple(MANY) and MANY != tuple(MANY)


def test_standard_input_read_once(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(DATA)))
    lines, _ = read_inputs("-")
    assert list(lines) == MANY and lines[::-1][:2] == MANY[::-1][:2]
    assert lines.held <= CHUNK_ROWS


def test_a_file_changed_after_its_check_is_refused(tmp_path, capsys):
    """A line of the last chunk rewritten (same length) after the first pass checked it: the
    answers of the chunks before stand, and the error says the file changed and what the output
    holds."""
    path = tmp_path / "big.txt"
    path.write_bytes(DATA)
    lines, labels = read_inputs(str(path), command="translate")
    with open(path, "r+b") as f:
        f.seek(len(DATA) - 20)
        f.write(b"x")
    with pytest.raises(UsageError) as caught:
        write_in_chunks(lines, labels, lambda part, named: [{"prediction": t} for t in part],
                        as_json=False, command="translate")
    assert str(caught.value).startswith(
        f"--input-file {path} changed while translate read it (its SHA-256 differs between its "
        f"readings)")
    assert f"the output holds the answers to the first {2 * CHUNK_ROWS:,} of" in str(caught.value)
    assert capsys.readouterr().out.splitlines() == MANY[:2 * CHUNK_ROWS]


def test_generate_says_what_its_output_holds_when_the_file_changed(tmp_path, capsys):
    """As translate's: `generate --input-file big.txt` whose last chunk is rewritten after
    every prompt was checked prints the prompts before it, then names the file and says how many
    of the outputs were written (it said only that the file changed)."""
    path = tmp_path / "big.txt"
    path.write_bytes(DATA)
    lines, labels = read_inputs(str(path), command="generate")
    all_ids = checked_ids(lines, labels, lambda text: [len(text)])  # every prompt checked
    with open(path, "r+b") as f:
        f.seek(len(DATA) - 20)
        f.write(b"x")
    args = SimpleNamespace(input_file=str(path), json=False, seed=None)
    with pytest.raises(UsageError) as caught:
        print_outputs(args, lines, labels, all_ids, lambda ids, write, label: "")
    assert str(caught.value) == (
        f"--input-file {path} changed while generate read it (its SHA-256 differs between its "
        f"readings); generate it again once it is written; the output holds the answers to the "
        f"first {2 * CHUNK_ROWS:,} of {len(MANY):,} inputs, each line whole, and none of the 5 "
        f"after them")
    assert capsys.readouterr().out.splitlines() == MANY[:2 * CHUNK_ROWS]


@pytest.mark.parametrize("content, said", [
    (b"1 2\n" * CHUNK_ROWS + b"3\n \n" + b"\xff\n",
     " line {n}: not valid UTF-8 (byte 0xff at column 1); save the file as UTF-8"),
    (b"1 2\n" * (2 * CHUNK_ROWS) + b"\t\n1\n", " line {m} is empty; give one input per line"),
    (b"\xef\xbb\xbf", ": no inputs (the file is empty)"),
    (b"\r", " line 1 is empty; give one input per line"),  # as before: not "no inputs"
    (b"\xef\xbb\xbf\r", " line 1 is empty; give one input per line"),
])
def test_a_bad_line_past_the_first_chunk_is_named(tmp_path, content, said):
    path = tmp_path / "big.txt"
    path.write_bytes(content)
    with pytest.raises(UsageError) as caught:
        read_inputs(str(path))
    assert str(caught.value) == f"--input-file {path}" + said.format(
        n=CHUNK_ROWS + 3, m=2 * CHUNK_ROWS + 1)


@pytest.mark.slow
def test_a_pipe_is_read_as_its_file(reverse_run, tmp_path, capsys):
    """`predict RUN --input-file <(zcat big.gz)`: a pipe, read once, answered as the file."""
    path, fifo = tmp_path / "big.txt", tmp_path / "pipe"
    path.write_bytes(DATA)
    os.mkfifo(fifo)
    assert main(["predict", str(reverse_run), "--input-file", str(path)]) == 0
    from_file = capsys.readouterr().out
    writer = threading.Thread(target=fifo.write_bytes, args=(DATA,))
    writer.start()
    assert main(["predict", str(reverse_run), "--input-file", str(fifo)]) == 0
    writer.join()
    assert capsys.readouterr().out == from_file
    assert len(from_file.splitlines()) == len(MANY)


def _limit_files_to_64_kib() -> None:
    """A temporary directory with 64 KiB free, as a full disk or a small /tmp: a write past it
    fails with EFBIG (SIGXFSZ ignored, as it would otherwise end the process)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))


@pytest.mark.slow
def test_standard_input_too_big_for_the_temporary_directory_is_named(reverse_run):
    """`... | predict RUN --input-file -` with too little room in $TMPDIR for its copy: one line,
    exit 2, naming the temporary directory (it said "cannot read it" or "cannot write to
    standard output", exit 1)."""
    done = subprocess.run([sys.executable, "-m", "attnlab", "predict", str(reverse_run),
                           "--input-file", "-"], input=DATA, capture_output=True,
                          preexec_fn=_limit_files_to_64_kib, check=False)
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode().splitlines() == [
        f"attnlab: error: --input-file -: cannot copy standard input to a temporary file in "
        f"{tempfile.gettempdir()} (File too large); free space there, or set TMPDIR to a "
        f"directory with room for the input"]
