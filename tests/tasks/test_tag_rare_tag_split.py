"""A new user's tag file with a rare tag: ``attnlab train tag --data FILE`` without --test or
--val draws the held-out sentences itself, and a sentence whose tag no other sentence has must
stay in training. Drawn into the test split, it made the run stop with "--test FILE line N:
tag 'B-ORG' never seen in training", naming a --test the user never gave."""
import pytest

from attnlab.cli import main
from attnlab.tasks import get_task
from attnlab.tasks.tag.data import known_tags, load_splits
from tests.tasks.test_tag import TINY, capitalised, write_conll


def _data(tmp_path):
    sentences = capitalised(40) + [(["Acme", "hires"], ["B-ORG", "O"])]
    return write_conll(tmp_path / "rare.conll", sentences), len(sentences)


def test_a_drawn_sentence_with_a_tag_training_lacks_stays_in_training(tmp_path):
    data, n = _data(tmp_path)
    moved = 0
    for seed in range(30):  # 4, 7, 13, 14 draw the B-ORG sentence for test; 2, 15, 25 for val
        cfg = get_task("tag").config(data=str(data), seed=seed)
        splits = load_splits(cfg)
        seen = known_tags(splits["train"])
        assert known_tags(splits["test"]) <= seen and known_tags(splits["val"]) <= seen
        assert ["Acme", "hires"] in splits["train"].words
        sizes = [len(splits[k]) for k in ("train", "val", "test")]
        assert sum(sizes) == n  # no sentence lost or repeated
        moved += sizes[1] + sizes[2] < 2 * round(0.1 * n)
    assert moved == 7  # the rare sentence was drawn for a held-out split, and kept back


@pytest.mark.slow  # trains a run
def test_a_run_whose_draw_held_out_the_only_sentence_of_a_tag_trains(tmp_path, capsys):
    data, _ = _data(tmp_path)
    out = tmp_path / "run"
    assert main(["train", "tag", "--data", str(data), "--seed", "4", "--out", str(out),
                 *TINY[:1], "2", *TINY[2:]]) == 0, capsys.readouterr().err
    assert "B-ORG" in (out / "config.yaml").read_text()
