"""``--init DIR`` on a GPU (skipped without one; ``pytest -m cuda``): a run started from each
Hugging Face family (GPT-2, BERT, Marian) trains there in bf16-mixed, and the run it leaves,
read back on the CPU, gives in ``transformers`` (``export --hf``) the logits attnlab gives.

Tiny random checkpoints saved with ``save_pretrained`` (``test_checkpoint``'s builders), as in
the CPU tests; logits compared in float32 on the CPU with atol = rtol = 1e-5.
"""
import json
import math

import pytest
import torch
from torch.testing import assert_close

transformers = pytest.importorskip("transformers")

import attnlab  # noqa: E402
from attnlab.cli import main  # noqa: E402

from .test_checkpoint import CORPUS, save_bert, save_gpt2  # noqa: E402

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

TOL = dict(atol=1e-5, rtol=1e-5)
GPU = ["--accelerator", "gpu", "--devices", "1", "--precision", "bf16-mixed", "--max-steps", "6",
       "--warmup", "1", "--batch-size", "4"]


def _train_on_the_gpu_and_export(task, init, data, tmp_path, *extra):
    """``attnlab train TASK --init INIT`` on the GPU, checked, then ``export --hf``: (run, hf)."""
    out, hf = tmp_path / "run", tmp_path / "hf"
    assert main(["train", task, "--init", str(init), "--data", str(data), "--out", str(out),
                 *GPU, *extra]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == 6
    assert all(math.isfinite(v) for k, v in metrics.items()
               if "loss" in k and isinstance(v, float)), metrics
    assert main(["export", str(out), "--hf", str(hf)]) == 0
    return out, hf


def test_lm_from_gpt2(tmp_path):
    gpt2 = save_gpt2(tmp_path / "gpt2")
    text = tmp_path / "corpus.txt"
    text.write_text("\n".join(CORPUS), encoding="utf-8")
    out, exported = _train_on_the_gpu_and_export("lm", gpt2, text, tmp_path, "--block-size",
                                                 "16", "--val-batches", "2")
    model, tok = attnlab.load(out)
    ids = torch.tensor([tok.encode("the cat sat on the mat.")])
    hf = transformers.GPT2LMHeadModel.from_pretrained(exported).eval()
    with torch.no_grad():
        assert_close(hf(ids).logits, model.eval()(ids), **TOL)


def test_classify_from_bert(tmp_path):
    from attnlab.tasks.classify.runtime import Padding

    bert = save_bert(tmp_path / "bert")
    data = tmp_path / "tiny.csv"
    data.write_text("text,label\n" + "".join(
        f'"{CORPUS[i % len(CORPUS)][:60]} {i}",{"pos" if i % 2 else "neg"}\n' for i in range(40)))
    out, exported = _train_on_the_gpu_and_export("classify", bert, data, tmp_path)
    model, ours = attnlab.load(out)
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(exported).eval()
    texts = ["the cat ran", "hello there, world!"]
    batch = Padding(ours.pad_id, ours.padding_side, ours.token_type_ids).pad(
        ours.encode_for_model(texts, 64))
    theirs = transformers.AutoTokenizer.from_pretrained(exported)
    inputs = theirs(texts, padding=True, truncation=True, max_length=64, return_tensors="pt")
    with torch.no_grad():
        assert_close(hf(**inputs).logits, model.eval()(*batch), **TOL)


def test_translate_from_marian(tmp_path):
    from .test_init_translate import PAIRS, save_marian

    transformers.logging.set_verbosity_error()
    marian = save_marian(tmp_path / "marian", [t for pair in PAIRS for t in pair])
    data = tmp_path / "pairs.csv"
    data.write_text("source,target\n" + "".join(f"{s},{t}\n" for s, t in PAIRS), encoding="utf-8")
    out, exported = _train_on_the_gpu_and_export("translate", marian, data, tmp_path)
    ours, tok = attnlab.load(out)
    hf = transformers.MarianMTModel.from_pretrained(exported).eval()
    theirs = transformers.MarianTokenizer.from_pretrained(exported)
    batch = theirs(["three seven", "nine"], padding=True, return_tensors="pt")
    tgt = torch.tensor(tok.encode_targets(["drei sieben"]) * 2)
    with torch.no_grad():
        assert_close(hf(**batch, decoder_input_ids=tgt).logits,
                     ours.eval()(batch["input_ids"], tgt, src_mask=batch["attention_mask"].bool()),
                     **TOL)
