"""A new user's sentence holding a word that a BERT tokenizer reads as nothing (a zero-width
space, a lone combining accent: its normaliser removes them). The word has no subword, so no
prediction; the warning said it lay "past --max-len 64", in a sentence of three words, and a
training split with such a word lost its tag without a word."""
import pytest

transformers = pytest.importorskip("transformers")

from attnlab.cli import main  # noqa: E402
from attnlab.interop.checkpoint import read_checkpoint  # noqa: E402
from attnlab.tasks import get_task  # noqa: E402
from attnlab.tasks.tag.runtime import encode_words  # noqa: E402
from tests.interop.test_checkpoint import save_bert  # noqa: E402
from tests.tasks.test_tag import capitalised, write_conll  # noqa: E402

ZWSP, ACCENT = "\u200b", "\u0301"


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return save_bert(tmp_path_factory.mktemp("unread") / "bert")


def test_a_word_without_subwords_is_told_apart_from_one_past_max_len(bert):
    checkpoint = read_checkpoint(bert, task="tag")
    cfg = get_task("tag").config(arch="bert", init="x", tags=["O"], max_len=5,
                                 model_vocab_size=checkpoint.config.vocab_size)
    whole, cut = encode_words(cfg, checkpoint.tokenizer, [["the", ZWSP, "cat"],
                                                          ["the", ACCENT, "cat", "sat", "down"]])
    assert whole.first[1] is None and whole.empty == [1]
    # [CLS] the cat sat [SEP]: the accent has no subword, "down" is cut off
    assert cut.first[1] is None and cut.first[4] is None and cut.empty == [1]


@pytest.mark.slow  # trains a run
def test_predict_and_training_name_the_cause(bert, tmp_path, capsys):
    sentences = capitalised(20) + [(["John", ZWSP, "walks"], ["B-X", "B-X", "O"])] * 3
    data, out = write_conll(tmp_path / "d.conll", sentences), tmp_path / "run"
    capsys.readouterr()
    assert main(["train", "tag", "--init", str(bert), "--data", str(data), "--test", str(data),
                 "--out", str(out), "--max-steps", "1", "--threads", "1"]) == 0
    err = capsys.readouterr().err
    assert "3 word(s) give no subword" in err and "their tags are not trained" in err
    assert "past --max-len" not in err
    assert main(["predict", str(out), "--input", f"Mary {ZWSP} lives"]) == 0
    err = capsys.readouterr().err
    assert "1 word(s) give no subword" in err and repr(ZWSP) in err, err
    assert "past --max-len" not in err
