"""``attnlab train tag --init DIR`` of a byte-level BPE checkpoint (RoBERTa's): each word is
read after a space, the first one too, so that the ids are those of transformers'
``tokenizer(words, is_split_into_words=True)`` with ``add_prefix_space=True`` (the way Hugging
Face fine-tunes RoBERTa taggers), and each word's label sits on its first token; a run made
before (config.yaml without ``words_spaced``) keeps reading its first word bare. WordPiece
(BERT) is read as before. Tiny random checkpoints (``test_checkpoint``'s builders)."""
import json
from types import SimpleNamespace

import pytest

from .conftest import transformers

from attnlab.interop.checkpoint import read_checkpoint  # noqa: E402
from attnlab.tasks.tag.runtime import encode_words  # noqa: E402
from tests.interop.test_checkpoint import save_bert  # noqa: E402
from tests.interop.test_init_classify import save_pooled_roberta  # noqa: E402

SENTENCES = [["Alice", "walks", "to", "Rome"], ["Transformers", "isn't", "it"], ["a"]]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("spaced")
    transformers.logging.set_verbosity_error()
    return {"roberta": save_pooled_roberta(root / "roberta"), "bert": save_bert(root / "bert")}


def _cfg(arch, **derived):
    return SimpleNamespace(arch=arch, max_len=64, **{"words_spaced": True, **derived})


def _theirs(d, words):
    options = {"add_prefix_space": True} if "roberta" in str(d) else {}
    hf = transformers.AutoTokenizer.from_pretrained(d, **options)
    e = hf(words, is_split_into_words=True)
    word_ids = e.word_ids()
    return e["input_ids"], [word_ids.index(i) for i in range(len(words))]


@pytest.mark.parametrize("name", ["roberta", "bert"])
def test_a_taggers_ids_are_transformers_of_the_words_given_one_by_one(dirs, name):
    tokenizer = read_checkpoint(dirs[name], task="tag").tokenizer
    for words, ours in zip(SENTENCES, encode_words(_cfg(name), tokenizer, SENTENCES)):
        ids, first = _theirs(dirs[name], words)
        assert ours.ids == ids, words
        assert all(ours.ids[p] == ids[q] for p, q in zip(ours.first, first)), words


def test_a_run_made_before_keeps_reading_its_first_word_bare(dirs):
    tokenizer = read_checkpoint(dirs["roberta"], task="tag").tokenizer
    old = encode_words(_cfg("roberta", words_spaced=False), tokenizer, SENTENCES)
    hf = transformers.AutoTokenizer.from_pretrained(dirs["roberta"])
    assert [e.ids for e in old] == [hf(" ".join(w))["input_ids"] for w in SENTENCES]


def test_a_tokenizer_that_adds_the_first_space_itself_labels_each_words_space(tmp_path):
    # a RoBERTa tagger saved with add_prefix_space=True (tokenizer.json and its config say so):
    # a word whose characters do not merge with its space starts with a bare "Ġ", which
    # transformers' word_ids() give to the word, so its label sits there
    d = save_pooled_roberta(tmp_path / "roberta")
    for name, part in (("tokenizer.json", ("pre_tokenizer", "post_processor")),
                       ("tokenizer_config.json", (None,))):
        data = json.loads((d / name).read_text())
        for key in part:
            (data[key] if key else data)["add_prefix_space"] = True
        (d / name).write_text(json.dumps(data))
    words = ["Alice", "walks", "Ωmega", "to", "Rome", "ñ"]
    ours = encode_words(_cfg("roberta"), read_checkpoint(d, task="tag").tokenizer, [words])[0]
    ids, first = _theirs(d, words)
    assert ours.ids == ids
    assert ours.first == first
