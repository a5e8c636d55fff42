"""ElementPredictor: symbols are checked where they enter (``predict``, the attention maps), not
in the forward pass, which reads no values."""
import numpy as np
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


def test_predict_and_attention_maps_of_a_list_say_to_make_it_a_tensor():
    for call in (tiny().predict, tiny().get_attention_maps):
        with pytest.raises(TypeError, match=r"x must be a tensor .* got list: pass torch"):
            call([[1, 2, 3]])


def test_the_course_forward_of_a_numpy_array_says_to_make_it_a_tensor():
    """The course calls ``model(x, add_positional_encoding=False)`` on a set of features; a
    NumPy array (as a learner's own features often are) was an AttributeError about
    ``is_floating_point``."""
    features = np.random.default_rng(0).random((2, 5, 10), dtype=np.float32)
    with pytest.raises(TypeError, match=r"^x must be a tensor .* got ndarray: pass "
                                        r"torch.tensor\(x\)$"):
        tiny()(features, add_positional_encoding=False)
    assert tiny()(torch.tensor(features), add_positional_encoding=False).shape == (2, 5, 10)


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


def test_one_hot_inputs_left_as_integers_are_refused_saying_float():
    """The course one-hot encodes with F.one_hot(x, C).float(); without .float() the integer
    (B, T, C) tensor was one-hot encoded again, and the error said "x must be (B, T,
    d_model=16), got shape (1, 3, 10, 16)", a shape the user never made."""
    model = tiny()
    x = torch.tensor([[0, 9, 4]])
    message = (r"^integer inputs are symbols \(B, T\), got shape \(1, 3, 10\); one-hot features "
               r"\(B, T, input_dim\) must be float: F.one_hot\(x, 10\).float\(\)$")
    for call in (model, model.get_attention_maps, model.predict):
        with pytest.raises(ValueError, match=message):
            call(torch.nn.functional.one_hot(x, 10))
    assert torch.equal(model(torch.nn.functional.one_hot(x, 10).float()), model(x))
    with pytest.raises(ValueError, match=r"got shape \(3,\); one sequence \(T,\) is a batch "
                                         r"of one: x\[None\]$"):
        model(x[0])  # was "x must be (B, T, d_model=16), got shape (3, 16)"
    with pytest.raises(ValueError, match=r"got shape \(1, 1, 1, 3\)$"):  # no hint that misleads
        model(x[None, None])


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.uint8])
def test_symbols_of_any_integer_dtype_are_read_as_int64_ones(dtype):
    """Symbols from numpy (int32) or images (uint8) were refused by one_hot's "one_hot is only
    applicable to index tensor of type LongTensor"."""
    model = tiny()
    x = torch.tensor([[0, 9, 4, 2]])
    assert torch.equal(model(x.to(dtype)), model(x))
    assert torch.equal(model.predict(x.to(dtype)), model.predict(x))
