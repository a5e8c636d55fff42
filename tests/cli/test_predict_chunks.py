"""`predict --input-file` of a long file predicts it a chunk of inputs at a time and writes each
chunk's answers before the next is predicted: the answers held in memory grow with the chunk,
not the file, `| head -1` stops after the first chunk, a long file reports its progress on
stderr, and a stop half way says what the output holds. The model is loaded once, every input
is read before it is, and the notes are said once, of the whole file. The chunk is made small here (3) so that a file of 8 lines has three."""
from __future__ import annotations

import pytest
import safetensors.torch
import yaml

import attnlab.commands.predict as predict
import attnlab.tasks.sequence.runtime as reverse_runtime
from attnlab.cli import main

from ..tasks.test_tag import tag_run  # noqa: F401
from .test_predict_json_numbers import SETS, _with_head_scaled, anomaly_run, classify_run  # noqa: F401

pytestmark = pytest.mark.slow

LINES = ["3 1 4 1 5", "2 7", "9 9 9 0 1", "5", "1 2 3", "8 6", "4 4 2", "7"]


@pytest.fixture
def inputs(tmp_path):
    path = tmp_path / "inputs.txt"
    path.write_text("\n".join(LINES) + "\n")
    return path


@pytest.fixture
def calls(monkeypatch, capsys):
    """predict_many of the reversal task, wrapped: ``calls`` lists, for each call, how many
    inputs it was given and the lines already on standard output (read from capsys, so the
    test's own ``out`` is what came after the last call); ``calls.stop_at`` (a call number) and
    ``calls.fault`` (an exception) make that call raise it."""
    real = reverse_runtime.predict_many

    class Calls(list):
        stop_at, fault, written = None, None, []

        def __call__(self, task, run_dir, cfg, texts, labels, **options):
            self.written = self.written + capsys.readouterr().out.splitlines()
            self.append((len(texts), len(self.written)))
            if len(self) == self.stop_at:
                raise self.fault
            return real(task, run_dir, cfg, texts, labels, **options)

    recorded = Calls()
    monkeypatch.setattr(reverse_runtime, "predict_many", recorded)
    return recorded


@pytest.fixture
def weight_reads(monkeypatch):
    """The weights files read into a model (``safetensors.torch.load_model``), in order."""
    real, reads = safetensors.torch.load_model, []

    def counted(model, path, *args, **kwargs):
        reads.append(path)
        return real(model, path, *args, **kwargs)

    monkeypatch.setattr(safetensors.torch, "load_model", counted)
    return reads


def whole(run, inputs, capsys):
    """The answers with one chunk of every input, as predict gave them before."""
    code = main(["predict", str(run), "--input-file", str(inputs)])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out.splitlines()


def test_each_chunk_is_written_before_the_next_is_predicted(reverse_run, inputs, calls,
                                                            monkeypatch, capsys):
    expected = whole(reverse_run, inputs, capsys)
    calls.clear()
    calls.written = []
    monkeypatch.setattr(predict, "CHUNK", 3)
    code = main(["predict", str(reverse_run), "--input-file", str(inputs)])
    out, err = capsys.readouterr()
    assert code == 0, err
    # three calls of 3, 3 and 2 inputs, each after the answers before it were written
    assert calls == [(3, 0), (3, 3), (2, 6)]
    assert calls.written + out.splitlines() == expected  # the same answers, in order
    assert "predict: 8 of 8 inputs" in err  # progress of a file of more than one chunk


def test_a_stop_half_way_says_what_the_output_holds(reverse_run, inputs, calls, monkeypatch,
                                                    capsys):
    expected = whole(reverse_run, inputs, capsys)
    calls.clear()
    calls.written = []
    monkeypatch.setattr(predict, "CHUNK", 3)
    calls.stop_at, calls.fault = 3, KeyboardInterrupt()  # Ctrl-C while the third chunk runs
    code = main(["predict", str(reverse_run), "--input-file", str(inputs)])
    out, err = capsys.readouterr()
    assert code == 130
    assert calls.written + out.splitlines() == expected[:6]  # whole lines, no later answer
    assert err.splitlines()[-1] == ("attnlab: interrupted; the output holds the answers to the "
                                    "first 6 of 8 inputs, each line whole, and none of the 2 "
                                    "after them")


def test_a_bad_input_of_a_later_chunk_is_refused_before_any_answer(reverse_run, tmp_path,
                                                                   monkeypatch, capsys,
                                                                   weight_reads):
    path = tmp_path / "inputs.txt"
    path.write_text("\n".join([*LINES[:4], "3 x 1", *LINES[4:]]) + "\n")
    monkeypatch.setattr(predict, "CHUNK", 3)
    code = main(["predict", str(reverse_run), "--input-file", str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""  # no answer written, as when the file was one chunk
    assert weight_reads == []  # refused before the model was loaded
    assert err.splitlines() == [f"attnlab: error: --input-file {path} line 5: token 'x' is not "
                                f"a symbol of this model (integers 0..9)"]


def test_a_bad_set_of_a_later_chunk_is_refused_before_any_answer(anomaly_run, tmp_path,
                                                                 monkeypatch, capsys,
                                                                 weight_reads):
    path = tmp_path / "sets.txt"
    path.write_text("\n".join([*SETS, "1 2 5000", *SETS]) + "\n")
    monkeypatch.setattr(predict, "CHUNK", 3)
    capsys.readouterr()
    code = main(["predict", str(anomaly_run), "--input-file", str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and weight_reads == []
    assert err.splitlines() == [f"attnlab: error: --input-file {path} line 5: digit image "
                                f"index 5000 is outside [0, 1797)"]


def test_notes_are_said_once_of_the_whole_file(classify_run, tmp_path, monkeypatch, capsys):
    """A note of inputs in two chunks was said twice, each with its chunk's count: it is said
    once, naming the file's first such input and counting all of them."""
    run = _with_head_scaled(classify_run, tmp_path, float("nan"))
    texts = ["the film was great"] * 8
    texts[1] = texts[4] = texts[7] = "the zzzq film"  # in each of the three chunks
    texts[2] = texts[3] = "the " + " ".join(["film"] * 5000)  # past --max-len, in two chunks
    path = tmp_path / "inputs.txt"
    path.write_text("\n".join(texts) + "\n")
    monkeypatch.setattr(predict, "CHUNK", 3)
    capsys.readouterr()
    code = main(["predict", str(run), "--input-file", str(path)])
    out, err = capsys.readouterr()
    assert code == 0 and out.splitlines() == ["nan"] * 8
    notes = [line for line in err.splitlines() if line.startswith(("note:", "warning:"))]
    assert len(notes) == 3, err
    assert notes[0].startswith(f"note: --input-file {path} line 2 holds ")
    assert notes[0].endswith("'zzzq' (and 2 more inputs)")
    assert notes[1].startswith("warning: 2 of the 8 inputs are longer than --max-len ")
    assert notes[2] == (f"warning: {run} gives NaN for 8 of 8 inputs (first: --input-file "
                        f"{path} line 1); their prediction is null")


def test_a_tag_runs_warning_is_said_once_of_the_whole_file(tag_run, tmp_path, monkeypatch,
                                                           capsys):
    long = " ".join(["Anna"] * 3000)  # words past --max-len, in two chunks
    path = tmp_path / "sentences.txt"
    path.write_text("\n".join(["Anna went home", long, "home", "Anna", long]) + "\n")
    monkeypatch.setattr(predict, "CHUNK", 3)
    capsys.readouterr()
    assert main(["predict", str(tag_run), "--input-file", str(path)]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines()
                if line.startswith("warning:")]
    m = yaml.safe_load((tag_run / "config.yaml").read_text())["max_len"]
    assert warnings == [f"warning: {2 * (3000 - m)} word(s) lie past --max-len {m} (words) "
                        f"and have no prediction: they are read as O"]  # both sentences'


def test_the_model_is_loaded_once(reverse_run, inputs, calls, monkeypatch, capsys,
                                  weight_reads):
    monkeypatch.setattr(predict, "CHUNK", 3)
    assert main(["predict", str(reverse_run), "--input-file", str(inputs)]) == 0
    assert len(calls) == 3 and len(weight_reads) == 1  # three chunks, one read of the weights


class ClosedPipe:
    """Standard output read by `head -1`: the first write is taken, then the pipe is closed."""

    def __init__(self):
        self.writes = 0

    def write(self, text):
        self.writes += 1
        if self.writes > 1:
            raise BrokenPipeError(32, "Broken pipe")
        return len(text)

    def flush(self):
        pass


def test_a_closed_pipe_stops_the_rest(reverse_run, inputs, calls, monkeypatch, capsys):
    monkeypatch.setattr(predict, "CHUNK", 3)
    monkeypatch.setattr("sys.stdout", ClosedPipe())
    code = main(["predict", str(reverse_run), "--input-file", str(inputs)])
    assert code == 1  # Python's status for a closed pipe, without a traceback
    assert [n for n, _ in calls] == [3, 3]  # the third chunk is not predicted
    assert "Traceback" not in capsys.readouterr().err


class StoppedPipe(ClosedPipe):
    """Standard output read by a program that stopped reading: the second write blocks on the
    full pipe, some of it out, and Ctrl-C comes while it waits."""

    def write(self, text):
        self.writes += 1
        if self.writes > 1:
            raise KeyboardInterrupt
        return len(text)


def test_a_stop_while_writing_says_the_last_line_may_be_cut(reverse_run, inputs, calls,
                                                            monkeypatch, capsys):
    monkeypatch.setattr(predict, "CHUNK", 3)
    monkeypatch.setattr("sys.stdout", StoppedPipe())
    code = main(["predict", str(reverse_run), "--input-file", str(inputs)])
    assert code == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        "attnlab: interrupted; the output holds the answers to the first 6 of 8 inputs at "
        "most, its last line maybe cut short: the answers to inputs 4 to 6 were being written")
