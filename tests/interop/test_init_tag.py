"""``attnlab train tag --init DIR``: a tiny random BERT saved with transformers' classes,
fine-tuned with a per-token head. The subword alignment (a word's label at its first subword
only), the model against transformers' ``BertForTokenClassification`` with copied weights
(fp32, atol = rtol = 1e-5), and a run end to end (train, predict, evaluate, view)."""
import json

import pytest
import torch
from torch.testing import assert_close

transformers = pytest.importorskip("transformers")

from attnlab.cli import main  # noqa: E402
from attnlab.interop.checkpoint import read_checkpoint  # noqa: E402
from attnlab.models import BertTagger  # noqa: E402
from attnlab.models.configs import BertClassifierConfig  # noqa: E402
from attnlab.tasks import get_task  # noqa: E402
from attnlab.tasks.tag.runtime import _labels, encode_words, make_batches  # noqa: E402
from attnlab.training.tagger import IGNORE  # noqa: E402
from tests.interop.test_checkpoint import save_bert  # noqa: E402
from tests.tasks.test_tag import capitalised, write_conll  # noqa: E402

TOL = dict(atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    return save_bert(tmp_path_factory.mktemp("tag_bert") / "bert")


def _cfg(checkpoint, tags, max_len=64):
    return get_task("tag").config(arch="bert", init="x", tags=tags, max_len=max_len,
                                  model_vocab_size=checkpoint.config.vocab_size)


def test_each_words_label_sits_on_its_first_subword_only(bert):
    checkpoint = read_checkpoint(bert, task="tag")
    tok = checkpoint.tokenizer
    words = ["Transformers", "attend", "to", "isn't", "hello"]
    tags = ["B-X", "O", "O", "B-Y", "I-Y"]
    cfg = _cfg(checkpoint, ["B-X", "B-Y", "I-Y", "O"])
    (e,) = encode_words(cfg, tok, [words])
    pieces = [tok.tokenizer.id_to_token(i) for i in e.ids]
    assert pieces[0] == "[CLS]" and pieces[-1] == "[SEP]"
    # each word's first subword is where its own tokenisation starts; words split in several
    assert [e.ids[p] for p in e.first] == [tok.encode(w)[0] for w in words]
    assert len(e.ids) > len(words) + 2, pieces  # some words are several subwords
    labels = _labels(e, tags, {t: i for i, t in enumerate(cfg.tags)})
    kept = [i for i, y in enumerate(labels) if y != IGNORE]
    assert kept == e.first  # the later subwords and [CLS]/[SEP] carry no label
    assert [cfg.tags[labels[i]] for i in kept] == tags


def test_a_word_past_max_len_has_no_first_subword(bert):
    checkpoint = read_checkpoint(bert, task="tag")
    cfg = _cfg(checkpoint, ["O"], max_len=4)  # [CLS] + 2 subwords + [SEP]
    (e,) = encode_words(cfg, checkpoint.tokenizer, [["the", "cat", "sat", "down"]])
    assert len(e.ids) == 4 and e.first == [1, 2, None, None]


def test_the_tagger_is_bert_for_token_classification(bert):
    hf = transformers.BertForTokenClassification.from_pretrained(bert, num_labels=3).eval()
    checkpoint = read_checkpoint(bert, task="tag")
    ours = BertTagger(BertClassifierConfig.of_encoder(checkpoint.config, num_classes=3)).eval()
    missing, unexpected = ours.bert.load_state_dict(checkpoint.model.state_dict(), strict=False)
    assert not missing and all(k.startswith("pooler.") for k in unexpected)
    ours.classifier.load_state_dict(hf.classifier.state_dict())
    cfg = _cfg(checkpoint, ["a", "b", "c"])
    encoded = encode_words(cfg, checkpoint.tokenizer, [["the", "cat", "sat"], ["hello"]])
    ids, mask, types, _ = make_batches(encoded, [[0] * len(e.ids) for e in encoded], 2,
                                       pad_id=0, mask=True, types=True)[0]
    expected = hf(input_ids=ids, attention_mask=mask, token_type_ids=types).logits
    assert_close(ours(ids, mask, types), expected, **TOL)


@pytest.mark.slow
def test_a_run_from_bert_trains_predicts_evaluates_and_views(bert, tmp_path, capsys):
    data = write_conll(tmp_path / "caps.conll", capitalised(40))
    out = tmp_path / "run"
    assert main(["train", "tag", "--init", str(bert), "--data", str(data), "--out", str(out),
                 "--max-steps", "4", "--batch-size", "8", "--threads", "1"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert 0 <= metrics["test_f1"] <= 1 and (out / "tokenizer.json").is_file()
    capsys.readouterr()
    assert main(["predict", str(out), "--input", "Alice walks to Rome", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["tokens"] == ["Alice", "walks", "to", "Rome"]
    assert len(result["prediction"]) == 4 and set(result["prediction"]) <= {"B-X", "O"}
    assert main(["evaluate", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["test_f1"] == pytest.approx(metrics["test_f1"],
                                                                           abs=1e-6)
    page = tmp_path / "v.html"
    assert main(["view", str(out), "--input", "Alice walks", "--out", str(page)]) == 0
    text = page.read_text()
    tokens = json.loads(text.split('id="attnlab-attention">')[1].split("</script>")[0])
    assert tokens["query_tokens"][0] == "[CLS]" and tokens["query_tokens"][-1] == "[SEP]"
