"""``attnlab train classify --init DIR``: a BERT-family checkpoint on disk fine-tuned with a new
head, end to end (train, load, predict, evaluate, resume, export --hf), and its refusals.

Tiny models built from configs with random weights and saved with ``save_pretrained`` beside
tokenizers trained in the test (``test_checkpoint``'s builders); nothing downloaded. Logits and
hidden states are compared in fp32 with atol = rtol = 1e-5; token ids and frozen weights
exactly.
"""
import json
import re

import pytest
import torch
from torch.testing import assert_close

transformers = pytest.importorskip("transformers")

import attnlab  # noqa: E402
from attnlab.cli import main  # noqa: E402
from attnlab.interop.checkpoint import read_checkpoint  # noqa: E402
from attnlab.interop.hf_tokenizer import HFTokenizer  # noqa: E402
from attnlab.models import BertClassifier  # noqa: E402
from attnlab.tasks import get_task  # noqa: E402
from attnlab.tasks.classify.runtime import Padding, _inputs  # noqa: E402
from tests.interop.test_checkpoint import (  # noqa: E402
    CORPUS, _wordpiece, save_bert, save_gpt2, save_marian, save_roberta)
from tests.training.loop_probe import probe_loop  # noqa: E402

TOL = dict(atol=1e-5, rtol=1e-5)
TEXTS = ["the cat sat on the mat.", "a dog ran fast!", "hello world, hello there",
         "we're here; isn't it fine?", "Transformers attend to every token."]
PROBES = ["the cat ran", "hello there, world!", "isn't it a dog?", "a"]


def save_pooled_roberta(d):
    """``save_roberta``'s directory with a RobertaModel and its pooler in place of the
    classifier (which has none)."""
    save_roberta(d)
    config = transformers.RobertaConfig.from_pretrained(d)
    transformers.RobertaModel(config).save_pretrained(d)
    return d


def save_distilbert(d):
    tok = _wordpiece()
    cfg = transformers.DistilBertConfig(vocab_size=tok.get_vocab_size(), dim=32, n_layers=2,
                                        n_heads=4, hidden_dim=48, max_position_embeddings=64)
    transformers.DistilBertModel(cfg).save_pretrained(d)
    transformers.DistilBertTokenizerFast(tokenizer_object=tok).save_pretrained(d)
    return d


SAVERS = {"bert": save_bert, "roberta": save_pooled_roberta, "roberta-mean": save_roberta,
          "distilbert": save_distilbert}


def _write_data(path):
    """40 labelled texts, the labels alternating."""
    rows = [(f"{TEXTS[i % 5]} {i}", "pos" if i % 2 else "neg") for i in range(40)]
    path.write_text("text,label\n" + "".join(f'"{t}",{lab}\n' for t, lab in rows))
    return path


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("init_classify")
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)  # the same random checkpoints every time
    made = {name: save(root / name) for name, save in SAVERS.items()}
    return {**made, "data": _write_data(root / "tiny.csv")}


def _train(dirs, name, out, *extra):
    argv = ["train", "classify", "--init", str(dirs[name]), "--data", str(dirs["data"]),
            "--out", str(out), "--max-steps", "4", "--batch-size", "8", "--warmup", "0",
            "--lr", "1e-2", *extra]
    assert main(argv) == 0
    return out


def _eval_logits(model, *inputs):
    was = model.training
    model.eval()
    with torch.no_grad():
        logits = model(*inputs).clone()
    model.train(was)
    return logits


def _capture(monkeypatch, at_step=0, probe=None):
    """Record, at the start of optimiser step ``at_step``, the batch, the model's eval-mode
    logits of it, its head's weights and the names of the trainable parameters; after the
    step, its eval-mode logits of the tensors ``probe``."""
    seen = {}

    class Capture:
        def on_train_batch_end(self, loop):
            if probe is not None and loop.step == at_step + 1:
                seen["probe"] = _eval_logits(loop.module.model, *probe)

        def on_train_batch_start(self, loop, batch):
            if loop.step != at_step:
                return
            model = loop.module.model
            seen["logits"] = _eval_logits(model, *batch[:-1])
            seen["batch"] = [t.clone() for t in batch]
            head = getattr(model, "classifier", None)  # BertClassifier's
            seen["head"] = [p.detach().clone() for p in head.parameters()] if head else None
            pooler = getattr(model, "pooler", None)
            seen["pooler"] = [p.detach().clone() for p in pooler.parameters()] if pooler else None
            seen["trainable"] = sorted(n for n, p in model.named_parameters() if p.requires_grad)

    probe_loop(monkeypatch, Capture())
    return seen


def _hf_inputs(batch):
    names = ("input_ids", "attention_mask", "token_type_ids")  # Padding.pad's order
    return dict(zip(names, batch[:-1]))


def _named(padded):
    return {k: t.tolist() for k, t in _hf_inputs([*padded, None]).items()}


@pytest.mark.slow
@pytest.mark.parametrize("name, pooling", [("bert", "cls"), ("roberta", "cls"),
                                           ("roberta-mean", "mean"), ("distilbert", "mean")])
def test_the_runs_logits_at_step_0_are_the_checkpoints(dirs, tmp_path, monkeypatch, name,
                                                       pooling):
    seen = _capture(monkeypatch)
    run = _train(dirs, name, tmp_path / "run")
    cfg = attnlab.loading.check_run_dir(run)[1]
    assert (cfg.arch, cfg.pooling) == (name.split("-")[0], pooling)
    hf = transformers.AutoModel.from_pretrained(dirs[name]).eval()
    inputs = _hf_inputs(seen["batch"])
    with torch.no_grad():
        out = hf(**inputs)
    if pooling == "cls":
        pooled = out.pooler_output
    else:
        m = inputs["attention_mask"].unsqueeze(-1).float()
        pooled = (out.last_hidden_state * m).sum(1) / m.sum(1)
    weight, bias = seen["head"]
    assert_close(seen["logits"], pooled @ weight.T + bias, **TOL)


@pytest.mark.parametrize("name", ["bert", "roberta"])
def test_batches_are_what_the_checkpoints_tokenizer_gives(dirs, name):
    ours = read_checkpoint(dirs[name], task="classify").tokenizer
    theirs = transformers.AutoTokenizer.from_pretrained(dirs[name])
    for side in ("right", "left"):
        ours.padding_side = theirs.padding_side = side
        pad = Padding(ours.pad_id, side, ours.token_type_ids)
        got = pad.pad(ours.encode_for_model(PROBES + [" ".join(TEXTS) * 3], 16))
        want = theirs(PROBES + [" ".join(TEXTS) * 3], padding=True, truncation=True,
                      max_length=16, return_tensors="pt")
        assert _named(got) == {k: want[k].tolist() for k in theirs.model_input_names}


def test_texts_cut_by_max_len_are_counted_with_the_special_tokens(dirs, capsys):
    tok = read_checkpoint(dirs["bert"], task="classify").tokenizer
    cfg = get_task("classify").config(arch="bert", init="x", max_len=9, labels=["a", "b"])
    whole = [len(ids) for ids, _ in tok.encode_for_model(TEXTS, 1 << 30)]  # [CLS] ... [SEP]
    cut = sum(n > 9 for n in whole)
    assert 0 < cut < len(TEXTS)
    inputs = _inputs(cfg, tok, TEXTS, "test texts")
    assert inputs == tok.encode_for_model(TEXTS, 9)
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {cut} of the {len(TEXTS)} test texts are longer than --max-len 9 tokens, the "
        f"checkpoint's special tokens included: the model reads the first 9 of each, and the "
        f"rest plays no part"]


@pytest.mark.parametrize("name", ["bert", "roberta"])
def test_a_padded_batch_predicts_what_each_text_alone_does(dirs, name):
    ck = read_checkpoint(dirs[name], task="classify")
    model = BertClassifier.from_encoder(ck.model, 3).eval()
    encoded = ck.tokenizer.encode_for_model(PROBES, 64)
    pad = Padding(ck.tokenizer.pad_id, ck.tokenizer.padding_side, ck.tokenizer.token_type_ids)
    with torch.no_grad():
        batch = model(*pad.pad(encoded))
        alone = torch.cat([model(*pad.pad([e])) for e in encoded])
    assert_close(batch, alone, **TOL)


@pytest.mark.slow  # trains and resumes a run
def test_a_trained_run_loads_predicts_evaluates_and_resumes_without_dir(dirs, tmp_path,
                                                                        capsys):
    import shutil

    src = tmp_path / "bert"
    shutil.copytree(dirs["bert"], src)
    run = _train({**dirs, "bert": src}, "bert", tmp_path / "run")
    model, tok = attnlab.load(run)
    assert isinstance(model, BertClassifier) and isinstance(tok, HFTokenizer)
    probes = tmp_path / "probes.txt"
    probes.write_text("\n".join(PROBES) + "\n")
    capsys.readouterr()
    assert main(["predict", str(run), "--input-file", str(probes), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["input"] for r in rows] == PROBES
    assert all(r["prediction"] in ("neg", "pos") for r in rows)
    assert all(abs(sum(r["probabilities"].values()) - 1) < 1e-4 for r in rows)
    assert main(["evaluate", str(run)]) == 0
    assert "test_accuracy" in capsys.readouterr().out
    assert main(["plot", "attention", str(run), "--input", "the cat",
                 "--out", str(tmp_path / "a.png")]) == 0
    classify = attnlab.tasks.get_task("classify")
    maps, x_labels, _ = classify.runtime().attention_maps(
        classify, run, attnlab.loading.check_run_dir(run)[1], "the cat")
    assert (x_labels[0], x_labels[-1], maps[0].shape[-1]) == ("[CLS]", "[SEP]", len(x_labels))
    assert main(["view", str(run), "--input", "the cat", "--out", str(tmp_path / "v.html")]) == 0
    shutil.rmtree(src)  # --resume reads the run's own checkpoint and tokenizer, never DIR
    assert main(["train", "classify", "--out", str(run), "--resume", "--max-steps", "6"]) == 0
    assert attnlab.loading.check_run_dir(run)[1].max_steps == 6


@pytest.mark.slow
@pytest.mark.parametrize("name, cls, extra", [
    ("bert", "BertForSequenceClassification", []),
    ("roberta", "RobertaForSequenceClassification", []),
    # no pooler in the checkpoint: --pooling cls gives the family's own head (#37)
    ("distilbert", "DistilBertForSequenceClassification", ["--pooling", "cls"]),
    ("roberta-mean", "RobertaForSequenceClassification", ["--pooling", "cls"]),
])
def test_export_gives_the_runs_logits_in_transformers(dirs, tmp_path, name, cls, extra):
    run = _train(dirs, name, tmp_path / "run", *extra)
    out = tmp_path / "hf"
    assert main(["export", str(run), "--hf", str(out)]) == 0
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(out).eval()
    theirs = transformers.AutoTokenizer.from_pretrained(out)
    model, ours = attnlab.load(run)
    assert type(hf).__name__ == cls
    assert hf.config.id2label == {0: "neg", 1: "pos"}
    assert hf.config.label2id == {"neg": 0, "pos": 1}
    inputs = theirs(PROBES, padding=True, truncation=True, max_length=64, return_tensors="pt")
    pad = Padding(ours.pad_id, ours.padding_side, ours.token_type_ids)
    mine = pad.pad(ours.encode_for_model(PROBES, 64))
    assert _named(mine) == {k: inputs[k].tolist() for k in theirs.model_input_names}
    with torch.no_grad():
        assert_close(hf(**inputs).logits, model(*mine), **TOL)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["roberta-mean", "distilbert"])
def test_export_of_a_mean_pooled_run_is_refused_in_one_line(dirs, tmp_path, capsys, name):
    run = _train(dirs, name, tmp_path / "run")
    capsys.readouterr()
    out = tmp_path / "hf"
    assert main(["export", str(run), "--hf", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "mean" in err and "first token" in err, err
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("name, head", [("distilbert", "relu"), ("roberta-mean", "tanh")])
def test_pooling_cls_without_a_pooler_starts_a_new_head_on_the_first_token(
        dirs, tmp_path, monkeypatch, capsys, name, head):
    seen = _capture(monkeypatch)
    run = _train(dirs, name, tmp_path / "run", "--pooling", "cls")
    cfg = attnlab.loading.check_run_dir(run)[1]
    assert cfg.pooling == "cls" and "no pooler" not in capsys.readouterr().err
    hf = transformers.AutoModel.from_pretrained(dirs[name]).eval()
    with torch.no_grad():
        first = hf(**_hf_inputs(seen["batch"])).last_hidden_state[:, 0]  # (B, D)
    model, _ = attnlab.load(run)
    assert model.config.pooler_activation == head
    # the new dense layer was drawn at step 0 as transformers draws one (std 0.02, bias 0):
    # the run's logits are the checkpoint's first state through it and the new classifier
    weight, bias = seen["head"]
    pooler = seen["pooler"]
    act = torch.relu if head == "relu" else torch.tanh
    assert_close(seen["logits"], act(first @ pooler[0].T + pooler[1]) @ weight.T + bias, **TOL)
    assert pooler[0].std().item() == pytest.approx(0.02, rel=0.2) and not pooler[1].any()


def test_an_untyped_pooling_of_a_checkpoint_without_a_pooler_is_mean_and_said(
        dirs, tmp_path, capsys):
    run = _train(dirs, "distilbert", tmp_path / "run")
    err = capsys.readouterr().err
    assert attnlab.loading.check_run_dir(run)[1].pooling == "mean"
    said = [line for line in err.splitlines() if line.startswith("note: --pooling mean")]
    assert len(said) == 1 and "--pooling cls" in said[0], err
    assert "DistilBertForSequenceClassification" in said[0]


def test_a_head_whose_activation_is_not_the_familys_is_refused_by_to_hf():
    from attnlab.interop.bert_classify import classifier_to_hf

    for arch, act in (("bert", "relu"), ("distilbert", "tanh")):
        ours = BertClassifier(2, vocab_size=40, model_dim=16, num_heads=2, num_layers=1,
                              dim_feedforward=32, type_vocab_size=0, pooler_activation=act)
        with pytest.raises(ValueError, match=f"{arch}'s classification head applies"):
            classifier_to_hf(ours, model_type=arch, labels=["a", "b"])


def _encoder_state(dir_):
    return read_checkpoint(dir_, task="classify").model.state_dict()


def test_freeze_encoder_leaves_the_encoder_bit_identical(dirs, tmp_path):
    run = _train(dirs, "bert", tmp_path / "run", "--freeze", "encoder")
    model, _ = attnlab.load(run)
    before = _encoder_state(dirs["bert"])
    after = model.bert.state_dict()
    for key, value in before.items():
        if not key.startswith("pooler."):  # the pooler is the head's first layer
            assert torch.equal(after[key], value), key
    assert not torch.equal(after["pooler.weight"], before["pooler.weight"])


def test_freeze_all_but_last_1_trains_only_the_last_block_and_the_head(dirs, tmp_path):
    run = _train(dirs, "bert", tmp_path / "run", "--freeze", "all-but-last-1")
    model, _ = attnlab.load(run)
    before, after = _encoder_state(dirs["bert"]), model.bert.state_dict()
    frozen = [k for k in before if not k.startswith(("encoder.layers.1.", "pooler."))]
    assert frozen and all(torch.equal(after[k], before[k]) for k in frozen)
    assert not torch.equal(after["encoder.layers.1.norm2.weight"],
                           before["encoder.layers.1.norm2.weight"])


@pytest.mark.slow
def test_lora_trains_only_adapters_and_head_and_the_merged_model_gives_their_outputs(
        dirs, tmp_path, monkeypatch):
    tok = read_checkpoint(dirs["roberta"], task="classify").tokenizer
    probe = Padding(tok.pad_id, tok.padding_side, tok.token_type_ids).pad(
        tok.encode_for_model(PROBES, 64))
    seen = _capture(monkeypatch, at_step=3, probe=probe)  # after the last of 4 steps
    run = _train(dirs, "roberta", tmp_path / "run", "--lora-rank", "2")
    assert seen["trainable"] and all(  # the adapters and the head (pooler, classifier)
        ".lora_" in n or n.startswith(("classifier.", "bert.pooler.")) for n in seen["trainable"])
    assert any(".lora_" in n for n in seen["trainable"])
    model, _ = attnlab.load(run)  # the adapters merged into the weights: an ordinary model
    assert not any("lora" in n for n, _ in model.named_parameters())
    before, after = _encoder_state(dirs["roberta"]), model.bert.state_dict()
    # only attention was adapted, and the head's pooler trained
    untouched = [k for k in before if "self_attn" not in k and not k.startswith("pooler.")]
    assert untouched and all(torch.equal(after[k], before[k]) for k in untouched)
    assert not torch.equal(after["encoder.layers.0.self_attn.o_proj.weight"],
                           before["encoder.layers.0.self_attn.o_proj.weight"])
    assert_close(_eval_logits(model, *probe), seen["probe"], **TOL)


def test_lora_trains_a_new_head_on_the_first_token_whole(dirs, tmp_path, monkeypatch):
    """DistilBERT has no pooler: ``--pooling cls`` draws its head's first layer new, and LoRA
    trains it with the classifier (a frozen random layer would be a head that cannot learn)."""
    seen = _capture(monkeypatch)
    _train(dirs, "distilbert", tmp_path / "run", "--pooling", "cls", "--lora-rank", "2")
    assert {"bert.pooler.weight", "bert.pooler.bias", "classifier.weight"} <= set(
        seen["trainable"])


@pytest.mark.slow
@pytest.mark.parametrize("own", [False, True])
def test_a_run_from_a_classify_run_starts_from_its_weights_and_tokenizer(dirs, tmp_path,
                                                                         monkeypatch, own):
    if own:  # attnlab's own encoder and word tokenizer
        source = tmp_path / "source"
        assert main(["train", "classify", "--data", str(dirs["data"]), "--out", str(source),
                     "--max-steps", "2", "--model-dim", "16", "--num-layers", "1"]) == 0
    else:
        source = _train(dirs, "roberta", tmp_path / "source")
    seen = _capture(monkeypatch)
    run = _train({**dirs, "run": source}, "run", tmp_path / "run")
    cfg = attnlab.loading.check_run_dir(run)[1]
    assert (cfg.arch, cfg.init) == ("transformer" if own else "roberta", str(source.resolve()))
    model, tok = attnlab.load(source)
    assert isinstance(tok, HFTokenizer) != own
    assert_close(seen["logits"], _eval_logits(model, *seen["batch"][:-1]), **TOL)


@pytest.mark.slow
def test_a_run_from_a_run_with_other_labels_keeps_all_but_the_heads_last_layer(dirs, tmp_path):
    source = _train(dirs, "bert", tmp_path / "source")
    data = tmp_path / "three.csv"
    data.write_text("text,label\n" + "".join(f'"{TEXTS[i % 5]} {i}",{"abc"[i % 3]}\n'
                                               for i in range(45)))
    run = _train({**dirs, "run": source, "data": data}, "run", tmp_path / "run", "--lr", "1e-9",
                 "--freeze", "encoder")
    before, after = attnlab.load(source)[0].state_dict(), attnlab.load(run)[0].state_dict()
    assert after["classifier.weight"].shape == (3, 32)
    body = [k for k in before if not k.startswith(("classifier.", "bert.pooler."))]
    assert body and all(torch.equal(after[k], before[k]) for k in body)


def _refused(argv, capsys, out, *named):
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("attnlab: error:"), err
    for text in named:
        assert text in err, (text, err)
    assert not out.exists()


@pytest.mark.parametrize("extra, named", [
    (["--model-dim", "64"], ["--model-dim 64", "model_dim 32", "drop --model-dim"]),
    (["--num-layers", "3"], ["--num-layers 3", "num_layers 2"]),
    (["--pooling", "mean"], ["--pooling mean", "pooling cls"]),
    (["--tokenizer", "bpe"], ["--tokenizer", "not with --init", "checkpoint's own tokenizer"]),
    (["--vocab-size", "500"], ["--vocab-size 500", "vocab_size 90"]),
    (["--set-column", "text"], ["--set-column", "not with --init"]),
    (["--max-len", "65"], ["--max-len 65", "at most 64 tokens"]),
    (["--lora-rank", "33"], ["--lora-rank 33", "above the model width"]),
    (["--freeze", "all-but-last-3"], ["--freeze all-but-last-3", "2 blocks"]),
])
def test_flags_that_disagree_with_the_checkpoint_are_refused(dirs, tmp_path, capsys, extra,
                                                             named):
    out = tmp_path / "run"
    _refused(["train", "classify", "--init", str(dirs["bert"]), "--data", str(dirs["data"]),
              "--out", str(out), *extra], capsys, out, *named)


def _broken(dirs, tmp_path, how):
    import shutil

    d = tmp_path / "broken"
    shutil.copytree(dirs["bert"], d)
    weights = d / "model.safetensors"
    if how == "truncated":
        weights.write_bytes(weights.read_bytes()[:-100])
    elif how == "gpt2":
        config = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**config, "model_type": "gpt2"}))
    elif how == "small vocabulary":  # an embedding of fewer rows than the tokenizer has ids
        config = transformers.BertConfig.from_pretrained(d)
        config.vocab_size = 50
        transformers.BertModel(config).save_pretrained(d)
    elif how == "fewer layers":  # config.json of 1 layer beside the weights of 2
        config = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 1}))
    elif how == "heads":  # 32 wide, in 5 heads
        config = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**config, "num_attention_heads": 5}))
    elif how == "decoder":
        config = transformers.BertConfig.from_pretrained(d)
        config.is_decoder = True
        transformers.BertModel(config).save_pretrained(d)
    return d


@pytest.mark.parametrize("how, named", [
    ("truncated", ["model.safetensors is not a readable safetensors file"]),
    ("gpt2", ["model_type 'gpt2' is not supported for classify", "supported: bert, roberta"]),
    ("small vocabulary", ["the tokenizer has 90 ids", "only 50 rows"]),
    ("decoder", ["is_decoder=True", "not supported"]),
    ("heads", ["config.json: hidden_size 32 is not divisible by num_attention_heads 5"]),
    ("fewer layers", ["holds tensors that", "config.json does not describe",
                      "encoder.layer.1.attention"]),
])
def test_a_checkpoint_attnlab_cannot_use_is_refused_before_the_run_directory(
        dirs, tmp_path, capsys, how, named):
    out = tmp_path / "run"
    _refused(["train", "classify", "--init", str(_broken(dirs, tmp_path, how)),
              "--data", str(dirs["data"]), "--out", str(out)], capsys, out, *named)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
@pytest.mark.parametrize("task, save, width, heads", [
    ("lm", save_gpt2, "n_embd 32", "n_head"),
    ("translate", save_marian, "d_model 16", "encoder_attention_heads")])
def test_a_config_json_whose_width_its_heads_do_not_divide_is_refused_in_its_own_keys(
        tmp_path, capsys, task, save, width, heads):
    """GPT-2 and Marian said "--model-dim (32) must be divisible by --num-heads (5)", flags
    the user never gave, as BERT did before its own refusal (the case "heads" above)."""
    import csv

    d = save(tmp_path / "hf")
    config = json.loads((d / "config.json").read_text())
    wrong = {"n_head": 5} if task == "lm" else {"encoder_attention_heads": 3,
                                                 "decoder_attention_heads": 3}
    (d / "config.json").write_text(json.dumps({**config, **wrong}))
    data = tmp_path / ("corpus.txt" if task == "lm" else "pairs.csv")
    with open(data, "w", newline="", encoding="utf-8") as f:
        if task == "lm":
            f.write("\n".join(CORPUS))
        else:
            csv.writer(f).writerows([("source", "target"), *((t, t) for t in CORPUS)])
    out = tmp_path / "run"
    _refused(["train", task, "--init", str(d), "--data", str(data), "--out", str(out)],
             capsys, out, f"--init {d}: ", f"{width} is not divisible by {heads} "
             f"{wrong[heads]}", "config.json")


def test_a_pretrained_arch_without_init_is_refused(dirs, tmp_path, capsys):
    from attnlab.runs import write_yaml

    out, config = tmp_path / "run", tmp_path / "c.yaml"
    write_yaml(config, {"arch": "bert"})
    _refused(["train", "classify", "--config", str(config), "--data", str(dirs["data"]),
              "--out", str(out)], capsys, out, "arch 'bert'", "--init")


def test_export_of_a_run_of_attnlabs_own_encoder_is_refused(dirs, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "classify", "--data", str(dirs["data"]), "--out", str(run),
                 "--max-steps", "2", "--model-dim", "16", "--num-layers", "1"]) == 0
    out = tmp_path / "hf"
    _refused(["export", str(run), "--hf", str(out)], capsys, out, "attnlab's own encoder",
             "--init")


def test_freeze_encoder_trains_the_parameters_the_docs_list(dirs, tmp_path, monkeypatch):
    """docs/cli.md's --freeze encoder line lists what trains of a pretrained encoder's
    classifier (the pooler and the classifier layer): exactly those train."""
    from pathlib import Path

    cli = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    bullet = cli.split("- `--freeze encoder`", 1)[1].split("\n- ", 1)[0]
    listed = set(re.findall(r"`([a-z_.]+)\.\*`", bullet))
    assert listed == {"bert.pooler", "classifier"}, bullet
    seen = _capture(monkeypatch)
    _train(dirs, "bert", tmp_path / "run", "--freeze", "encoder")
    assert {n.rsplit(".", 1)[0] for n in seen["trainable"]} == listed
