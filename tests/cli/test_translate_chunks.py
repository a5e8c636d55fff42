"""`translate --input-file` of a long file translates it a chunk of texts at a time, as
`predict` predicts one (``inputs.write_in_chunks``): each chunk's translations are written
before the next is translated, so the translations held grow with the chunk, not the file,
`| head -1` stops it after the first chunk, and a long file says how far it is on stderr. Every
line is read before the model is loaded (the translate runtime's ``input_reader``), so a line
of a later chunk that the model cannot read is refused with nothing written, by `translate` and
by `predict` on a translate run alike. The chunk is made small here (3) so that a file of 8
lines has three."""
from __future__ import annotations

import pytest

import attnlab.commands.predict as predict
import attnlab.commands.translate as translate
import attnlab.tasks.translate.runtime as translate_runtime
from attnlab.cli import main

from .test_predict_chunks import ClosedPipe, weight_reads  # noqa: F401
from .test_translate_cli import run_dir  # noqa: F401

pytestmark = pytest.mark.slow

LINES = ["12", "seven", "299", "forty-two", "3", "one hundred and five", "250", "8"]


@pytest.fixture
def inputs(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(LINES) + "\n")
    return path


@pytest.fixture
def calls(monkeypatch, capsys):
    """The translate runtime's ``translate``, wrapped: for each call, how many texts it was
    given and how many lines were already on standard output (``calls.written``)."""
    real = translate_runtime.translate

    class Calls(list):
        written: list[str] = []

        def __call__(self, task, run_dir, cfg, texts, **options):
            self.written = self.written + capsys.readouterr().out.splitlines()
            self.append((len(texts), len(self.written)))
            return real(task, run_dir, cfg, texts, **options)

    recorded = Calls()
    monkeypatch.setattr(translate_runtime, "translate", recorded)
    return recorded


def test_each_chunk_is_written_before_the_next_is_translated(run_dir, inputs, calls,
                                                             monkeypatch, capsys,
                                                             weight_reads):
    # each text alone: what the file's lines must give, in order
    alone = []
    for text in LINES:
        assert main(["translate", str(run_dir), text]) == 0
        alone += capsys.readouterr().out.splitlines()
    calls.clear()
    calls.written = []
    weight_reads.clear()
    monkeypatch.setattr(translate, "CHUNK", 3, raising=False)  # (none before chunks)
    code = main(["translate", str(run_dir), "--input-file", str(inputs)])
    out, err = capsys.readouterr()
    assert code == 0, err
    # three calls of 3, 3 and 2 texts, each after the translations before it were written
    assert calls == [(3, 0), (3, 3), (2, 6)]
    assert calls.written + out.splitlines() == alone  # one line per text, in order
    assert len(weight_reads) == 1  # the model read once for the three chunks
    assert "translate: 8 of 8 inputs" in err  # progress of a file of more than one chunk


def test_a_closed_pipe_stops_the_rest(run_dir, inputs, calls, monkeypatch, capsys):
    monkeypatch.setattr(translate, "CHUNK", 3, raising=False)  # (none before chunks)
    monkeypatch.setattr("sys.stdout", ClosedPipe())
    code = main(["translate", str(run_dir), "--input-file", str(inputs)])
    assert code == 1  # Python's status for a closed pipe, without a traceback
    assert [n for n, _ in calls] == [3, 3]  # the third chunk is not translated
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("command", ["translate", "predict"])
@pytest.mark.parametrize("bad, said", [
    ("1000000", "(1000000) is outside the numbers this run was trained on: 0 to 999,999 "
                "(max_number 1000000 in config.yaml)"),
    (" ".join(["seven"] * 70), "has 70 tokens; this model reads at most 64"),
])
def test_a_bad_line_of_a_later_chunk_is_refused_before_any_translation(
        run_dir, tmp_path, monkeypatch, capsys, weight_reads, command, bad, said):
    path = tmp_path / "texts.txt"
    path.write_text("\n".join([*LINES[:6], bad, *LINES[6:]]) + "\n")
    monkeypatch.setattr(translate, "CHUNK", 3, raising=False)  # (none before chunks)
    monkeypatch.setattr(predict, "CHUNK", 3)
    code = main([command, str(run_dir), "--input-file", str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""  # no translation written, as when the file was one chunk
    assert weight_reads == []  # refused before the model was loaded
    assert err.splitlines() == [f"attnlab: error: --input-file {path} line 7 {said}"]
