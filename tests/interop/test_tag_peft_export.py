"""``attnlab train tag`` with ``--lora-rank`` / ``--freeze`` from a Hugging Face BERT, and
``attnlab export --hf`` of a tag run:

- the run's ``adapter/`` loads in peft over the ``--init`` checkpoint's
  ``BertForTokenClassification`` with the run's logits (the head in ``modules_to_save``);
- ``--freeze encoder`` trains the per-token layer alone: the encoder's weights are the
  checkpoint's, bit for bit;
- the exported ``*ForTokenClassification`` (``id2label`` the run's tags) gives the run's logits,
  and its tokenizer the run's ids; ``tagger_to_hf`` does so for BERT, RoBERTa and DistilBERT;
- a tag run from scratch: ``--lora-rank`` trains and says why it writes no adapter (as
  classify's), and ``export`` refuses it in one line, writing nothing.

Offline: a tiny random BERT saved with transformers' classes. Logits in float32 at
atol = rtol = 1e-5, the update checked to move them (else equality says nothing).
"""
import json

import pytest
import torch
from safetensors.torch import load_file
from torch.testing import assert_close

from .conftest import transformers  # (skips without the hf extra)

peft = pytest.importorskip("peft")

import attnlab  # noqa: E402
from attnlab.cli import main  # noqa: E402
from attnlab.interop.bert_classify import tagger_to_hf  # noqa: E402
from attnlab.loading import check_run_dir  # noqa: E402
from attnlab.models import BertTagger  # noqa: E402
from attnlab.models.configs import BertClassifierConfig  # noqa: E402
from attnlab.tasks.tag.runtime import _batching, encode_words, make_batches  # noqa: E402

from ..tasks.test_tag import capitalised, write_conll  # noqa: E402
from .test_checkpoint import save_bert  # noqa: E402

TOL = dict(atol=1e-5, rtol=1e-5)
SENTENCES = [["Alice", "walks", "to", "Rome"], ["the", "city"], ["Transformers", "isn't", "it"]]
TINY = ["--max-steps", "3", "--warmup", "1", "--lr", "3e-2", "--batch-size", "8",
        "--threads", "1", "--dropout", "0"]


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    return save_bert(tmp_path_factory.mktemp("tag_peft") / "bert")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    sentences = [(w, ["B-PER" if t == "B-X" else t for t in tags]) for w, tags in capitalised(40)]
    return write_conll(tmp_path_factory.mktemp("tag_peft_data") / "caps.conll", sentences)


@pytest.fixture(scope="module")
def lora_run(bert, data, tmp_path_factory):
    out = tmp_path_factory.mktemp("tag_lora") / "run"
    assert main(["train", "tag", "--init", str(bert), "--data", str(data), "--out", str(out),
                 *TINY, "--lora-rank", "2", "--lora-alpha", "4",
                 "--lora-targets", "all-linear"]) == 0
    return out


def _batch(run):
    """The run's model, its tags, and one padded batch of SENTENCES as it reads them."""
    run_dir, cfg = check_run_dir(run)
    model, tokenizer = attnlab.load(run_dir)
    encoded = encode_words(cfg, tokenizer, SENTENCES)
    ids, mask, types, _ = make_batches(encoded, [[0] * len(e.ids) for e in encoded], 8,
                                       **{**_batching(cfg, tokenizer), "types": True,
                                          "mask": True})[0]
    return model.eval(), list(cfg.tags), {"input_ids": ids, "attention_mask": mask,
                                          "token_type_ids": types}


def _ours(model, x):
    with torch.no_grad():
        return model(x["input_ids"], x["attention_mask"], x["token_type_ids"])


@pytest.mark.slow  # trains a run
def test_peft_loads_the_tag_adapter_over_the_base_with_the_runs_logits(bert, lora_run):
    config = json.loads((lora_run / "adapter" / "adapter_config.json").read_text())
    assert (config["task_type"], config["r"], config["lora_alpha"]) == ("TOKEN_CLS", 2, 4.0)
    assert config["modules_to_save"] == ["classifier"]
    model, tags, x = _batch(lora_run)
    base = transformers.AutoModelForTokenClassification.from_pretrained(
        bert, num_labels=len(tags), local_files_only=True).eval()
    with torch.no_grad():
        before = base(**x).logits.clone()
    adapted = peft.PeftModel.from_pretrained(base, lora_run / "adapter").eval()
    with torch.no_grad():
        theirs = adapted(**x).logits  # (B, T, C)
    assert_close(theirs, _ours(model, x), **TOL)
    assert not torch.allclose(theirs, before, atol=1e-3)  # the update reaches the logits
    held = {k.removeprefix("base_model.model.").removesuffix(".lora_A.weight")
            for k in load_file(lora_run / "adapter" / "adapter_model.safetensors")
            if "lora_A" in k}
    lora = {n.removeprefix("base_model.model.") for n, m in adapted.named_modules()
            if hasattr(m, "lora_A") and "default" in m.lora_A}
    assert lora == held and len(held) == 2 * 6  # q, k, v, o, ff1, ff2 of 2 layers


@pytest.mark.slow  # trains a run and exports it
def test_export_writes_bert_for_token_classification_with_the_runs_logits(lora_run, tmp_path,
                                                                         capsys):
    out = tmp_path / "hf"
    assert main(["export", str(lora_run), "--hf", str(out)]) == 0
    err = capsys.readouterr().err
    assert "AutoModelForTokenClassification" in err
    # the weights named, and the update in them (RUN/adapter/ holds it alone)
    assert (f"from {lora_run / 'model.safetensors'} (BertForTokenClassification, its "
            f"--lora-rank update merged; ") in err, err
    hf = transformers.AutoModelForTokenClassification.from_pretrained(out).eval()
    model, tags, x = _batch(lora_run)
    assert type(hf).__name__ == "BertForTokenClassification"
    assert hf.config.id2label == dict(enumerate(tags)) and tags == ["B-PER", "O"]
    assert hf.config.label2id == {t: i for i, t in enumerate(tags)}
    with torch.no_grad():
        assert_close(hf(**x).logits, _ours(model, x), **TOL)
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    ours = encode_words(check_run_dir(lora_run)[1], attnlab.load(lora_run)[1], SENTENCES[:1])
    assert tokenizer(" ".join(SENTENCES[0]))["input_ids"] == ours[0].ids


@pytest.mark.slow  # trains a run
def test_freeze_encoder_trains_the_per_token_layer_alone(bert, data, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "tag", "--init", str(bert), "--data", str(data), "--out", str(out),
                 *TINY, "--freeze", "encoder"]) == 0
    assert "note: --freeze encoder: training 66 parameters" in capsys.readouterr().err
    trained = load_file(out / "model.safetensors")
    base = transformers.BertModel.from_pretrained(bert).state_dict()
    assert_close(trained["bert.word_embeddings.weight"], base["embeddings.word_embeddings.weight"],
                 atol=0, rtol=0)
    assert_close(trained["bert.encoder.layers.1.linear_net.3.weight"],
                 base["encoder.layer.1.output.dense.weight"], atol=0, rtol=0)
    assert trained["classifier.bias"].abs().sum() > 0  # it trained (a new head's bias is 0)


@pytest.mark.parametrize("model_type", ["bert", "roberta", "distilbert"])
def test_tagger_to_hf_gives_the_taggers_logits(model_type):
    torch.manual_seed(0)
    family = {"bert": {}, "roberta": {"position_style": "roberta", "pad_id": 1,
                                      "type_vocab_size": 1},
              "distilbert": {"type_vocab_size": 0}}[model_type]
    ours = BertTagger(BertClassifierConfig(num_classes=5, vocab_size=60, model_dim=16,
                                           num_heads=2, num_layers=2, dim_feedforward=24,
                                           max_positions=40, **family)).eval()
    with torch.no_grad():
        ours.classifier.bias.normal_()  # a head that is not the one a new model draws
    hf = tagger_to_hf(ours, model_type=model_type, labels=list("abcde")).eval()
    ids = torch.randint(3, 60, (2, 9))
    mask = torch.ones_like(ids)
    ids[1, 6:], mask[1, 6:] = ours.config.pad_id, 0
    with torch.no_grad():
        assert_close(hf(input_ids=ids, attention_mask=mask).logits, ours(ids, mask), **TOL)


@pytest.mark.slow  # trains a run
def test_a_tag_run_from_scratch_takes_lora_without_an_adapter_and_is_not_exported(
        data, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "tag", "--data", str(data), "--out", str(out), *TINY,
                 "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
                 "--lora-rank", "2"]) == 0
    err = capsys.readouterr().err
    assert "note: --lora-rank 2 (alpha 2) on 2 attention projections" in err
    assert "no adapter/ for this --lora-rank run: started from random weights" in err
    assert not (out / "adapter").exists()
    hf = tmp_path / "hf"
    assert main(["export", str(out), "--hf", str(hf)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "is a tag run of attnlab's own encoder" in lines[0], lines
    assert not hf.exists() and not list(tmp_path.glob(".hf.*"))


@pytest.mark.slow  # the CLI, in process (refused before training)
@pytest.mark.parametrize("flags, fragment", [
    (["--lora-alpha", "4"], "--lora-alpha scales a LoRA update: give --lora-rank too"),
    (["--freeze", "all-but-last-3", "--num-layers", "2"], "the model has 2 blocks"),
    (["--freeze", "encoder", "--lora-rank", "2"], "--freeze encoder with --lora-rank"),
    (["--lora-rank", "64", "--model-dim", "32"], "--lora-rank 64 is above the model width"),
])
def test_bad_adapt_flags_on_tag_exit_2_in_one_line_and_write_nothing(flags, fragment, data,
                                                                     tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "tag", "--data", str(data), "--out", str(out), *flags]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], lines
    assert not out.exists()
