"""An lm run exported (``attnlab export RUN --hf OUT``), read by transformers, and trained on
with ``attnlab train lm --init OUT``: the new run starts from the exported run's logits
(float32, atol = rtol = 1e-5: the weights are copied), on the ids its own tokenizer gives, as
``AutoTokenizer`` reads OUT. GPT-2's block and the Llama family's (with q/k/v biases, written
as Llama's ``attention_bias``)."""
import pytest
import torch
from torch.testing import assert_close

import attnlab
from attnlab.cli import main

from .test_init_lm import TEXT, _logits, _train

TOL = dict(atol=1e-5, rtol=1e-5)
SMALL = ["--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
         "--dim-feedforward", "32"]
PROBE = "the cat sat on the mat."


@pytest.mark.slow
@pytest.mark.parametrize("arch", [[], ["--arch", "llama", "--qkv-bias"]], ids=["gpt2", "llama"])
def test_train_init_of_an_export_starts_from_the_runs_logits(arch, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    text = tmp_path / "t.txt"
    text.write_text(TEXT, encoding="utf-8")
    first, out = tmp_path / "run", tmp_path / "hf"
    _train(monkeypatch, first, "--data", str(text), "--tokenizer", "word", *SMALL, *arch,
           ids=torch.tensor([[5, 6, 7]]))
    assert main(["export", str(first), "--hf", str(out)]) == 0
    model, tokenizer = attnlab.load(first)
    ids = tokenizer.encode(PROBE)
    assert AutoTokenizer.from_pretrained(out)(PROBE)["input_ids"] == ids
    x = torch.tensor([ids])
    with torch.no_grad():
        assert_close(AutoModelForCausalLM.from_pretrained(out).eval()(x).logits,
                     _logits(model, x), **TOL)
    second = _train(monkeypatch, tmp_path / "again", "--init", str(out), "--data", str(text),
                    ids=x)
    assert_close(second.first, _logits(model, x), **TOL)
    again, its_tokenizer = attnlab.load(tmp_path / "again")
    assert its_tokenizer.encode(PROBE) == ids
