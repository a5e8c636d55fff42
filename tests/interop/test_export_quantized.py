"""An int8 model (``attnlab.nn.quantize``, ``attnlab.load(..., quantize="int8")``) handed to
``to_hf`` is refused in one line naming the int8 layers and what to export instead; it failed
with "'function' object has no attribute 'shape'" (a quantised linear's ``weight`` is a
method returning packed int8)."""
import pytest
from torch import nn

from attnlab.interop import to_hf
from attnlab.models import CausalLM, Seq2SeqTransformer
from attnlab.nn.quantize import quantize


@pytest.mark.parametrize("model", [
    CausalLM(vocab_size=30, model_dim=16, num_heads=2, num_layers=1, max_len=8),
    Seq2SeqTransformer(20, 30, model_dim=16, num_heads=2),
], ids=["lm", "translate"])
def test_to_hf_of_an_int8_model_is_refused_naming_its_layers(model):
    to_hf(model)  # the float model exports
    with pytest.raises(ValueError) as e:
        to_hf(quantize(model))
    message = str(e.value)
    layers = sum(isinstance(m, nn.Linear) for m in model.modules())  # every one is int8
    assert f"to_hf: {layers} linear layers of this model hold int8 weights (attnlab.nn.quantize; " \
        in message
    assert message.endswith("export the float model it was made from")
    assert len(message.splitlines()) == 1
