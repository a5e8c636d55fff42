"""``attnlab train classify|tag --init DIR`` on text its checkpoint's tokenizer reads mostly as
``[UNK]`` (a script its vocabulary lacks): said before the run trains, with the share and a
few of the pieces, instead of a run that learns from one token repeated. A tiny random BERT
whose WordPiece vocabulary was trained on English (``test_checkpoint``'s builder); nothing
downloaded."""
import pytest
import torch

transformers = pytest.importorskip("transformers")

from attnlab.cli import main  # noqa: E402
from attnlab.interop.checkpoint import read_checkpoint  # noqa: E402
from attnlab.tasks.classify.checkpoint_notes import (  # noqa: E402
    UNKNOWN_SAMPLE, UNKNOWN_SHARE, init_unknown_note)
from tests.interop.test_checkpoint import save_bert  # noqa: E402
from tests.interop.test_init_classify import TEXTS, _write_data  # noqa: E402
from tests.tasks.test_tag import capitalised, write_conll  # noqa: E402

CHINESE = ["这部电影很好看", "我不喜欢这本书", "今天天气很好", "他们在公园里散步"]


def _chinese_csv(path):
    rows = [(CHINESE[i % 4], "pos" if i % 2 else "neg") for i in range(40)]
    path.write_text("text,label\n" + "".join(f"{t},{lab}\n" for t, lab in rows),
                    encoding="utf-8")
    return path


def _chinese_conll(path):
    sentences = [(list(CHINESE[i % 4][:4]), ["B-X", "O", "O", "O"]) for i in range(30)]
    return write_conll(path, sentences)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("unknown")
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    return {"bert": save_bert(root / "bert"), "english.csv": _write_data(root / "en.csv"),
            "chinese.csv": _chinese_csv(root / "zh.csv"),
            "english.conll": write_conll(root / "en.conll", capitalised(30)),
            "chinese.conll": _chinese_conll(root / "zh.conll")}


def test_text_the_vocabulary_knows_is_read_without_a_warning(dirs):
    checkpoint = read_checkpoint(dirs["bert"], task="classify")
    ids = checkpoint.tokenizer.encode_batch(TEXTS)
    unknown = sum(row.count(checkpoint.tokenizer.unk_id) for row in ids)
    assert unknown <= UNKNOWN_SHARE * sum(map(len, ids))  # the case the rule leaves alone
    assert init_unknown_note(checkpoint, TEXTS) is None


def test_a_large_training_split_is_judged_by_its_first_texts_and_says_so(dirs):
    checkpoint = read_checkpoint(dirs["bert"], task="classify")
    texts = CHINESE * (UNKNOWN_SAMPLE // len(CHINESE) + 1)
    note = init_unknown_note(checkpoint, texts)
    assert f"of the first {UNKNOWN_SAMPLE:,} of the training texts are [UNK]" in note, note


@pytest.mark.slow  # trains two runs
@pytest.mark.parametrize("task, data, what", [("classify", "chinese.csv", "training texts"),
                                              ("tag", "chinese.conll", "training sentences")])
def test_text_read_mostly_as_unk_is_said_before_the_run_trains(dirs, tmp_path, capsys, task,
                                                               data, what):
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["train", task, "--init", str(dirs["bert"]), "--data", str(dirs[data]),
                 "--out", str(out), "--max-steps", "1", "--batch-size", "8",
                 "--threads", "1"]) == 0
    err = capsys.readouterr().err.splitlines()
    said = [line for line in err if f"tokens of the {what} are [UNK]" in line]
    assert len(said) == 1, err
    assert said[0].startswith("warning: 100% of the ") and str(dirs["bert"]) in said[0]
    assert "'这', '部', '电'" in said[0], said[0]  # the first pieces, as written
    assert err.index(said[0]) < next(i for i, line in enumerate(err)
                                     if line.startswith(f"attnlab train {task} ->"))
