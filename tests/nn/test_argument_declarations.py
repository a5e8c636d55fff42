"""The course constructors of attnlab.nn refuse a bad argument through one declaration of its
range (``attnlab.nn.arguments.BlockArguments``, checked by ``attnlab.settings``), with a
one-line message naming the argument and its value, before any weight is made."""
import pytest

import attnlab.nn as an
from attnlab.nn.arguments import BlockArguments
from attnlab.settings import check_argument

CASES = [
    (lambda: an.MultiheadAttention(0, 16, 4), "input_dim", 0),
    (lambda: an.MultiheadAttention(16, 16, 0), "num_heads", 0),
    (lambda: an.MultiheadAttention(16, 16.0, 4), "embed_dim", 16.0),
    (lambda: an.MultiheadAttention(16, 16, 4, dropout=-0.1), "dropout", -0.1),
    (lambda: an.FeedForward(16, 0), "dim_feedforward", 0),
    (lambda: an.FeedForward(-2, 32), "input_dim", -2),
    (lambda: an.FeedForward(16, 32, 1.5), "dropout", 1.5),
    (lambda: an.EncoderBlock(16, 4, 32, dropout=1.0), "dropout", 1.0),
    (lambda: an.EncoderBlock(16, 4, 32, ff_dropout=1.0), "ff_dropout", 1.0),
    (lambda: an.EncoderBlock(16, 4, 32, attention_dropout=2.0), "attention_dropout", 2.0),
    (lambda: an.DecoderBlock(16, 4, 32, attention_dropout=1.0), "attention_dropout", 1.0),
    (lambda: an.TransformerEncoder(0, input_dim=16, num_heads=4, dim_feedforward=32),
     "num_layers", 0),
    (lambda: an.TransformerDecoder(-1, input_dim=16, num_heads=4, dim_feedforward=32),
     "num_layers", -1),
    (lambda: an.TransformerEncoder.of_layers([]), "num_layers", 0),
]


@pytest.mark.parametrize("build, name, value", CASES, ids=[c[1] for c in CASES])
def test_a_bad_argument_is_refused_by_its_declaration(build, name, value):
    with pytest.raises(ValueError) as declared:
        check_argument(BlockArguments, name, value)
    with pytest.raises(ValueError) as refused:
        build()
    assert str(refused.value) == str(declared.value)
    assert str(refused.value).startswith(f"{name} must be ") and repr(value) in str(refused.value)

