"""``attnlab train classify --init DIR`` for every model type of the BERT family that attnlab
reads (``attnlab.interop.source.BERT_FAMILY``): XLM-RoBERTa and CamemBERT here, beside the BERT,
RoBERTa and DistilBERT of ``test_init_classify``. Each trains a few steps from a tiny random
checkpoint, and its run then loads, predicts, evaluates and shows its attention; the two
SentencePiece-style checkpoints also give, at step 0, the checkpoint's own pooled output
through the new head (fp32, atol = rtol = 1e-5).

Their tokenizers are Unigram models trained in the test, saved as XLM-R's and CamemBERT's fast
tokenizers are (``tokenizer.json``); nothing is downloaded.
"""
import json

import pytest
import torch
from torch.testing import assert_close

transformers = pytest.importorskip("transformers")

import attnlab  # noqa: E402
from attnlab.cli import main  # noqa: E402
from attnlab.interop.source import BERT_FAMILY  # noqa: E402
from attnlab.models import BertClassifier  # noqa: E402
from tests.interop.test_checkpoint import CORPUS  # noqa: E402
from tests.interop.test_init_classify import (  # noqa: E402
    PROBES, SAVERS, TOL, _capture, _hf_inputs, _train, _write_data)


def _unigram_vocab() -> list[tuple[str, float]]:
    """A SentencePiece-style vocabulary, ids as XLM-R orders them: <s> <pad> </s> <unk>, the
    pieces, and <mask> last."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator(CORPUS, trainers.UnigramTrainer(
        vocab_size=80, show_progress=False, unk_token="<unk>",
        special_tokens=["<s>", "<pad>", "</s>", "<unk>"]))
    return [tuple(v) for v in json.loads(tok.to_str())["model"]["vocab"]] + [("<mask>", 0.0)]


def _save_sentencepiece_style(d, config, model, tokenizer):
    tok = tokenizer(vocab=_unigram_vocab())  # CamemBERT's adds three <...NOTUSED> ids
    cfg = config(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2,
                 num_attention_heads=4, intermediate_size=48, max_position_embeddings=66,
                 pad_token_id=1, bos_token_id=0, eos_token_id=2)
    model(cfg).save_pretrained(d)  # the encoder with its pooler: cls pooling
    tok.save_pretrained(d)
    return d


def save_xlm_roberta(d):
    return _save_sentencepiece_style(d, transformers.XLMRobertaConfig,
                                     transformers.XLMRobertaModel,
                                     transformers.XLMRobertaTokenizerFast)


def save_camembert(d):
    return _save_sentencepiece_style(d, transformers.CamembertConfig,
                                     transformers.CamembertModel,
                                     transformers.CamembertTokenizerFast)


ALL_SAVERS = {**SAVERS, "xlm-roberta": save_xlm_roberta, "camembert": save_camembert}


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("init_classify_archs")
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    return {"data": _write_data(root / "tiny.csv"),
            "xlm-roberta": save_xlm_roberta(root / "xlm-roberta"),
            "camembert": save_camembert(root / "camembert")}


def test_every_model_type_attnlab_reads_has_a_checkpoint_here():
    assert {name.removesuffix("-mean") for name in ALL_SAVERS} == set(BERT_FAMILY)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["xlm-roberta", "camembert"])
def test_the_runs_logits_at_step_0_are_the_checkpoints(dirs, tmp_path, monkeypatch, name):
    seen = _capture(monkeypatch)
    run = _train(dirs, name, tmp_path / "run")
    cfg = attnlab.loading.check_run_dir(run)[1]
    assert (cfg.arch, cfg.pooling) == (name, "cls")
    hf = transformers.AutoModel.from_pretrained(dirs[name]).eval()
    with torch.no_grad():
        pooled = hf(**_hf_inputs(seen["batch"])).pooler_output
    weight, bias = seen["head"]
    assert_close(seen["logits"], pooled @ weight.T + bias, **TOL)


@pytest.mark.slow  # trains a run per model type
@pytest.mark.parametrize("name", sorted(ALL_SAVERS))
def test_a_run_of_each_model_type_loads_predicts_evaluates_and_views(name, tmp_path, capsys):
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    made = {"data": _write_data(tmp_path / "tiny.csv"), name: ALL_SAVERS[name](tmp_path / name)}
    run = _train(made, name, tmp_path / "run")
    model, _ = attnlab.load(run)
    assert isinstance(model, BertClassifier) and not model.training
    capsys.readouterr()
    assert main(["predict", str(run), "--input", PROBES[0], "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["prediction"] in ("neg", "pos")
    assert main(["evaluate", str(run)]) == 0
    assert 0 <= json.loads(capsys.readouterr().out)["test_accuracy"] <= 1
    page = tmp_path / "view.html"
    assert main(["view", str(run), "--input", PROBES[1], "--out", str(page)]) == 0
    assert page.stat().st_size > 1000
