"""What a learner who loaded an anomaly or classify run (``attnlab.load`` gives a
``SequenceClassifier``) sees when the inputs are not what the model takes: a NumPy array
was an ``AttributeError`` about ``is_floating_point`` (the course's ``TransformerPredictor``
already said to pass ``torch.tensor(x)``), and integer features a ``RuntimeError`` from
``nn.Linear`` about mat1 and mat2's dtypes."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab.models import ElementPredictor, SequenceClassifier

SMALL = dict(model_dim=16, num_heads=2, num_layers=1)


def sets_model() -> SequenceClassifier:  # the anomaly task's model: a score per element
    return SequenceClassifier(None, input_dim=4, head="element", positional="none", **SMALL)


def texts_model() -> SequenceClassifier:  # classify's: token ids in, a class per sequence
    return SequenceClassifier(3, vocab_size=20, **SMALL)


@pytest.mark.parametrize("make, x", [
    (sets_model, np.zeros((2, 5, 4), dtype=np.float32)),
    (texts_model, np.array([[4, 5, 6], [7, 8, 0]])),
    (texts_model, [[4, 5, 6]]),
])
def test_a_numpy_array_or_a_list_is_named_with_the_fix(make, x):
    with pytest.raises(TypeError, match=rf"x must be a tensor .*got {type(x).__name__}: "
                                        r"pass torch\.tensor\(x\)"):
        make()(x)


def test_the_classifier_and_the_course_predictor_say_it_alike():
    """One check for both (``attnlab.models.tensor_inputs``): the same words, each model's
    own shapes."""
    x = np.zeros((1, 3, 4), dtype=np.float32)
    said = []
    for model in (sets_model(), ElementPredictor(4, 16, 3, 2, 1)):
        with pytest.raises(TypeError) as e:
            model(x)
        said.append(str(e.value))
    assert all(s.startswith("x must be a tensor (B, T") for s in said)
    assert all(s.endswith("got ndarray: pass torch.tensor(x)") for s in said)


def test_a_numpy_mask_is_named_too():
    with pytest.raises(TypeError, match=r"mask must be a tensor .*got ndarray"):
        sets_model()(torch.zeros(1, 3, 4), mask=np.ones((1, 3), dtype=bool))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_integer_features_are_refused_naming_the_dtype_and_the_fix(dtype):
    x = torch.ones(2, 5, 4, dtype=dtype)
    with pytest.raises(ValueError, match=rf"feature inputs must be floating point \(B, T, 4\), "
                                         rf"got {dtype}: pass x\.float\(\)"):
        sets_model()(x)


def test_the_same_features_as_floats_give_a_score_per_element():
    scores = sets_model()(torch.ones(2, 5, 4, dtype=torch.int64).float())
    assert scores.shape == (2, 5)
