"""``evaluate --data FILE`` where FILE is the run's training file, moved since training: it was
scored without a word (the task compares with the training split re-drawn from the recorded
path, and there is nothing there), though its rows include every training row."""
import pytest

from attnlab.cli import main
from attnlab.data.overlap import moved_training_file
from attnlab.runs import file_digest


def _rows(n: int = 60) -> str:
    words = {"pos": ["great", "lovely", "superb"], "neg": ["dull", "awful", "boring"]}
    lines = ["text,label"]
    for i in range(n):
        label = "pos" if i % 2 else "neg"
        lines.append(f"the film {i} was {words[label][i % 3]},{label}")
    return "\n".join(lines) + "\n"


def test_the_bytes_of_a_moved_training_file_are_recognised(tmp_path):
    trained = tmp_path / "train.csv"
    trained.write_text(_rows())
    recorded = file_digest(trained)
    moved = tmp_path / "elsewhere.csv"
    trained.rename(moved)
    note = moved_training_file(moved, trained, recorded)
    assert note is not None and note.startswith(f"warning: --data {moved} holds the bytes")
    assert str(trained) in note and "partly of inputs the model trained on" in note
    # the file back in place: the task compares the rows itself, and this says nothing
    moved.rename(trained)
    assert moved_training_file(trained, trained, recorded) is None
    # another file: nothing to say
    other = tmp_path / "other.csv"
    other.write_text(_rows(10))
    assert moved_training_file(other, tmp_path / "gone.csv", recorded) is None


@pytest.mark.slow
def test_evaluate_warns_about_the_moved_training_file(tmp_path, capsys):
    data = tmp_path / "train.csv"
    data.write_text(_rows())
    run = tmp_path / "run"
    assert main(["train", "classify", "--data", str(data), "--out", str(run), "--max-steps",
                 "2", "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
                 "--dim-feedforward", "16", "--warmup", "1"]) == 0
    capsys.readouterr()
    # in place: one warning, the task's, with its count of rows
    assert main(["evaluate", str(run), "--data", str(data)]) == 0
    warnings = [w for w in capsys.readouterr().err.splitlines() if w.startswith("warning: --data")]
    assert len(warnings) == 1 and "rows have an input that a training row has" in warnings[0]
    moved = tmp_path / "moved" / "train.csv"
    moved.parent.mkdir()
    data.rename(moved)
    assert main(["evaluate", str(run), "--data", str(moved)]) == 0
    err = capsys.readouterr().err
    assert f"warning: --data {moved} holds the bytes of the file this run trained on" in err
