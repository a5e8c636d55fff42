"""``attnlab train classify|tag --init DIR`` where DIR's tokenizer gives fewer ids than its
model has embedding rows: read (some checkpoints pad their embedding), and said, since a
tokenizer copied from another model would read each token as another's embedding in silence.
A tiny random BERT (``test_checkpoint``'s builder) saved again with more rows; nothing
downloaded."""
import pytest
import torch

transformers = pytest.importorskip("transformers")

from attnlab.interop.checkpoint import read_checkpoint  # noqa: E402
from attnlab.tasks.classify.checkpoint_notes import init_notes  # noqa: E402
from tests.interop.test_checkpoint import save_bert  # noqa: E402

TEXTS = ["the cat sat on the mat.", "hello world"]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("vocabulary")
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    same, padded = save_bert(root / "same"), save_bert(root / "padded")
    config = transformers.BertConfig.from_pretrained(padded)
    config.vocab_size += 10
    transformers.BertModel(config).save_pretrained(padded)
    return {"same": same, "padded": padded}


def _notes(d):
    return [n for n in init_notes(read_checkpoint(d, task="classify"), TEXTS,
                                  "the training texts") if "embedding rows" in n]


def test_a_tokenizer_of_the_models_size_is_read_without_a_note(dirs):
    assert _notes(dirs["same"]) == []


def test_a_tokenizer_of_fewer_ids_than_rows_is_said(dirs):
    (note,) = _notes(dirs["padded"])
    ids = read_checkpoint(dirs["padded"], task="classify").tokenizer.vocab_size
    assert note.startswith(f"note: --init {dirs['padded']}'s tokenizer gives {ids} ids and "
                           f"its model has {ids + 10} embedding rows, 10 of them never read")
    assert "not the one saved with these weights" in note
