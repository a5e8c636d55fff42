"""User errors of train / predict / evaluate / plot: exit 2, one line on stderr naming the flag
or value, no traceback, nothing trained."""
import errno
import io
import subprocess
import sys

import pytest

from attnlab.cli import main
from attnlab.models.predictor import ElementPredictor
from attnlab.errors import UsageError
from attnlab.runs import read_json, save_weights, write_yaml


def _fails(argv, capsys, *named):
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnlab: error:"), err
    assert "Traceback" not in err
    for text in named:
        assert text in lines[0], (text, lines[0])
    return lines[0]


@pytest.mark.slow
def test_model_dim_not_divisible_real_process_exit_2(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "attnlab", "train", "reverse", "--out", str(out),
                           "--model-dim", "30", "--num-heads", "4"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "--model-dim (30)" in proc.stderr and "--num-heads (4)" in proc.stderr
    assert not out.exists()  # stopped before anything was written or trained


@pytest.mark.parametrize("flags, named", [
    (["--model-dim", "30", "--num-heads", "4"], ["--model-dim", "--num-heads"]),
    (["--lr", "-1"], ["--lr", "-1"]),
    (["--num-categories", "1"], ["--num-categories", "1"]),
    (["--seq-len", "0"], ["--seq-len"]),
    (["--val-every", "0"], ["--val-every"]),
    (["--threads", "0"], ["--threads"]),
    (["--test-size", "0"], ["--test-size"]),
    (["--dropout", "1.5"], ["--dropout"]),
    (["--batch-size", "x"], ["--batch-size", "'x'"]),
    (["--frobnicate"], ["--frobnicate"]),
    (["--resume"], ["--resume"]),
    (["--config", "missing.yaml"], ["--config", "missing.yaml"]),
])
def test_train_flag_errors(flags, named, capsys, tmp_path):
    out = tmp_path / "run"
    _fails(["train", "reverse", "--out", str(out), *flags], capsys, *named)
    assert not (out / "model.safetensors").exists()


def test_out_already_used_needs_resume(tmp_path, capsys):
    (tmp_path / "old.txt").write_text("x")
    _fails(["train", "reverse", "--out", str(tmp_path)], capsys, "--out", "--resume")


@pytest.mark.parametrize("given", [["--config", ""], ["--config", " ", "--out", "run"],
                                   ["--out", ""], ["--out", "  "]])
def test_an_empty_config_or_out_is_refused_not_read_as_not_given(given, capsys, tmp_path,
                                                                  monkeypatch):
    # `--config $CFG` with CFG unset trained on the defaults, unsaid; `--out $OUT` trained
    # into a new runs/reverse-<timestamp>
    monkeypatch.chdir(tmp_path)
    tiny = ["--max-steps", "1", "--train-size", "32", "--val-size", "8", "--test-size", "8",
            "--model-dim", "8", "--num-heads", "1", "--num-layers", "1", "--threads", "1"]
    _fails(["train", "reverse", *tiny, *given], capsys, f"{given[0]} is empty; name a")
    assert list(tmp_path.iterdir()) == []  # no run directory, not even runs/


@pytest.mark.parametrize("out", ["''", "'  '"])
def test_an_empty_out_in_the_config_file_is_refused_naming_the_file(out, capsys, tmp_path,
                                                                  monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text(f"out: {out}\nmax_steps: 1\n")
    _fails(["train", "reverse", "--config", "c.yaml"], capsys,
           "out in --config c.yaml is empty; name a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]  # no runs/ either


def test_an_empty_monitor_is_refused_as_empty(tmp_path, capsys):
    line = _fails(["train", "reverse", "--monitor", "", "--keep-best", "--out",
                   str(tmp_path / "r")], capsys, "--monitor")
    assert "is empty; name a validation metric" in line
    assert not (tmp_path / "r").exists()


def test_resume_without_checkpoint(tmp_path, capsys):
    # A finished run (it has its model) whose checkpoints were deleted has nothing to resume.
    # (A run killed before its first checkpoint restarts from step 0: tests/reliability.)
    write_yaml(tmp_path / "config.yaml", {"task": "reverse"})
    (tmp_path / "model.safetensors").write_bytes(b"")
    _fails(["train", "reverse", "--out", str(tmp_path), "--resume"], capsys, "--resume", "checkpoint")


def test_config_with_unknown_setting(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model_dim: 32\nwarp_speed: 9\n")
    _fails(["train", "reverse", "--out", str(tmp_path / "r"), "--config", str(cfg)], capsys,
           "warp_speed")


@pytest.fixture
def run_dir(tmp_path):
    cfg = {"task": "reverse", "num_categories": 10, "seq_len": 4, "model_dim": 8, "num_heads": 1,
           "num_layers": 1, "dim_feedforward": 16, "dropout": 0.0, "norm_first": False, "seed": 0,
           "test_size": 10}
    save_weights(ElementPredictor(10, 8, 10, 1, 1, dim_feedforward=16), tmp_path / "model.safetensors")
    write_yaml(tmp_path / "config.yaml", cfg)
    return tmp_path


@pytest.mark.parametrize("text, named", [
    ("3 1 10", ["'10'", "0..9"]),
    ("3 a", ["'a'"]),
    ("1 2 3 4 5", ["5 tokens", "--seq-len 4", "'5'"]),
    ("   ", ["--input", "empty"]),
    ("3 \u00b2", ["'\u00b2'", "0..9"]),  # a superscript two: a digit to str.isdigit, not to int()
])
def test_predict_input_errors(run_dir, text, named, capsys):
    _fails(["predict", str(run_dir), "--input", text], capsys, *named)


def test_evaluate_reads_a_notepad_file_as_its_plain_twin(tmp_path, capsys, run_dir):
    """A byte-order mark and CRLF line ends (Windows Notepad) change no sequence: the BOM was
    read as part of the first token and the file refused ("token '3'", printed alike)."""
    plain, notepad = tmp_path / "plain.txt", tmp_path / "notepad.txt"
    plain.write_text("3 1 4\n1 5 9 2\n")
    notepad.write_bytes(b"\xef\xbb\xbf3 1 4\r\n1 5 9 2\r\n")
    assert main(["evaluate", str(run_dir), "--data", str(plain)]) == 0
    expected = capsys.readouterr().out
    assert main(["evaluate", str(run_dir), "--data", str(notepad)]) == 0
    assert capsys.readouterr().out == expected


def test_predict_and_evaluate_missing_or_broken_run(tmp_path, capsys, run_dir):
    _fails(["predict", str(tmp_path / "nope"), "--input", "1"], capsys, "nope")
    _fails(["evaluate", str(tmp_path / "nope")], capsys, "nope")
    _fails(["evaluate", str(run_dir), "--data", str(tmp_path / "none.txt")], capsys, "--data", "none.txt")
    bad = tmp_path / "bad.txt"
    bad.write_text("1 2\n1 12\n")
    _fails(["evaluate", str(run_dir), "--data", str(bad)], capsys, "line 2", "'12'")
    bad.write_bytes(b"1 2\n3 \xff 4\n")
    _fails(["evaluate", str(run_dir), "--data", str(bad)], capsys, "--data", "line 2", "UTF-8")
    _fails(["evaluate", str(run_dir), "--data", str(tmp_path)], capsys, "--data", "directory")
    (run_dir / "model.safetensors").write_bytes(b"not a safetensors file")
    _fails(["predict", str(run_dir), "--input", "1 2"], capsys, "model.safetensors")


def test_a_text_value_that_starts_like_a_negative_number_is_a_value_not_a_flag():
    from attnlab.cli import _glue_negative_values as glue

    assert glue(["predict", "d", "--input", "-0.4,1;2,3"]) == ["predict", "d", "--input=-0.4,1;2,3"]
    assert glue(["generate", "d", "--prompt", "-.5 is"]) == ["generate", "d", "--prompt=-.5 is"]
    assert glue(["generate", "d", "--chat", "-5 + 3?", "--system", "-1 means no"]) == [
        "generate", "d", "--chat=-5 + 3?", "--system=-1 means no"]
    # a forgotten value is still missing, not swallowed
    assert glue(["predict", "d", "--input", "--out"]) == ["predict", "d", "--input", "--out"]
    assert glue(["predict", "d", "--input", "3 1 4"]) == ["predict", "d", "--input", "3 1 4"]


def test_a_text_flag_given_twice_is_refused_not_answered_for_the_last_alone(run_dir, capsys):
    """argparse keeps a flag's last value: `predict --input a --input b` printed b's answer
    alone, and the user read it as the answer to a."""
    _fails(["predict", str(run_dir), "--input", "1 2", "--input", "3 4"], capsys,
           "--input is given 2 times", "--input-file")
    _fails(["predict", str(run_dir), "--input=1 2", "--input", "-3"], capsys, "--input", "2 times")
    _fails(["generate", str(run_dir), "--chat", "hi", "--system", "a", "--system=b"], capsys,
           "--system is given 2 times")
    # plot attention and view draw one input: no --input-file to point to (review)
    said = _fails(["plot", "attention", str(run_dir), "--input", "1", "--input", "2"], capsys)
    assert said.endswith("--input is given 2 times; it takes one text")
    # a file or a column given twice: the last alone was read
    _fails(["predict", str(run_dir), "--input-file", "a.csv", "--text-column", "review",
            "--text-column=id"], capsys, "--text-column is given 2 times; it takes one column")
    _fails(["translate", str(run_dir), "--input-file", "a.txt", "--input-file", "b.txt"],
           capsys, "--input-file is given 2 times; it takes one file")
    assert main(["predict", str(run_dir), "--input", "1 2"]) == 0  # once is fine
    assert capsys.readouterr().out.strip()


def test_a_closed_standard_output_is_refused_not_written_into_nothing(run_dir, monkeypatch, capsys):
    """`attnlab predict ... >&-`: Python's print() drops text when there is no stdout, so the
    command would exit 0 having written nothing."""
    monkeypatch.setattr(sys, "stdout", None)
    _fails(["predict", str(run_dir), "--input", "1 2"], capsys, "standard output is closed")


def test_a_full_disk_on_standard_output_is_one_line_and_exit_1(run_dir, monkeypatch, capsys):
    """`attnlab predict ... > /dev/full`: the failed write is said in one line, no traceback."""
    class Full(io.StringIO):
        def flush(self):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sys, "stdout", Full())
    assert main(["predict", str(run_dir), "--input", "1 2"]) == 1
    err = capsys.readouterr().err
    assert err == "attnlab: cannot write to standard output: No space left on device\n"


def test_a_full_disk_under_a_run_file_names_that_file_not_standard_output(tmp_path,
                                                                          monkeypatch):
    """A disk that fills while a run's figure, config or metrics are written (the failed
    write names no file; `attnlab train` on a full disk said "cannot write to standard
    output"): the error names the file being written, which the command line's one line
    shows, and no temporary file is left."""
    import attnlab.runs
    from attnlab.runs import write_json

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(attnlab.runs.os, "fsync", full)
    path = tmp_path / "metrics.json"
    with pytest.raises(OSError) as raised:
        write_json(path, {"steps": 1})
    assert (raised.value.errno, raised.value.filename) == (errno.ENOSPC, str(path))
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_while_weights_are_saved_is_a_write_error_naming_the_file(tmp_path,
                                                                             monkeypatch):
    """safetensors reports a failed write as its own SafetensorError, which the command line
    showed as a traceback; it is the OSError of that write, naming the model file (so one line,
    exit 1), and the half-written temporary file is removed."""
    import safetensors.torch
    from safetensors import SafetensorError

    def full(model, filename, *args, **kwargs):
        with open(filename, "wb") as f:
            f.write(b"half a model")
        raise SafetensorError("Error while serializing: I/O error: No space left on device "
                              "(os error 28)")

    monkeypatch.setattr(safetensors.torch, "save_model", full)
    path = tmp_path / "model.safetensors"
    with pytest.raises(OSError) as raised:
        save_weights(ElementPredictor(10, 8, 10, 1, 1, dim_feedforward=16), path)
    assert (raised.value.errno, raised.value.filename) == (errno.ENOSPC, str(path))
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_inside_torch_save_is_the_write_error_naming_the_file(tmp_path):
    """What torch.save raises when the disk fills part-way (its zip writer's RuntimeError,
    "unexpected pos ...") is, once named, the OSError of the failed write: one line, exit 1."""
    import torch

    from attnlab.runs import naming

    class FillsUp(io.RawIOBase):
        written = 0

        def writable(self):
            return True

        def write(self, data):
            self.written += len(data)
            if self.written > 300:
                raise OSError(errno.ENOSPC, "No space left on device")
            return len(data)

    path = tmp_path / "last.ckpt"
    with pytest.raises(BaseException) as raised:
        torch.save({"weights": torch.zeros(300)}, FillsUp())
    error = naming(raised.value, path)
    assert isinstance(error, OSError)
    assert (error.errno, error.filename) == (errno.ENOSPC, str(path))


@pytest.mark.slow
def test_a_full_disk_while_the_checkpoint_is_written_is_one_line_and_keeps_the_last(tmp_path):
    """`ulimit -f` (or a full disk) under `train --resume`: torch.save's zip writer reports the
    failed write as its own RuntimeError ("unexpected pos ..."), which ended the run in a
    traceback; it is the write's OSError naming the checkpoint (one line, exit 1), and the
    previous last.ckpt stays as it was, with no half-written file beside it."""
    import resource
    import shutil
    from pathlib import Path

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parent.parent / "fixtures" / "reverse-trainer", run)
    ckpt = run / "checkpoints" / "last.ckpt"
    before = ckpt.read_bytes()
    # above what a resumed run writes before its checkpoint, below the checkpoint: its write
    # fails inside torch.save (a limit that falls in its last buffered bytes fails in the
    # flush after torch.save, an OSError already)
    limit = 4096

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = subprocess.run([sys.executable, "-m", "attnlab", "train", "reverse", "--out",
                           str(run), "--resume", "--max-steps", "30", "--threads", "1"],
                          preexec_fn=small_files, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == f"attnlab: cannot write to {ckpt}: File too large"
    assert ckpt.read_bytes() == before
    assert sorted(p.name for p in ckpt.parent.iterdir()) == ["last.ckpt"]


def _refuse_reading(monkeypatch, locked):
    """``locked`` read as a file without read permission (the tests may run as root, who
    reads any file)."""
    from pathlib import Path

    opened = Path.open

    def refused(self, *args, **kwargs):
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return opened(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", refused)


@pytest.mark.parametrize("name", ["config.yaml", "settings.yaml"])
def test_a_file_it_may_not_read_is_one_line_naming_it(name, run_dir, tmp_path, monkeypatch,
                                                      capsys):
    """A run's config.yaml or a --config file without read permission (another user's, on a
    shared disk) was a PermissionError traceback; it is one line naming the file, and
    nothing is written."""
    (tmp_path / "settings.yaml").write_text("max_steps: 2\n")
    locked = (tmp_path if name == "settings.yaml" else run_dir) / name
    _refuse_reading(monkeypatch, locked)
    argv = (["predict", str(run_dir), "--input", "1 2"] if name == "config.yaml" else
            ["train", "reverse", "--config", str(locked), "--out", str(tmp_path / "r")])
    assert main(argv) == 2
    what = "predict" if name == "config.yaml" else "--config"
    assert capsys.readouterr().err == (f"attnlab: error: {what}: {locked}: cannot read the "
                                       f"file (Permission denied)\n")
    assert not (tmp_path / "r").exists()


def test_a_json_file_it_may_not_read_is_a_usage_error_naming_it(tmp_path, monkeypatch):
    """A run's tokenizer.json (read by read_json) without read permission: the same words."""
    locked = tmp_path / "tokenizer.json"
    locked.write_text("{}")
    _refuse_reading(monkeypatch, locked)
    with pytest.raises(UsageError) as raised:
        read_json(locked, what="a JSON tokenizer file")
    assert str(raised.value) == f"{locked}: cannot read the file (Permission denied)"


def test_weights_it_may_not_read_are_not_said_to_be_missing(run_dir, monkeypatch, capsys):
    """safetensors says "No such file or directory" of a model.safetensors that is there
    but not readable; the one line says why it cannot be read."""
    import builtins

    import safetensors.torch

    import attnlab.runs

    locked = run_dir / "model.safetensors"

    def refused(path, *args, **kwargs):
        if str(path) == str(locked):
            raise PermissionError(13, "Permission denied", str(path))
        return builtins.open(path, *args, **kwargs)

    monkeypatch.setattr(attnlab.runs, "open", refused, raising=False)

    def as_safetensors_says(model, filename, *args, **kwargs):
        if str(filename) == str(locked):
            raise OSError(f"No such file or directory: {filename}")
        raise AssertionError("read only the locked file")

    monkeypatch.setattr(safetensors.torch, "load_model", as_safetensors_says)
    assert main(["predict", str(run_dir), "--input", "1 2"]) == 2
    assert capsys.readouterr().err == (f"attnlab: error: {locked}: cannot read the file "
                                       f"(Permission denied)\n")


@pytest.mark.parametrize("argv, flag", [
    (["prepare", "-", "--out", "OUT"], ""),
    (["train", "lm", "--data", "-", "--out", "OUT"], "--data: "),
    (["train", "classify", "--data", "-", "--out", "OUT"], "--data: "),
])
def test_a_dash_for_a_file_is_not_said_to_be_a_missing_file_alone(argv, flag, capsys, tmp_path):
    """`cat corpus.txt | attnlab prepare - --out c`: '-' reads standard input for --input-file
    only; elsewhere "file not found: -" left a user of Unix tools asking why."""
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    assert _fails(argv, capsys) == (f"attnlab: error: {flag}file not found: - ('-' is not "
                                    f"standard input here: name the file)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["train", "lm", "--data", "FIFO", "--out", "OUT"],
                                  ["evaluate", "RUN", "--data", "FIFO"]])
def test_a_pipe_for_a_file_is_said_to_be_a_pipe_not_a_missing_file(argv, run_dir, tmp_path,
                                                                   capsys):
    """`attnlab train lm --data <(zcat corpus.gz)`: the pipe is there, but is no file these
    read; "file not found: /dev/fd/63" sent the user looking for a file that existed."""
    import os

    here = tmp_path / "here"
    here.mkdir()
    fifo = here / "fifo"
    os.mkfifo(fifo)  # no writer: a command that opened it would wait forever
    names = {"FIFO": str(fifo), "OUT": str(here / "out"), "RUN": str(run_dir)}
    assert _fails([names.get(a, a) for a in argv], capsys) == (
        f"attnlab: error: --data: {fifo} is not a regular file (a pipe, as <(...) gives, or a "
        f"device); write its text to a file and give that")
    assert sorted(p.name for p in here.iterdir()) == ["fifo"]


def test_prepare_of_a_pipe_is_said_to_be_a_pipe_before_out_is_made(tmp_path, capsys):
    """`attnlab prepare <(zcat corpus.gz) --out c`: prepare reads its files twice (counted,
    then encoded), a pipe's second read is empty, and the run said the file "changed while it
    was being prepared". A device (no writer needed, so the test cannot hang) is refused as the
    pipe is, before --out is made."""
    out = tmp_path / "out"
    assert _fails(["prepare", "/dev/null", "--out", str(out)], capsys) == (
        "attnlab: error: /dev/null is not a regular file (a pipe, as <(...) gives, or a "
        "device); write its text to a file and give that")
    assert not out.exists()


@pytest.mark.parametrize("argv, named", [
    (["predict", "RUN", "--input", " "], "--input is empty"),
    (["plot", "attention", "RUN", "--input", "\t"], "--input is empty"),
    (["view", "RUN", "--input", "  "], "--input is empty"),
    (["translate", "RUN", " "], "TEXT number 1 is empty"),
])
def test_a_blank_input_is_refused_before_the_run_is_read(argv, named, capsys, tmp_path):
    """One rule for the commands that run a model on one input of words or elements given on
    the command line: blank is refused naming the flag (the run directory is not even looked
    at: RUN is absent). A language model's prompt may be a space (a character model's token)."""
    _fails([str(tmp_path / a) if a == "RUN" else a for a in argv], capsys, named)


@pytest.mark.parametrize("argv, line", [
    (["predict", "RUN", "--input-file", ""], "--input-file is empty; name a file"),
    (["translate", "RUN", "--input-file", " "], "--input-file is empty; name a file"),
    (["evaluate", "RUN", "--data", ""], "--data is empty; name a file"),
    (["evaluate", "RUN", "--data", "x", "--by-length", "--out", " "],
     "--out is empty; name a file"),
    (["predict", " ", "--input", "1 2"], "predict: DIR is empty; name a directory"),
    (["evaluate", ""], "evaluate: DIR is empty; name a directory"),
    (["generate", "", "--prompt", "a"],
     "generate: DIR is empty; name a directory or .gguf file"),
    (["prepare", "", "--out", "OUT"], "prepare: FILE is empty; name a file"),
    (["train", "lm", "--data", " ", "--out", "OUT"], "--data is empty; name a file or directory"),
    (["train", "reverse", "--config", "", "--out", "OUT"], "--config is empty; name a file"),
])
def test_an_empty_or_blank_path_is_refused_naming_its_flag(argv, line, capsys, tmp_path,
                                                           monkeypatch):
    """One rule (``attnlab.paths.PATH_METAVARS``) for every argument that names a path: ""
    was read as the current directory ("--input-file : is a directory"), " " as a file named
    " " ("run directory not found:  "). Nothing is read or written: RUN is a real run."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "RUN").mkdir()
    (tmp_path / "RUN" / "config.yaml").write_text("task: reverse\n")
    assert _fails(argv, capsys) == f"attnlab: error: {line}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["RUN"]


@pytest.mark.parametrize("argv, typed", [
    (["translate", "RUN", "--input", "four"], "--input four"),  # read as --input-file four
    (["generate", "RUN", "--prom", "a", "--prompt", "b"], "--prom a"),  # the prompt was b alone
    (["train", "reverse", "--max-step", "2", "--out", "OUT"], "--max-step 2"),
])
def test_a_flag_spelled_short_of_its_name_is_refused_not_read_as_another(argv, typed, tmp_path,
                                                                          capsys):
    argv = [str(tmp_path / a) if a in ("RUN", "OUT") else a for a in argv]
    _fails(argv, capsys, f"unrecognized arguments: {typed}")
    assert not (tmp_path / "OUT").exists()


@pytest.mark.parametrize("argv, said", [
    (["trian"], "invalid choice: 'trian' (choose from 'train', "),
    (["train", "revrse"], "train: argument TASK: invalid choice: 'revrse'"),
    (["plot", "pee"], "plot: argument FIGURE: invalid choice: 'pee'"),
    (["train", "reverse", "--max-step", "2", "--out", "OUT"],
     "train reverse: unrecognized arguments: --max-step 2"),
    (["predict", "RUN", "--inpt", "3 1"], "predict: unrecognized arguments: --inpt 3 1"),
    (["train", "lm", "--model_dim", "8", "--out", "OUT"], "train lm: unrecognized arguments"),
    (["train", "sort", "-seed", "2", "--out", "OUT"], "train sort: unrecognized arguments"),
    # not "the following arguments are required: --signal", as if it had not been typed
    (["data", "jets", "--singal", "3"], "data jets: unrecognized arguments: --singal"),
])
def test_a_misspelt_command_or_flag_is_answered_with_the_one_meant(argv, said, tmp_path, capsys):
    """The one line names the command whose flag it is not and the closest name it has."""
    meant = {"trian": "'train'", "revrse": "'reverse'", "pee": "'pe'", "--max-step": "--max-steps",
             "--inpt": "--input", "--model_dim": "--model-dim", "-seed": "--seed",
             "--singal": "--signal"}
    typo = next(meant[a] for a in argv if a in meant)
    argv = [str(tmp_path / a) if a in ("RUN", "OUT") else a for a in argv]
    line = _fails(argv, capsys, said)
    assert line.endswith(f"; did you mean {typo}?"), line
    assert not (tmp_path / "OUT").exists()


@pytest.mark.parametrize("argv", [["predict", "-r1", "--input", "1 2"], ["evaluate", "-r1"],
                                  ["export", "-r1", "--hf", "out"]])
def test_a_path_that_starts_with_a_dash_is_told_how_to_write_it(argv, tmp_path, monkeypatch,
                                                                 capsys):
    """`attnlab predict -r1` (a run directory named -r1, as a shell glob or script may pass
    it): the word is read as a flag, and the refusal says how to give the path, as `rm ./-f`."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-r1").mkdir()
    line = _fails(argv, capsys, "unrecognized arguments: -r1")
    assert line.endswith("; -r1 is read as a flag: write ./-r1 for the path")


@pytest.mark.parametrize("argv, hint", [
    (["train", "reverse", "--out", "-r1"], "; a value that starts with '-' is written --out=-r1"),
    (["plot", "pe", "--out", "-pe.png"], "; a value that starts with '-' is written "
                                         "--out=-pe.png"),
    (["train", "reverse", "--out", "--max-steps", "3"], ""),  # a forgotten value: no hint
    (["train", "reverse", "--out", "-h"], ""),
])
def test_a_value_that_starts_with_a_dash_is_told_how_to_write_it(argv, hint, capsys):
    """`--out -r1`: argparse reads -r1 as a flag and says only that --out "expected one
    argument"; the refusal says how to give such a value."""
    line = _fails(argv, capsys, "expected one argument")
    assert line.endswith(f"expected one argument{hint}")


def test_a_flag_of_other_words_is_not_offered_as_the_one_meant(capsys):
    """translate's text is an argument: its --input-file is another flag, not a correction of
    --input (argparse's abbreviations once read one as the other)."""
    line = _fails(["translate", "RUN", "--input", "four"], capsys, "translate: unrecognized")
    assert "did you mean" not in line
    line = _fails(["train", "reverse", "--lerning-rate", "3"], capsys, "--lerning-rate 3")
    assert "did you mean" not in line, line


def test_a_misspelt_choice_is_answered_whatever_the_python_words_argparse_s_message(
        monkeypatch, capsys):
    """Python 3.12 and 3.13 print argparse's choices unquoted (3.11 quotes them): the one meant
    is found among the choices, not read back from the message."""
    import argparse

    def unquoted(self, action, value):
        if action.choices is not None and value not in action.choices:
            raise argparse.ArgumentError(action, f"invalid choice: '{value}' (choose from "
                                                 f"{', '.join(map(str, action.choices))})")

    monkeypatch.setattr(argparse.ArgumentParser, "_check_value", unquoted)
    line = _fails(["train", "revrse"], capsys, "invalid choice: 'revrse'")
    assert line.endswith("; did you mean 'reverse'?"), line


def test_a_text_value_that_starts_with_a_dash_is_not_taken_for_a_misspelt_flag(capsys):
    """`predict --input "-a b"` without its run directory is told the directory is missing:
    argparse reads a word with a space as a value, not as a flag it does not know."""
    _fails(["predict", "--input", "-a b"], capsys, "required", "DIR")


def test_a_full_disk_under_prepare_names_its_out_not_standard_output(tmp_path, capsys):
    """`(ulimit -f 200; attnlab prepare big.txt --out prep)`: the token file's write fails
    with an OSError that names no file, and the one line blamed standard output ("cannot write
    to standard output: File too large"). It names --out now, and leaves no directory."""
    import random
    import resource

    random.seed(0)
    words = ["alpha", "beta", "gamma", "delta"]
    (tmp_path / "c.txt").write_text("\n".join(" ".join(random.choice(words) for _ in range(12))
                                              for _ in range(3000)), encoding="utf-8")
    out = tmp_path / "prep"
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, hard))  # Python ignores SIGXFSZ
    try:
        code = main(["prepare", str(tmp_path / "c.txt"), "--out", str(out), "--tokenizer",
                     "char"])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert code == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"attnlab: cannot write to {out}: File too large")
    assert not out.exists()


def test_a_refused_out_comes_before_the_notes_on_the_data(tmp_path, capsys):
    """`train classify --data d.csv --out used`: the data was read and its notes printed (a
    row of the test split that training has too), then --out was refused: the user read a
    warning about a run that never started above its one-line error."""
    rows = ["text,label", *["good film,pos"] * 20,
            *[f"word{i} thing{i % 5},{'pos' if i % 2 else 'neg'}" for i in range(60)]]
    (tmp_path / "d.csv").write_text("\n".join(rows) + "\n")
    used = tmp_path / "used"
    used.mkdir()
    (used / "mine.txt").write_text("kept")
    argv = ["train", "classify", "--data", str(tmp_path / "d.csv"), "--out", str(used),
            "--max-steps", "1"]
    assert _fails(argv, capsys) == (f"attnlab: error: --out {used} already holds files; pass "
                                    f"--resume to continue that run, or choose another --out")
    assert sorted(p.name for p in used.iterdir()) == ["mine.txt"]
