"""`evaluate DIR --data FILE` of a reverse, copy or sort run reads its file of sequences with
predict --input-file's reader (`InputLines`) and scores it a chunk of lines at a time: what it
holds grows with the chunk, not the file (10^5 lines were all held, with their tensors), every
line is checked before any is scored, and the scores are those of all the lines at once, every
key to the last digit. A file appended to or changed while it is read is named. The chunk is
made small here (7 lines) so that a file of 61 sequences has nine."""
from __future__ import annotations

import gzip
import io
import json
import random

import pytest
import torch

import attnlab.tasks.sequence.runtime as sequence_runtime
from attnlab.data import make_labels, pad_to_length
from attnlab.errors import UsageError
from attnlab.loading import check_run_dir
from attnlab.models.predictor import ElementPredictor
from attnlab.tasks import get_task
from attnlab.tasks.input_lines import InputLines

from .test_evaluate_streams import _evaluate

ROWS = 61


def _lines():
    """61 sequences of 1 to 16 symbols 0..9 (the reverse run's), with blank lines between
    some (passed over) and a Windows line end on one (a "\\r" is white space)."""
    rng = random.Random(0)
    rows = [[rng.randrange(10) for _ in range(rng.randint(1, 16))] for _ in range(ROWS)]
    text = ""
    for i, row in enumerate(rows):
        text += " ".join(map(str, row)) + ("\r\n" if i == 30 else "\n")
        if i % 9 == 4:
            text += "\n  \n"
    return rows, "\ufeff" + text  # Notepad's byte-order mark: no part of the first symbol


@pytest.fixture
def data(tmp_path):
    rows, text = _lines()
    path = tmp_path / "held.txt"
    path.write_bytes(text.encode("utf-8"))
    return path, rows


@pytest.fixture
def scored(monkeypatch):
    """How many rows each call of the model was given."""
    real, sizes = ElementPredictor.predict, []

    def counted(self, x, **kw):
        sizes.append(len(x))
        return real(self, x, **kw)

    monkeypatch.setattr(ElementPredictor, "predict", counted)
    return sizes


def _at_once(run, rows):
    """The metrics of all ``rows`` in one call of the model, made here from the run's weights:
    each row padded as predict pads it, its labels the task's."""
    import attnlab

    model = attnlab.load(run)
    padded = [pad_to_length("reverse", r, 16, 10) for r in rows]
    inputs = torch.tensor([p for p, _ in padded])  # (N, T)
    labels = torch.zeros_like(inputs)
    for i, r in enumerate(rows):
        labels[i, : len(r)] = make_labels("reverse", torch.tensor([r]))[0]
    lengths = torch.tensor([len(r) for r in rows])
    return sequence_runtime.sequence_metrics(model, inputs, labels, lengths)


@pytest.mark.slow
def test_a_long_file_is_scored_a_chunk_at_a_time_with_the_scores_of_all_its_lines(
        reverse_run, data, scored, monkeypatch, capsys):
    path, rows = data
    whole, _ = _evaluate(capsys, reverse_run, path)  # one chunk
    monkeypatch.setattr(sequence_runtime, "CHUNK_ROWS", 7, raising=False)  # (none before)
    scored.clear()
    chunked, err = _evaluate(capsys, reverse_run, path)
    assert max(scored) <= 7 and sum(scored) == ROWS  # never more than a chunk at once
    assert f"evaluate: {ROWS} of {ROWS} sequences" in err  # progress of a long file
    expected = _at_once(reverse_run, rows)
    assert 0 < expected["test_token_accuracy"] < 1  # the scores are not trivial
    # every key, to the last digit the command prints (the counts are summed, not averaged)
    assert chunked == whole == json.loads(json.dumps(
        {k: float(f"{v:.6g}") for k, v in expected.items()}))
    run_dir, cfg = check_run_dir(reverse_run, command="evaluate")
    task = get_task("reverse")
    exact = task.runtime().evaluate(task, run_dir, cfg, str(path))  # exact, not printed
    assert exact == expected


@pytest.mark.slow
def test_a_bad_line_of_a_later_chunk_is_refused_before_any_is_scored(
        reverse_run, data, scored, monkeypatch, capsys):
    path, rows = data
    with open(path, "a") as f:
        f.write("1 2 x 3\n")
    monkeypatch.setattr(sequence_runtime, "CHUNK_ROWS", 7, raising=False)
    out, err = _evaluate(capsys, reverse_run, path, code=2)
    assert out == "" and scored == []
    lines = path.read_text(encoding="utf-8-sig").split("\n")
    assert len(err.splitlines()) == 1
    assert err.startswith(f"attnlab: error: --data {path} line {len(lines) - 1}:")


@pytest.mark.slow
@pytest.mark.parametrize("change", ["append", "rewrite"])
def test_a_file_changed_while_it_is_scored_is_refused(reverse_run, data, monkeypatch, capsys,
                                                       change):
    """Lines appended once the first chunk is scored (the first reading counted none of them),
    or a later line rewritten in place (the same size): either is named, not scored as the
    file it no longer is."""
    path, rows = data
    monkeypatch.setattr(sequence_runtime, "CHUNK_ROWS", 7, raising=False)
    real = ElementPredictor.predict

    def predict_then_change(self, x, **kw):
        if not getattr(predict_then_change, "done", False):
            predict_then_change.done = True
            if change == "append":
                with open(path, "a") as f:
                    f.write("1 2 3\n")
            else:
                data = path.read_bytes()
                at = data.rindex(b"\n", 0, len(data) - 1) + 1  # the last line's first symbol
                path.write_bytes(data[:at] + (b"9" if data[at:at + 1] != b"9" else b"8")
                                 + data[at + 1:])
        return real(self, x, **kw)

    monkeypatch.setattr(ElementPredictor, "predict", predict_then_change)
    out, err = _evaluate(capsys, reverse_run, path, code=2)
    assert out == ""
    assert err.splitlines()[-1] == (f"attnlab: error: --data {path} changed while evaluate "
                                    f"read it (its SHA-256 differs between its readings); "
                                    f"evaluate it again once it is written")


def test_lines_appended_after_the_first_reading_are_named(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"1 2\n3 4\n")
    with open(path, "rb") as source:
        lines = InputLines(source, f"--data {path}", str(path), command="evaluate",
                           what="--data", chunk=1)
        lines.same_end()  # as it was: nothing to say
        with open(path, "ab") as f:
            f.write(b"5 6\n")
        assert list(lines) == ["1 2", "3 4"]  # the chunks read again are as they were
        with pytest.raises(UsageError, match=f"--data {path} changed while evaluate read it"):
            lines.same_end()


def test_blank_lines_are_kept_for_the_caller_to_pass_over():
    text = b"1 2\n\n \t\n3\n"
    assert InputLines(io.BytesIO(text), "--data f", "f", blanks=True) == ["1 2", "", " \t", "3"]
    with pytest.raises(UsageError, match="line 2 is empty"):
        InputLines(io.BytesIO(text), "--input-file f", "f")
    for empty in (b"", b"\xef\xbb\xbf"):  # no line: the caller says it, as of blank lines
        assert list(InputLines(io.BytesIO(empty), "--data f", "f", blanks=True)) == []


@pytest.mark.parametrize("flag", ["--data", "--input-file"])
def test_a_utf16_file_is_named_so(flag):
    """Excel's and Notepad's "Unicode text": said as every data reader says it (evaluate --data
    of sequences said so when it read the file whole), not as a line that is not UTF-8."""
    text = "1 2\n3 4\n".encode("utf-16")
    with pytest.raises(UsageError) as refused:
        InputLines(io.BytesIO(text), f"{flag} u.txt", "u.txt")
    assert str(refused.value) == (f"{flag} u.txt: the file is UTF-16 (it starts with a UTF-16 "
                                  f"byte-order mark); save it as UTF-8")


@pytest.mark.slow
@pytest.mark.parametrize("content, said", [
    (b"3 1\n\n2 7\n5 \xff 6\n",
     " line 4: not valid UTF-8 (byte 0xff at column 3); save the file as UTF-8"),
    (gzip.compress(b"3 1\n2 7\n", mtime=0), " is gzip-compressed, not text; decompress it first "
                                             "(gunzip -k FILE) and give the text file"),
    (b"", " holds no sequences (one per line, tokens separated by spaces)"),
    (b"\xef\xbb\xbf", " holds no sequences (one per line, tokens separated by spaces)"),
    (b"\n \r\n\t\n", " holds no sequences (one per line, tokens separated by spaces)"),
], ids=["not-utf8", "gzip", "empty", "bom-only", "blank-lines"])
def test_a_file_that_is_no_text_or_holds_no_sequence_is_said_as_every_reader_says_it(
        reverse_run, tmp_path, capsys, content, said):
    """The byte and its column of a line that is not UTF-8, and a gzip file, as every data
    reader names them (they were 'not UTF-8 text'); an empty file, a byte-order mark alone or
    blank lines alone in one wording (an empty one was 'no inputs')."""
    path = tmp_path / "seqs.txt"
    path.write_bytes(content)
    out, err = _evaluate(capsys, reverse_run, path, code=2)
    assert out == ""
    assert err == f"attnlab: error: --data {path}{said}\n"
