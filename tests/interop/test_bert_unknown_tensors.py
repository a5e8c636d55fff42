"""A BERT-family directory whose config.json is a base model (``BertModel``: no head) but whose
weights hold a tensor outside the encoder: refused naming it, as GPT-2's, Llama's and Marian's
unknown tensors are (it was read in silence); a task model's head (``classifier.``) is still
left out, and said by the fine-tuned-head note. Tiny random BERT (``test_checkpoint``'s)."""
import pytest
import torch
from safetensors.torch import load_file, save_file

from .conftest import transformers  # noqa: F401  (skips without the hf extra)

from attnlab.errors import UsageError  # noqa: E402
from attnlab.interop.checkpoint import read_checkpoint  # noqa: E402
from tests.interop.test_checkpoint import save_bert  # noqa: E402


def _with_tensor(d, name):
    tensors = load_file(d / "model.safetensors")
    tensors[name] = torch.zeros(3)
    save_file(tensors, d / "model.safetensors", metadata={"format": "pt"})
    return d


def test_a_tensor_outside_a_base_models_encoder_is_refused_naming_it(tmp_path):
    d = _with_tensor(save_bert(tmp_path / "bert"), "projection.weight")
    with pytest.raises(UsageError) as e:
        read_checkpoint(d, task="classify")
    assert "holds tensors that" in str(e.value) and "(projection.weight)" in str(e.value)


def test_the_old_index_buffers_of_a_base_model_are_still_read(tmp_path):
    d = _with_tensor(save_bert(tmp_path / "bert"), "embeddings.position_ids")
    assert read_checkpoint(d, task="classify").model is not None


def test_a_head_beside_a_prefixed_base_models_encoder_is_refused_naming_it(tmp_path):
    # a base model's config.json over a file whose encoder is saved under "bert." (a task
    # model's) and whose head is not: the head is named as in an unprefixed file
    d = save_bert(tmp_path / "bert")
    tensors = {f"bert.{n}": t for n, t in load_file(d / "model.safetensors").items()}
    tensors["classifier.weight"] = torch.zeros(3)
    save_file(tensors, d / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(UsageError, match=r"holds tensors that .* \(classifier.weight\)"):
        read_checkpoint(d, task="classify")
