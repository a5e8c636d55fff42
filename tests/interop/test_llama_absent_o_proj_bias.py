"""A Llama directory with ``attention_bias: true`` (and no ``mlp_bias``) whose files hold no
``o_proj.bias`` tensors: ``transformers``' ``from_pretrained`` starts each absent bias at zero
(its LOAD REPORT lists them as MISSING), which is what attnlab's q/k/v biases alone hold, so
attnlab reads the directory with transformers' logits (atol 1e-5, rtol 1e-5: the weights are
copied), where it refused it as lacking tensors. A q/k/v bias absent (which transformers also
zeroes, untrained) holds values attnlab cannot know: still refused, naming the tensors."""
import pytest
import torch
from safetensors.torch import load_file, save_file
from torch.testing import assert_close

from attnlab.cli import main
from attnlab.errors import UsageError
from attnlab.interop.checkpoint import read_checkpoint

from .conftest import transformers
from .test_llama_family import save_family

pytestmark = pytest.mark.slow  # builds and loads transformers models


def _without(d, part, *, form):
    """``d``'s weights less the biases of ``part`` (``o_proj``, ``q_proj``), stored as
    ``form`` (``safetensors``, or ``bin``: ``pytorch_model.bin``, which transformers reads)."""
    weights = load_file(d / "model.safetensors")
    kept = {k: v for k, v in weights.items() if not k.endswith(f"{part}.bias")}
    assert len(kept) == len(weights) - 2  # two layers
    (d / "model.safetensors").unlink()
    if form == "bin":
        torch.save(kept, d / "pytorch_model.bin")
    else:
        save_file(kept, d / "model.safetensors", metadata={"format": "pt"})
    return d


@pytest.mark.parametrize("form", ["safetensors", "bin"])
def test_absent_o_proj_biases_read_as_transformers_zeros(form, tmp_path, capsys):
    d = _without(save_family(tmp_path / "llama", "llama", attention_bias=True), "o_proj",
                 form=form)
    hf = transformers.AutoModelForCausalLM.from_pretrained(d).eval()
    assert all(not layer.self_attn.o_proj.bias.any() for layer in hf.model.layers)
    assert hf.model.layers[0].self_attn.q_proj.bias.any()  # the q/k/v biases are read
    x = torch.randint(0, hf.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(0))
    ours = read_checkpoint(d, task="lm").model.eval()
    with torch.no_grad():
        assert_close(ours(x), hf(x).logits, atol=1e-5, rtol=1e-5)
    # and train lm --init takes it (its check of the files before the run directory)
    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog\n" * 20, encoding="utf-8")
    capsys.readouterr()
    assert main(["train", "lm", "--init", str(d), "--data", str(text), "--out",
                 str(tmp_path / "tuned"), "--max-steps", "1", "--block-size", "16",
                 "--batch-size", "4", "--threads", "1"]) == 0


@pytest.mark.parametrize("form", ["safetensors", "bin"])
def test_absent_q_proj_biases_are_refused_naming_them(form, tmp_path):
    d = _without(save_family(tmp_path / "llama", "llama", attention_bias=True), "q_proj",
                 form=form)
    with pytest.raises(UsageError) as e:
        read_checkpoint(d, task="lm")
    assert "lacks tensors" in str(e.value)
    assert "model.layers.0.self_attn.q_proj.bias" in str(e.value)
