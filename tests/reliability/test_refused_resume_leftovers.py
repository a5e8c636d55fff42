"""A ``--resume`` refused once its checkpoint was read (a --monitor it did not watch) changed
the run before saying no: it removed what a killed save had left (``note: --resume: removed
...``), and wrote a data file's new path into config.yaml, though nothing resumed. Every
refusal comes first now; the accepted resume removes and records, as before."""
import shutil

import pytest

from attnlab.cli import main
from attnlab.training.checkpoint import partial_checkpoint

from .conftest import tiny_args, write_reviews
from .test_killed_resume_refused import _contents

pytestmark = pytest.mark.slow  # trains a run

FLAGS = ["--max-steps", "20", "--keep-best", "--val-every", "5", "--checkpoint-every", "5"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished classify run with --keep-best (its checkpoint watches val_loss), trained on
    a file that each test moves."""
    tmp = tmp_path_factory.mktemp("refused_leftovers")
    reviews = write_reviews(tmp / "reviews.csv")
    run = tmp / "run"
    assert main(["train", "classify", "--out", str(run), "--max-steps", "10", "--keep-best",
                 "--val-every", "5", "--checkpoint-every", "5",
                 *tiny_args("classify", {"classify": reviews})]) == 0
    return run, reviews


def _killed_and_moved(trained, tmp_path):
    """A copy of the run with what a save and a write killed midway leave, and its data file
    at a new path: (run, the leftovers, the moved file)."""
    run = tmp_path / "run"
    shutil.copytree(trained[0], run)
    left = [partial_checkpoint(run), run / ".model.safetensors.0123abcd.tmp"]
    for path in left:
        path.write_bytes(b"half written")
    moved = tmp_path / "moved.csv"
    shutil.copy(trained[1], moved)
    return run, left, moved


def test_a_refused_resume_removes_no_leftover_and_records_no_moved_file(trained, tmp_path,
                                                                      capsys):
    run, left, moved = _killed_and_moved(trained, tmp_path)
    config = run / "config.yaml"
    config.write_text(config.read_text().replace("monitor: val_loss", "monitor: val_acc"))
    before = _contents(run)
    capsys.readouterr()
    assert main(["train", "classify", "--out", str(run), "--resume", *FLAGS,
                 *tiny_args("classify", {"classify": moved})]) == 2
    err = capsys.readouterr().err
    assert "watched val_loss, this run --monitor val_acc" in err, err
    assert "removed" not in err, err
    assert _contents(run) == before  # the leftovers there, config.yaml naming the old path
    assert str(trained[1]) in config.read_text() and str(moved) not in config.read_text()


def test_an_accepted_resume_removes_the_leftovers_and_records_the_moved_file(trained, tmp_path,
                                                                            capsys):
    run, left, moved = _killed_and_moved(trained, tmp_path)
    capsys.readouterr()
    assert main(["train", "classify", "--out", str(run), "--resume", *FLAGS,
                 *tiny_args("classify", {"classify": moved})]) == 0
    err = capsys.readouterr().err.splitlines()
    assert (f"note: --resume: removed {left[0]} (12 bytes), the checkpoint a stopped save was "
            f"writing") in err, err
    assert (f"note: --resume: removed {left[1]} (12 bytes), left by a write that was "
            f"stopped") in err, err
    assert not any(path.exists() for path in left)
    assert f"data: {moved}" in (run / "config.yaml").read_text()
