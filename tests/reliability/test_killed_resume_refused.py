"""A ``--resume`` that is refused leaves the run directory exactly as it found it: the same
files, byte for byte. A refusal found once the checkpoint was read (a --monitor it did not
watch) added an empty-handed ``logs/metrics.partN.csv`` at each try."""
import hashlib
import shutil

import pytest

from attnlab.cli import main

from .conftest import tiny_args, write_reviews

pytestmark = pytest.mark.slow  # trains a run


@pytest.fixture(scope="module")
def keep_best_run(tmp_path_factory):
    """A finished classify run with --keep-best (its checkpoint watches val_loss)."""
    tmp = tmp_path_factory.mktemp("refused")
    data = {"classify": write_reviews(tmp / "reviews.csv")}
    run = tmp / "run"
    assert main(["train", "classify", "--out", str(run), "--max-steps", "10", "--keep-best",
                 "--val-every", "5", "--checkpoint-every", "5",
                 *tiny_args("classify", data)]) == 0
    return run, data


def _contents(run):
    """Every path under ``run`` with its bytes' digest (None for a directory)."""
    return {str(p.relative_to(run)): (hashlib.sha256(p.read_bytes()).hexdigest()
                                      if p.is_file() else None)
            for p in sorted(run.rglob("*"))}


def _monitor_edited(run, data):
    text = (run / "config.yaml").read_text()
    (run / "config.yaml").write_text(text.replace("monitor: val_loss", "monitor: val_acc"))
    return [], "watched val_loss, this run --monitor val_acc"


def _data_changed(run, data):
    with open(data["classify"], "a") as f:
        f.write("the film was great again,pos\n")
    return [], "changed since this run started"


def _setting_changed(run, data):
    return ["--batch-size", "8"], "--batch-size 8 (the run has 16)"


def _log_row_broken(run, data):
    log = run / "logs" / "metrics.csv"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text(lines[0] + "x" + lines[1] + "".join(lines[2:]))
    return [], "is not a whole number"


@pytest.mark.parametrize("refusal", [_monitor_edited, _data_changed, _setting_changed,
                                     _log_row_broken])
def test_a_refused_resume_leaves_the_run_as_it_found_it(keep_best_run, refusal, tmp_path,
                                                        capsys):
    trained, data = keep_best_run
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    reviews = data["classify"].read_bytes()  # (where the run started on it: not moved)
    try:
        extra, message = refusal(run, data)
        before = _contents(run)
        capsys.readouterr()
        assert main(["train", "classify", "--out", str(run), "--resume", "--max-steps", "20",
                     "--keep-best", "--val-every", "5", "--checkpoint-every", "5",
                     *tiny_args("classify", data, *extra)]) == 2
    finally:
        data["classify"].write_bytes(reviews)
    err = capsys.readouterr().err
    assert message in err, err
    assert _contents(run) == before
