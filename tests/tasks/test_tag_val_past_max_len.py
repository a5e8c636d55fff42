"""``train tag`` and the words past ``--max-len``. Its validation scores count every word of
the validation split, those past ``--max-len`` too, as the test scores do: such a word has no
prediction and is read as ``O``.
Before, ``val_f1``, ``val_recall`` and ``val_acc`` (what ``--keep-best`` and ``--patience``
compare, and what ``metrics.json`` keeps) left those words out, so an entity past ``--max-len``
was neither found nor missed, and the validation scores were higher than ``attnlab evaluate``
gave on the same file with the same weights.

The check: a two-step run validated at its last step (whose weights it saves), its validation
file's sentences longer than ``--max-len 3`` with names past it; then ``attnlab evaluate RUN
--data VAL``, which scores the saved weights on every word. Both sides count the same entities
and words, so their ratios agree to float32 rounding (atol 1e-6; metrics.json keeps 6 digits).

Training says how many words of its split lie past ``--max-len``: their tags are not trained
(before, it said nothing, and only the test split's warning told of such words); and how many
of the validation split's, which its scores read as ``O``.
"""
import json
import random

import pytest

from attnlab.cli import main
from attnlab.loading import check_run_dir
from attnlab.tasks.tag.data import load_splits

from .test_tag_val_loss import TINY, sentences, write_conll


@pytest.mark.slow  # trains a run
def test_val_scores_count_the_words_past_max_len_as_evaluate_does(tmp_path, capsys):
    rng = random.Random(1)
    train = [s for n in range(2, 7) for s in sentences(rng, 8, n)]
    val = sentences(rng, 20, 8)  # 5 of 8 words past --max-len 3: many names among them
    val_file = write_conll(tmp_path / "val.conll", val)
    run = tmp_path / "run"
    assert main(["train", "tag", "--data", str(write_conll(tmp_path / "train.conll", train)),
                 "--val", str(val_file), "--max-len", "3", "--out", str(run), *TINY]) == 0
    # and training says so when it starts (it said nothing of the validation split's words)
    cut = sum(len(words) - 3 for words, _ in val)
    assert (f"warning: {cut} word(s) of the validation split lie past --max-len 3 (words) and "
            f"have no prediction: they are read as O") in capsys.readouterr().err.splitlines()
    assert main(["evaluate", str(run), "--data", str(val_file)]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["test_recall"] < 0.5  # most names lie past --max-len: missed

    saved = json.loads((run / "metrics.json").read_text())
    for name in ("f1", "precision", "recall"):
        assert saved[f"val_{name}"] == pytest.approx(evaluated[f"test_{name}"], abs=1e-6), name
    assert saved["val_acc"] == pytest.approx(evaluated["test_accuracy"], abs=1e-6)


@pytest.mark.slow  # trains a run
def test_training_names_its_words_past_max_len_whose_tags_are_not_trained(tmp_path, capsys):
    rng = random.Random(2)
    train = [s for n in range(2, 7) for s in sentences(rng, 8, n)]
    run = tmp_path / "run"
    assert main(["train", "tag", "--data", str(write_conll(tmp_path / "train.conll", train)),
                 "--max-len", "3", "--out", str(run), *TINY]) == 0
    err = capsys.readouterr().err
    _, cfg = check_run_dir(run)
    cut = sum(max(0, len(words) - 3) for words in load_splits(cfg)["train"].words)
    assert cut > 0
    assert (f"warning: {cut} word(s) of the training split lie past --max-len 3 (words): "
            f"their tags are not trained") in err
