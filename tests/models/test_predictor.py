"""ElementPredictor: symbols are checked where they enter (``predict``, the attention maps), not
in the forward pass, which reads no values."""
import pytest
import torch

from attnlab.models import ElementPredictor


def tiny() -> ElementPredictor:
    torch.manual_seed(0)
    return ElementPredictor(10, 16, 10, num_heads=2, num_layers=1)


@pytest.mark.parametrize("bad, shown", [(10, r"0\.\.10"), (-1, r"-1\.\.9")])
def test_predict_and_attention_maps_refuse_symbols_outside_the_vocabulary(bad, shown):
    model = tiny()
    x = torch.tensor([[0, 9, bad]])
    message = rf"symbols must be in 0\.\.9, got values {shown}$"
    with pytest.raises(ValueError, match=message):
        model.predict(x)
    with pytest.raises(ValueError, match=message):
        model.get_attention_maps(x)
    assert model.predict(x.clamp(0, 9)).shape == (1, 3)


def test_forward_on_the_cpu_still_refuses_an_out_of_range_symbol():
    """Unchecked in forward, an out-of-range symbol is one_hot's own error on the CPU (a
    device-side assert on a GPU), never a silent wrong answer."""
    with pytest.raises(RuntimeError, match="Class values must be"):
        tiny()(torch.tensor([[0, 10]]))


def test_heads_that_do_not_divide_model_dim_are_named_as_the_model_was_called():
    """The course's TransformerPredictor(input_dim, model_dim, num_classes, num_heads, ...) with
    3 heads for width 32 said "embed_dim (32) must be divisible by num_heads (3)"."""
    message = r"^model_dim \(32\) must be divisible by num_heads \(3\)$"
    with pytest.raises(ValueError, match=message):
        ElementPredictor(10, 32, 10, num_heads=3, num_layers=1)
