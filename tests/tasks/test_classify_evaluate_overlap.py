"""``attnlab evaluate RUN --data FILE`` of a classify run names the rows of FILE whose text the
run trained on, in the warning train classify gives a --test file that shares texts with the
training split (before, it scored them without a word: evaluating on the training file itself
gave a score of rows the model learned, as if of new ones)."""
import pytest

from attnlab.cli import main
from attnlab.runs import read_yaml
from attnlab.tasks.classify import TASKS
from attnlab.tasks.classify.data import load_splits

from .test_classify import write_csv
from .test_classify_cut_warning import TINY

TASK = TASKS["classify"]


@pytest.mark.slow  # trains a run
def test_evaluate_data_names_the_rows_the_run_trained_on(tmp_path, capsys):
    data = write_csv(tmp_path / "reviews.csv", n=60)
    out = tmp_path / "run"
    assert main(["train", "classify", "--data", str(data), "--out", str(out), *TINY]) == 0
    train = {t for t, _ in load_splits(TASK.typed(read_yaml(out / "config.yaml"), out))["train"]}
    rows = data.read_text().splitlines()
    shared = [i for i, row in enumerate(rows[1:], start=2) if row.split(",")[1] in train]
    capsys.readouterr()
    assert main(["evaluate", str(out), "--data", str(data)]) == 0
    assert (f"warning: --data {data}: {len(shared)} of its 60 rows have an input that a "
            f"training row has too (first: line {shared[0]}), so its scores are partly of "
            f"inputs the model trained on") in capsys.readouterr().err.splitlines()

    fresh = tmp_path / "fresh.csv"  # texts of words the run knows, in no training row
    fresh.write_text("id,review,sentiment\n0,good good good good good good,pos\n"
                     "1,bad bad bad bad bad bad,neg\n")
    assert main(["evaluate", str(out), "--data", str(fresh)]) == 0
    assert "training row" not in capsys.readouterr().err
