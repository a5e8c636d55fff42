"""A classify run says when --max-len cuts texts: training, validation and the test split,
evaluate and predict each print one warning line with how many of their texts the model reads
only the first --max-len tokens of (it cut them without a word, as a tag run does not)."""
import pytest

from attnlab.cli import main
from attnlab.runs import read_yaml
from attnlab.tasks.classify import TASKS
from attnlab.tasks.classify.data import load_splits
from attnlab.tasks.classify.runtime import _inputs, fit_tokenizer

from .test_classify import cfg_for, write_csv

TASK = TASKS["classify"]
TINY = ["--text-column", "review", "--label-column", "sentiment", "--max-steps", "2",
        "--model-dim", "16", "--num-heads", "2", "--num-layers", "1", "--dim-feedforward", "32",
        "--warmup", "0"]


def _warning(cut: int, texts: int, what: str, max_len: int) -> str:
    return (f"warning: {cut} of the {texts} {what} {'is' if cut == 1 else 'are'} longer than "
            f"--max-len {max_len} tokens: the model reads the first {max_len} of each, and the "
            f"rest plays no part")


def test_the_texts_cut_are_counted_and_named_and_still_cut(tmp_path, capsys):
    cfg = cfg_for(tmp_path / "d.csv", max_len=3)
    texts = ["the movie was good", "a dull plot", "good", "the film was a bad film"]
    tokenizer = fit_tokenizer(cfg, texts)
    ids = _inputs(cfg, tokenizer, texts, "test texts")
    assert [len(i) for i in ids] == [3, 3, 1, 3]
    assert capsys.readouterr().err.splitlines() == [_warning(2, 4, "test texts", 3)]


def test_nothing_is_said_when_no_text_is_cut_or_none_is_asked(tmp_path, capsys):
    cfg = cfg_for(tmp_path / "d.csv", max_len=3)
    tokenizer = fit_tokenizer(cfg, ["a dull plot", "the film was bad"])
    _inputs(cfg, tokenizer, ["a dull plot", "good"], "test texts")
    _inputs(cfg, tokenizer, ["the film was bad"])
    assert capsys.readouterr().err == ""


@pytest.mark.slow  # trains a run
def test_train_evaluate_and_predict_say_how_many_texts_max_len_cut(tmp_path, capsys):
    data = write_csv(tmp_path / "reviews.csv", n=60)
    out = tmp_path / "run"
    assert main(["train", "classify", "--data", str(data), "--out", str(out), "--max-len", "4",
                 *TINY]) == 0
    splits = load_splits(TASK.typed(read_yaml(out / "config.yaml"), out))
    long = {k: sum(len(t.split()) > 4 for t, _ in splits[k]) for k in ("train", "val", "test")}
    assert all(long.values())  # texts of 3 to 9 words: some of each split are cut
    err = capsys.readouterr().err.splitlines()
    for key, what in [("train", "training texts"), ("val", "validation texts"),
                      ("test", "test texts")]:
        assert _warning(long[key], len(splits[key]), what, 4) in err
    assert main(["evaluate", str(out), "--data", str(data)]) == 0
    every = sum(long.values())
    assert _warning(every, 60, f"texts of --data {data}", 4) in capsys.readouterr().err
    assert main(["predict", str(out), "--input", "the movie was a good film"]) == 0
    assert capsys.readouterr().err.splitlines() == [_warning(1, 1, "inputs", 4)]
