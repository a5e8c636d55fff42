"""``attnlab train tag --init DIR`` of a RoBERTa and a DistilBERT checkpoint, then ``attnlab
export RUN --hf OUT``: ``AutoModelForTokenClassification.from_pretrained(OUT)`` is the family's
``*ForTokenClassification`` with the run's tags and gives the run's logits, and its tokenizer
the run's ids (#41; BERT's is in ``test_tag_peft_export.py``, and ``tagger_to_hf`` alone is
tested there with copied weights).

Offline: tiny random checkpoints saved with transformers' classes (``test_init_classify``'s
builders); three training steps on one thread. Logits in float32 at atol = rtol = 1e-5.
"""
import pytest
import torch
from torch.testing import assert_close

from .conftest import transformers  # (skips without the hf extra)

import attnlab  # noqa: E402
from attnlab.cli import main  # noqa: E402
from attnlab.loading import check_run_dir  # noqa: E402
from attnlab.tasks.tag.runtime import _batching, encode_words, make_batches  # noqa: E402

from ..tasks.test_tag import capitalised, write_conll  # noqa: E402
from .test_init_classify import save_distilbert, save_pooled_roberta  # noqa: E402

TOL = dict(atol=1e-5, rtol=1e-5)
SENTENCES = [["Alice", "walks", "to", "Rome"], ["the", "city"], ["Transformers", "isn't", "it"]]
TINY = ["--max-steps", "3", "--warmup", "1", "--lr", "3e-2", "--batch-size", "8",
        "--threads", "1", "--dropout", "0"]

SAVERS = {"roberta": (save_pooled_roberta, "RobertaForTokenClassification"),
          "distilbert": (save_distilbert, "DistilBertForTokenClassification")}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    sentences = [(w, ["B-PER" if t == "B-X" else t for t in tags]) for w, tags in capitalised(40)]
    return write_conll(tmp_path_factory.mktemp("tag_archs_data") / "caps.conll", sentences)


@pytest.mark.slow  # trains a run and exports it
@pytest.mark.parametrize("model_type", sorted(SAVERS))
def test_export_of_a_tag_run_gives_the_familys_token_classifier_with_the_runs_logits(
        model_type, data, tmp_path, capsys):
    save, hf_class = SAVERS[model_type]
    torch.manual_seed(0)
    checkpoint = save(tmp_path / model_type)
    run, out = tmp_path / "run", tmp_path / "hf"
    assert main(["train", "tag", "--init", str(checkpoint), "--data", str(data), "--out",
                 str(run), *TINY]) == 0
    assert main(["export", str(run), "--hf", str(out)]) == 0
    capsys.readouterr()
    run_dir, cfg = check_run_dir(run)
    assert cfg.arch == model_type
    model, tokenizer = attnlab.load(run_dir)
    model.eval()
    encoded = encode_words(cfg, tokenizer, SENTENCES)
    options = _batching(cfg, tokenizer)
    ids, mask, *types, _ = make_batches(encoded, [[0] * len(e.ids) for e in encoded], 8,
                                        **options)[0]
    x = {"input_ids": ids, "attention_mask": mask,
         **({"token_type_ids": types[0]} if types else {})}
    hf = transformers.AutoModelForTokenClassification.from_pretrained(out).eval()
    assert type(hf).__name__ == hf_class
    assert hf.config.id2label == dict(enumerate(cfg.tags)) and list(cfg.tags) == ["B-PER", "O"]
    with torch.no_grad():
        ours = model(ids, mask, types[0] if types else None)  # (B, T, C)
        assert_close(hf(**x).logits, ours, **TOL)
    trained = transformers.AutoModelForTokenClassification.from_pretrained(
        checkpoint, num_labels=2).eval()  # the checkpoint under a new head: not the run
    with torch.no_grad():
        assert not torch.allclose(trained.base_model(**x)[0], hf.base_model(**x)[0], atol=1e-3)
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    for words, ours_encoded in zip(SENTENCES, encoded):
        assert hf_tokenizer(" ".join(words))["input_ids"] == ours_encoded.ids
