"""``attnlab train classify|tag --init DIR`` where DIR is a fine-tuned classifier
(``*ForSequenceClassification``, ``*ForTokenClassification``, with its own ``id2label``; a
``*ForQuestionAnswering``, ``*ForMultipleChoice``): its encoder is read and its head is not, and the run says so before it trains, naming the class
and the labels it leaves behind. Tiny random models saved with transformers' classes (the
builders of ``test_checkpoint``); nothing downloaded."""
import pytest
import torch

transformers = pytest.importorskip("transformers")

from attnlab.cli import main  # noqa: E402
from attnlab.interop.checkpoint import read_checkpoint  # noqa: E402
from attnlab.tasks.classify.checkpoint_notes import head_note  # noqa: E402
from tests.interop.test_checkpoint import save_bert  # noqa: E402
from tests.interop.test_init_classify import _write_data  # noqa: E402
from tests.tasks.test_tag import capitalised, write_conll  # noqa: E402

LABELS = {0: "negative", 1: "positive"}
TAGS = {0: "O", 1: "B-PER", 2: "I-PER"}


def _fine_tuned(d, cls, id2label):
    """``save_bert``'s directory holding a ``cls`` head fine-tuned for ``id2label``."""
    save_bert(d)
    config = transformers.BertConfig.from_pretrained(
        d, id2label=id2label, label2id={v: k for k, v in id2label.items()})
    getattr(transformers, cls)(config).save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("fine_tuned")
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    return {"base": save_bert(root / "base"),
            "sequence": _fine_tuned(root / "sequence", "BertForSequenceClassification", LABELS),
            "token": _fine_tuned(root / "token", "BertForTokenClassification", TAGS),
            "span": _fine_tuned(root / "span", "BertForQuestionAnswering", {0: "LABEL_0"}),
            "choice": _fine_tuned(root / "choice", "BertForMultipleChoice", {0: "LABEL_0"}),
            "csv": _write_data(root / "tiny.csv"),
            "conll": write_conll(root / "caps.conll", capitalised(30))}


def test_a_base_model_is_read_without_a_note(dirs):
    assert head_note(read_checkpoint(dirs["base"], task="classify")) is None


@pytest.mark.parametrize("name, cls", [("span", "BertForQuestionAnswering"),
                                       ("choice", "BertForMultipleChoice")])
def test_a_span_or_choice_heads_weights_are_said_to_be_left_behind(dirs, name, cls):
    """Their head (answer spans' start and end; a score per choice) was dropped without a
    word; their id2label is transformers' default, no labels to name."""
    note = head_note(read_checkpoint(dirs[name], task="classify"))
    assert note == (f"note: --init {dirs[name]} is a {cls}: its encoder is read, its head is "
                    f"not; this run trains a new head, from random weights, for the labels of "
                    f"its own data")


@pytest.mark.slow  # trains two runs
@pytest.mark.parametrize("task, name, data, said", [
    ("classify", "sequence", "csv",
     "is a BertForSequenceClassification for 2 labels (negative, positive)"),
    ("tag", "token", "conll", "is a BertForTokenClassification for 3 labels (O, B-PER, I-PER)"),
])
def test_a_fine_tuned_heads_labels_are_said_to_be_left_behind(dirs, tmp_path, capsys, task,
                                                              name, data, said):
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["train", task, "--init", str(dirs[name]), "--data", str(dirs[data]),
                 "--out", str(out), "--max-steps", "1", "--batch-size", "8",
                 "--threads", "1"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines()
             if line.startswith(f"note: --init {dirs[name]}")]
    assert len(notes) == 1, notes
    assert said in notes[0] and "its head and labels are not" in notes[0], notes[0]
    assert "a new head, from random weights" in notes[0]
