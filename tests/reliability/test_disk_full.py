"""A disk that fills while a run writes its training log: the command says so in one line that
names the file, and what was on disk stays whole (no half row of ``metrics.csv`` that a
resumed run reads back, no temporary file left taking the space).

The full disk is real: ``RLIMIT_FSIZE`` caps the size of any file this process writes, so a
write past it is cut short and fails (EFBIG, as ENOSPC does on a full disk; Python ignores the
signal that would otherwise end the process), in the middle of a row as a full disk does.
"""
import contextlib
import resource

import pytest

from attnlab.cli import main
from attnlab.training.csvlog import CSVLog


@contextlib.contextmanager
def files_capped_at(size: int):
    """No file this process writes grows past ``size`` bytes (pipes are not files)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def _log_of_two_rows(tmp_path):
    log = CSVLog(tmp_path / "logs" / "metrics.csv")
    log.write(1, {"train_loss": 2.4172234535217285}, seconds=0.037)
    log.write(2, {"train_loss": 2.367035388946533}, seconds=0.075)
    return log


def test_a_row_that_does_not_fit_is_not_left_half_written(tmp_path):
    log = _log_of_two_rows(tmp_path)
    before = log.path.read_bytes()
    with files_capped_at(len(before) + 8), pytest.raises(OSError) as raised:
        log.write(3, {"train_loss": 2.4174337387084961}, seconds=0.105)
    assert raised.value.filename == str(log.path)
    # a resumed run reads this file back: no "3,0.105" row with its loss cut off
    assert log.path.read_bytes() == before


def test_a_new_column_that_does_not_fit_leaves_the_log_as_it_was(tmp_path):
    log = _log_of_two_rows(tmp_path)
    before = log.path.read_bytes()
    with files_capped_at(len(before) + 8), pytest.raises(OSError) as raised:
        log.write(3, {"val_loss": 2.324683837890625}, seconds=0.11)  # the file is rewritten
    assert raised.value.filename == str(log.path)
    assert log.path.read_bytes() == before
    assert [p.name for p in log.path.parent.iterdir()] == ["metrics.csv"]  # no temporary left


@pytest.mark.slow  # imports TensorBoard
def test_a_full_disk_under_the_event_file_names_it_without_a_traceback(tmp_path, capsys):
    from attnlab.training.tblog import TensorBoardLog

    log = TensorBoardLog(tmp_path)
    log.begin(0)
    (events,) = tmp_path.glob("events.out.tfevents.*")
    with files_capped_at(events.stat().st_size + 200), pytest.raises(OSError) as raised:
        for step in range(1, 100):
            log.write(step, {"train_loss": 2.5, "lr": 0.001, "grad_norm": 0.4}, seconds=0.1)
    assert raised.value.filename == str(events)
    log.close()
    # TensorBoard's writer thread printed its own traceback ("Exception in thread ...")
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.slow  # trains a run
def test_a_run_whose_log_fills_the_disk_says_so_in_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    args = ["train", "reverse", "--out", str(run), "--max-steps", "20", "--train-size", "64",
            "--val-size", "16", "--test-size", "16", "--model-dim", "16", "--num-heads", "1",
            "--num-layers", "1", "--batch-size", "16", "--checkpoint-every", "1000",
            "--threads", "1"]
    with files_capped_at(2048):
        code = main(args)
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in err
    last = err.splitlines()[-1]
    assert last.startswith(f"attnlab: cannot write to {run / 'logs'}/"), last
    assert last.endswith(": File too large")


def _renames(monkeypatch) -> list[tuple[bool, str]]:
    """What ``os.replace`` renames while ``monkeypatch`` holds, as it comes: (whether the file
    was synced under its name since that name was last renamed away, the name it is given).
    Files are told by path, not inode: the inode of a file replaced is soon a new file's."""
    import os

    synced, renamed = set(), []
    fsync, replace = os.fsync, os.replace

    def recording_fsync(fd):
        synced.add(os.readlink(f"/proc/self/fd/{fd}"))  # (Linux: the path the fd is open at)
        fsync(fd)

    def recording_replace(src, dst):
        src = os.path.realpath(src)
        renamed.append((src in synced, os.path.basename(dst)))
        if src in synced:  # the name synced moves; a later file of the old name (another
            synced.remove(src)  # .last.ckpt.partial) is synced anew
            synced.add(os.path.realpath(dst))
        replace(src, dst)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(os, "replace", recording_replace)
    return renamed


@pytest.mark.parametrize("what", ["model.safetensors", "metrics.csv", "train.bin"])
def test_a_file_is_on_the_disk_before_it_takes_the_old_ones_name(tmp_path, monkeypatch, what):
    """A machine that crashes (power lost) just after the rename must not leave an empty
    model.safetensors or metrics.csv where the old one was, nor a train.bin of zeros that
    prepare's meta.json vouches for: the new file's data is synced before the rename."""
    import torch

    from attnlab.runs import save_weights

    renamed = _renames(monkeypatch)
    if what == "model.safetensors":
        save_weights(torch.nn.Linear(2, 2), tmp_path / what)
    elif what == "metrics.csv":
        _log_of_two_rows(tmp_path)
    else:
        from attnlab.data.corpus import prepare

        (tmp_path / "input.txt").write_text("to be or not to be\n" * 20)
        prepare([tmp_path / "input.txt"], tmp_path / "data", tokenizer="char")
    assert (True, what) in renamed and all(was_synced for was_synced, _ in renamed)


@pytest.mark.slow  # trains a run
def test_a_checkpoint_is_on_the_disk_before_it_takes_the_last_ones_name(tmp_path, monkeypatch):
    """Under ``--strategy fsdp`` Lightning writes the checkpoint itself (a plain torch.save,
    which is what stands in for it here), and the file was renamed last.ckpt unsynced: a
    machine that crashed just after left a last.ckpt whose data never reached the disk, the
    run's only checkpoint."""
    import shutil
    from pathlib import Path

    import torch

    from attnlab.training.hardware import fabric

    def save_as_fsdp_does(self, path, state, storage_options=None, filter=None):
        state = self._convert_stateful_objects_in_state(state, filter=filter or {})
        if self.is_global_zero:
            torch.save(state, path)

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parent.parent / "fixtures" / "reverse-trainer", run)
    monkeypatch.setattr(fabric().strategies.Strategy, "save_checkpoint", save_as_fsdp_does)
    renamed = _renames(monkeypatch)
    assert main(["train", "reverse", "--out", str(run), "--resume", "--max-steps", "30",
                 "--threads", "1"]) == 0
    assert (True, "last.ckpt") in renamed and all(was_synced for was_synced, _ in renamed)


@pytest.mark.slow  # starts a process
@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_predictions_cut_short_by_a_full_disk_are_an_error(reverse_run, tmp_path, unbuffered):
    """``predict --input-file FILE --json > out.jsonl`` on a disk that fills: under
    PYTHONUNBUFFERED=1 (many Docker images set it) Python dropped what the file did not take,
    and the command ended with exit status 0 and the file cut short."""
    import os
    import random
    import subprocess
    import sys
    from pathlib import Path

    rng = random.Random(0)
    inputs = tmp_path / "inputs.txt"
    inputs.write_text("".join(" ".join(str(rng.randrange(10)) for _ in range(16)) + "\n"
                              for _ in range(300)))
    root = Path(__file__).parent.parent.parent
    env = {**os.environ, "PYTHONUNBUFFERED": unbuffered,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    out = tmp_path / "out.jsonl"
    with open(out, "wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "attnlab", "predict", str(reverse_run), "--input-file",
             str(inputs), "--json", "--threads", "1"], stdout=stdout, stderr=subprocess.PIPE,
            text=True, env=env, timeout=300,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)))
    assert out.stat().st_size == 4096  # the disk took that much of the answers
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[-1] == \
        "attnlab: cannot write to standard output: File too large"


def test_unbuffered_output_to_a_console_is_left_to_the_console():
    """Under ``python -u`` standard output is a raw stream; only a file's (FileIO) is wrapped
    to write whole. A Windows console's is a RawIOBase on descriptor 1 too, and wrapping it in
    a FileIO bypassed the console's writer: text not in the console's code page came out
    garbled."""
    import io

    from attnlab.cli import _whole_writes

    class Console(io.RawIOBase):  # stands in for io._WindowsConsoleIO
        def fileno(self):
            return 1

        def writable(self):
            return True

        def write(self, data):
            return len(data)

    console = io.TextIOWrapper(Console(), encoding="utf-8", write_through=True)
    assert _whole_writes(console) is console


def test_the_kept_log_of_an_interrupted_run_is_whole_or_absent(tmp_path):
    """``--resume`` keeps the interrupted process's log as metrics.part1.csv: on a full disk
    that copy was left half made, and the error named no file."""
    from attnlab.training.csvlog import keep_previous_log

    log = _log_of_two_rows(tmp_path)
    with files_capped_at(log.path.stat().st_size - 8), pytest.raises(OSError) as raised:
        keep_previous_log(log.path.parent)
    assert raised.value.filename == str(log.path.with_name("metrics.part1.csv"))
    assert [p.name for p in log.path.parent.iterdir()] == ["metrics.csv"]


@pytest.mark.parametrize("cut", ["2", "2,0.075,2.36", "2\r\n"])
def test_a_row_cut_short_is_not_read_back_on_resume(tmp_path, cut):
    """A log that ends in half a row (``2``: an older version's full disk, or a power loss)
    gave a row ``2,,`` after ``--resume``: a step logged with no numbers, or a loss cut
    short; so did a row with fields missing. The whole rows are kept; the cut one is
    dropped, as a step not logged."""
    log = CSVLog(tmp_path / "metrics.csv")
    log.write(1, {"train_loss": 2.4172234535217285}, seconds=0.037)
    with open(log.path, "a", newline="") as f:
        f.write(cut)
    resumed = CSVLog(log.path)
    resumed.begin(20)
    assert log.path.read_text().splitlines() == ["step,train_seconds,train_loss",
                                                  "1,0.037,2.4172234535217285"]
