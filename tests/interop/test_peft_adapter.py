"""A ``--lora-rank`` run started from a Hugging Face directory writes ``adapter/`` in peft's
format (``attnlab.interop.peft_adapter``): ``peft.PeftModel.from_pretrained(base, RUN/adapter)``
over the ``--init`` checkpoint gives the logits of the run's model, for every family ``--init``
takes with LoRA (GPT-2, Llama, Qwen2, Qwen3, Mistral; BERT, RoBERTa, DistilBERT; Marian) and
each ``--lora-targets``.

Offline: tiny random checkpoints written with transformers' classes (the other interop tests'
savers). Logits are compared in float32 at atol = rtol = 1e-5; peft must adapt exactly the
modules the adapter holds, and the update must move the logits (else equality says nothing).
"""
import csv
import json

import pytest
import torch
from safetensors.torch import load_file
from torch.testing import assert_close

from .conftest import transformers  # (skips without the hf extra)

peft = pytest.importorskip("peft")

import attnlab  # noqa: E402
from attnlab.cli import main  # noqa: E402

from .test_checkpoint import CORPUS, save_bert, save_gpt2  # noqa: E402
from .test_init_classify import _write_data, save_distilbert, save_pooled_roberta  # noqa: E402
from .test_init_translate import PAIRS, save_marian  # noqa: E402
from .test_llama_family import save_family  # noqa: E402

TOL = dict(atol=1e-5, rtol=1e-5)
STEPS = ["--max-steps", "3", "--warmup", "1", "--lr", "3e-2", "--batch-size", "4",
         "--threads", "1", "--lora-rank", "2", "--lora-alpha", "4"]
# family -> (task, saver, the Hugging Face class the base is read with)
FAMILIES = {
    "gpt2": ("lm", lambda d: save_gpt2(d), "AutoModelForCausalLM"),
    "llama": ("lm", lambda d: save_family(d, "llama"), "AutoModelForCausalLM"),
    "qwen2": ("lm", lambda d: save_family(d, "qwen2"), "AutoModelForCausalLM"),
    "qwen3": ("lm", lambda d: save_family(d, "qwen3"), "AutoModelForCausalLM"),
    "mistral": ("lm", lambda d: save_family(d, "mistral"), "AutoModelForCausalLM"),
    "bert": ("classify", save_bert, "AutoModelForSequenceClassification"),
    "roberta": ("classify", save_pooled_roberta, "AutoModelForSequenceClassification"),
    "distilbert": ("classify", save_distilbert, "AutoModelForSequenceClassification"),
    "marian": ("translate", lambda d: save_marian(d, [t for p in PAIRS for t in p]),
               "MarianMTModel"),
}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("peft_data")
    (root / "corpus.txt").write_text("\n".join(CORPUS), encoding="utf-8")
    _write_data(root / "labels.csv")
    with open(root / "pairs.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("source", "target"), *PAIRS])
    return {"lm": ["--data", str(root / "corpus.txt"), "--block-size", "16"],
            "classify": ["--data", str(root / "labels.csv")],
            "translate": ["--data", str(root / "pairs.csv")]}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root, made = tmp_path_factory.mktemp("peft_bases"), {}
    transformers.logging.set_verbosity_error()

    def get(family):
        if family not in made:
            torch.manual_seed(0)
            made[family] = FAMILIES[family][1](root / family)
        return made[family]
    return get


def _inputs(task, model, generator):
    """Token ids the model and the base both read (no special ids: RoBERTa counts positions
    from its pad id), with the second row padded on the right where the task pads."""
    if task == "lm":
        return {"input_ids": torch.randint(5, 100, (2, 12), generator=generator)}
    if task == "classify":
        ids = torch.randint(5, model.config.vocab_size, (2, 10), generator=generator)
        mask = torch.ones_like(ids)
        mask[1, 7:] = 0
        ids[1, 7:] = model.config.pad_id
        return {"input_ids": ids, "attention_mask": mask}
    src = torch.randint(3, 30, (2, 9), generator=generator)
    tgt = torch.randint(3, 30, (2, 7), generator=generator)
    tgt[:, 0] = model.sos_id
    return {"input_ids": src, "attention_mask": torch.ones_like(src), "decoder_input_ids": tgt}


def _ours(task, model, x):
    with torch.no_grad():
        if task == "lm":
            return model(x["input_ids"])
        if task == "classify":
            return model(x["input_ids"], x["attention_mask"])
        return model(x["input_ids"], x["decoder_input_ids"], src_mask=x["attention_mask"].bool())


def _base(family, init, num_labels):
    cls = getattr(transformers, FAMILIES[family][2])
    extra = {"num_labels": num_labels} if FAMILIES[family][0] == "classify" else {}
    return cls.from_pretrained(init, local_files_only=True, **extra).float().eval()


@pytest.mark.slow  # trains a run per family
@pytest.mark.parametrize("family, targets", [
    ("gpt2", "attention"), ("gpt2", "mlp"), ("llama", "all-linear"), ("qwen2", "attention"),
    ("qwen3", "attention"), ("mistral", "mlp"), ("bert", "all-linear"),
    ("roberta", "attention"), ("distilbert", "mlp"), ("marian", "all-linear")])
def test_peft_loads_the_adapter_over_the_base_with_the_runs_logits(
        family, targets, checkpoints, data, tmp_path):
    task, init = FAMILIES[family][0], checkpoints(family)
    out = tmp_path / "run"
    pooling = ["--pooling", "cls"] if task == "classify" else []  # what a head class reads
    assert main(["train", task, "--init", str(init), "--out", str(out), *data[task], *STEPS,
                 *pooling, "--lora-targets", targets, "--dropout", "0"]) == 0
    config = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert (config["peft_type"], config["r"], config["lora_alpha"]) == ("LORA", 2, 4.0)
    assert config["base_model_name_or_path"] == str(init)
    model = attnlab.load(out)[0].eval()
    labels = model.config.num_classes if task == "classify" else None
    x = _inputs(task, model, torch.Generator().manual_seed(1))
    base = _base(family, init, labels)
    with torch.no_grad():
        before = base(**x).logits.clone()
    adapted = peft.PeftModel.from_pretrained(base, out / "adapter").eval()
    with torch.no_grad():
        theirs = adapted(**x).logits
    ours = _ours(task, model, x)
    assert_close(theirs, ours, **TOL)
    assert not torch.allclose(theirs, before, atol=1e-3)  # the update reaches the logits
    held = {k.removeprefix("base_model.model.").removesuffix(".lora_A.weight")
            for k in load_file(out / "adapter" / "adapter_model.safetensors") if "lora_A" in k}
    lora = {n.removeprefix("base_model.model.") for n, m in adapted.named_modules()
            if hasattr(m, "lora_A") and "default" in m.lora_A}
    assert lora == held  # peft adapts exactly what the run adapted, nothing beside it


@pytest.mark.slow  # trains a run
def test_a_classifier_pooled_by_the_mean_writes_no_adapter_and_says_why(
        checkpoints, data, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "classify", "--init", str(checkpoints("distilbert")), "--out",
                 str(out), *data["classify"], *STEPS, "--pooling", "mean"]) == 0
    assert ("note: no adapter/ for this --lora-rank run: the classifier's head has no Hugging "
            "Face class: this classifier pools the mean of its tokens") in capsys.readouterr().err
    assert not (out / "adapter").exists() and (out / "model.safetensors").is_file()



def _interrupted(checkpoints, data, tmp_path, monkeypatch):
    """A GPT-2 LoRA run stopped by SIGINT after step 2 of 3, from a copy of the base: (the
    copy, the run)."""
    import shutil

    from ..cli.test_checkpoint_last import _interrupt

    init, out = tmp_path / "gpt2", tmp_path / "run"
    shutil.copytree(checkpoints("gpt2"), init)
    _interrupt(monkeypatch, 2, ["train", "lm", "--init", str(init), "--out", str(out),
                                *data["lm"], *STEPS, "--dropout", "0"])
    return init, out


@pytest.mark.slow  # trains and resumes a run
def test_a_resumed_run_writes_the_adapter_without_reading_init_again(
        checkpoints, data, tmp_path, monkeypatch, capsys):
    # --resume never reads DIR again (docs/finetuning.md): a run resumed after DIR was moved
    # away wrote no adapter, saying it had started from an attnlab run
    import shutil

    init, out = _interrupted(checkpoints, data, tmp_path, monkeypatch)
    shutil.rmtree(init)
    capsys.readouterr()
    assert main(["train", "lm", "--out", str(out), "--resume"]) == 0
    assert "no adapter/" not in capsys.readouterr().err
    config = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == str(init)
    assert config["fan_in_fan_out"] is True  # GPT-2's layout, told without DIR
    model = attnlab.load(out)[0].eval()
    x = _inputs("lm", model, torch.Generator().manual_seed(1))
    adapted = peft.PeftModel.from_pretrained(_base("gpt2", checkpoints("gpt2"), None),
                                             out / "adapter").eval()
    with torch.no_grad():
        assert_close(adapted(**x).logits, _ours("lm", model, x), **TOL)


@pytest.mark.slow  # trains and resumes a run
def test_a_checkpoint_that_does_not_say_what_init_was_is_not_called_an_attnlab_run(
        checkpoints, data, tmp_path, monkeypatch, capsys):
    # a checkpoint of an earlier attnlab, resumed after DIR was deleted: nothing tells what
    # DIR was, and the note says so rather than "started from an attnlab run"
    import shutil

    init, out = _interrupted(checkpoints, data, tmp_path, monkeypatch)
    last = out / "checkpoints" / "last.ckpt"
    state = torch.load(last, weights_only=True)
    state.pop("init_kind", None)  # what an earlier attnlab wrote
    torch.save(state, last)
    shutil.rmtree(init)
    capsys.readouterr()
    assert main(["train", "lm", "--out", str(out), "--resume"]) == 0
    err = capsys.readouterr().err
    assert ("note: no adapter/ for this --lora-rank run: --init is no longer on disk and the "
            "checkpoint does not say what it was") in err
    assert "attnlab run" not in err and not (out / "adapter").exists()
