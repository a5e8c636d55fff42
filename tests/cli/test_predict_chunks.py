"""`predict --input-file` of a long file predicts it a chunk of inputs at a time and writes each
chunk's answers before the next is predicted: the answers held in memory grow with the chunk,
not the file (a million lines held 1.7 GB before any answer was written), `| head -1` stops after
the first chunk, a long file reports its progress on stderr, and a stop half way says what the
output holds. The chunk is made small here (3) so that a file of 8 lines has three."""
from __future__ import annotations

import pytest

import attnlab.commands.predict as predict
import attnlab.tasks.sequence.runtime as reverse_runtime
from attnlab.cli import main

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


def test_a_bad_input_of_a_later_chunk_is_named_with_what_was_written(reverse_run, tmp_path,
                                                                     monkeypatch, capsys):
    path = tmp_path / "inputs.txt"
    path.write_text("\n".join([*LINES[:4], "3 x 1", *LINES[4:]]) + "\n")
    monkeypatch.setattr(predict, "CHUNK", 3)
    code = main(["predict", str(reverse_run), "--input-file", str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and len(out.splitlines()) == 3
    assert err.splitlines()[-1] == (
        f"attnlab: error: --input-file {path} line 5: token 'x' is not a symbol of this model "
        f"(integers 0..9); the output holds the answers to the first 3 of 9 inputs, each line "
        f"whole, and none of the 6 after them")


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
