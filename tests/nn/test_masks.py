"""Masks: shapes, the True = may-attend convention, and masks as graph structure."""
import re

import numpy as np
import pytest
import torch
from torch.testing import assert_close

import attnlab.nn as an


@pytest.mark.parametrize("shape,expected", [
    ((5, 5), (1, 1, 5, 5)),  # (T, T): one mask for every sample and head
    ((2, 5, 5), (2, 1, 5, 5)),  # (B, T, T): per sample, shared by heads
    ((2, 3, 5, 5), (2, 3, 5, 5)),  # already (B, H, T, T)
])
def test_expand_mask_shapes(shape, expected):
    mask = torch.rand(shape) < 0.5
    expanded = an.expand_mask(mask)
    assert expanded.shape == expected
    assert torch.equal(expanded.reshape(shape), mask)


@pytest.mark.parametrize("shape", [(5,), ()])
def test_expand_mask_rejects_fewer_than_two_dims(shape):
    with pytest.raises(ValueError, match=re.escape(f"got shape {shape}")):
        an.expand_mask(torch.ones(shape, dtype=torch.bool))


def test_causal_mask_lets_each_position_see_itself_and_the_past():
    assert an.causal_mask(4).int().tolist() == [
        [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1],
    ]
    assert an.causal_mask(4).dtype == torch.bool


def test_window_mask_is_a_band():
    assert an.window_mask(5, 1).int().tolist() == [
        [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [0, 1, 1, 1, 0], [0, 0, 1, 1, 1], [0, 0, 0, 1, 1],
    ]
    assert an.window_mask(3, 0).equal(torch.eye(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="radius must be >= 0, got -1"):
        an.window_mask(3, -1)


def test_padding_mask_from_lengths_and_from_ids_agree():
    from_lengths = an.padding_mask(torch.tensor([3, 1, 4]), 5)
    ids = torch.tensor([[7, 8, 9, 0, 0], [5, 0, 0, 0, 0], [4, 4, 4, 4, 0]])
    from_ids = an.padding_mask(ids, pad_id=0)
    assert from_lengths.shape == from_ids.shape == (3, 1, 1, 5)
    assert from_lengths.equal(from_ids)
    assert from_lengths[:, 0, 0].int().tolist() == [
        [1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 0],
    ]
    assert an.padding_mask(torch.tensor([2, 4])).shape == (2, 1, 1, 4)  # max_len = longest


def test_padding_mask_rejects_length_beyond_max_len():
    with pytest.raises(ValueError, match=r"length \(6\) exceeds max_len \(5\)"):
        an.padding_mask(torch.tensor([3, 6]), 5)



def test_padding_mask_takes_lengths_and_ids_as_lists():
    """padding_mask([3, 1], 4), as one writes lengths, was an AttributeError ('list' object has
    no attribute 'ndim')."""
    assert an.padding_mask([3, 1], 4).equal(an.padding_mask(torch.tensor([3, 1]), 4))
    assert an.padding_mask([[7, 0]], pad_id=0)[:, 0, 0].tolist() == [[True, False]]


def test_padding_mask_refuses_fractional_lengths():
    """A length of 2.5 kept 3 positions (pos < 2.5): a mask for a length nobody gave."""
    with pytest.raises(ValueError, match=r"^lengths must be whole numbers, got \[3.0, 2.5\]$"):
        an.padding_mask(torch.tensor([3.0, 2.5]), 4)
    assert an.padding_mask(torch.tensor([3.0, 2.0]), 4).equal(an.padding_mask([3, 2], 4))

def test_integer_mask_means_the_same_as_bool_mask():
    """The course builds masks of 0s and 1s; 1 = may attend, as True."""
    mha = an.MultiheadAttention(8, 8, 2)
    x = torch.randn(2, 4, 8)
    bool_mask = an.causal_mask(4)
    for return_attention in (False, True):
        as_int = mha(x, bool_mask.long(), return_attention)
        as_bool = mha(x, bool_mask, return_attention)
        if return_attention:
            as_int, as_bool = as_int[1], as_bool[1]
        assert_close(as_int, as_bool, atol=0.0, rtol=0.0)


def test_adjacency_matrix_as_mask_is_graph_attention():
    """A graph's adjacency matrix (with self-loops) as the mask: each node attends only to its
    neighbours, so non-neighbours get exactly zero weight and do not change its output."""
    adjacency = torch.tensor([  # a path 0 - 1 - 2 - 3, and node 4 joined to 0
        [1, 1, 0, 0, 1],
        [1, 1, 1, 0, 0],
        [0, 1, 1, 1, 0],
        [0, 0, 1, 1, 0],
        [1, 0, 0, 0, 1],
    ], dtype=torch.bool)
    mha = an.MultiheadAttention(8, 8, 2)
    x = torch.randn(1, 5, 8)
    o, weights = mha(x, adjacency, return_attention=True)
    assert_close(weights.masked_fill(adjacency, 0.0), torch.zeros_like(weights), atol=0.0, rtol=0.0)
    assert (weights[:, :, adjacency] > 0).all()
    assert_close(weights.sum(-1), torch.ones(1, 2, 5), atol=1e-6, rtol=0.0)

    changed = x.clone()
    changed[0, 3] += 10.0  # node 3 is not a neighbour of nodes 0, 1 and 4
    o_changed = mha(changed, adjacency)
    assert_close(o_changed[0, [0, 1, 4]], o[0, [0, 1, 4]], atol=1e-6, rtol=1e-6)
    assert not torch.allclose(o_changed[0, 2], o[0, 2])


@pytest.mark.parametrize("blocked", [float("-inf"), -1e9, 0.5])
def test_an_additive_float_mask_is_refused_not_read_backwards(blocked):
    """torch's float attn_mask is added to the scores (0 = attend, -inf = blocked); read as a
    0/1 mask, every query once put all its weight on the key it meant to block."""
    from attnlab.nn import MultiheadAttention, scaled_dot_product

    q = k = v = torch.randn(1, 3, 4)
    additive = torch.tensor([0.0, 0.0, blocked])
    with pytest.raises(ValueError, match="a float mask must hold only 0 and 1"):
        scaled_dot_product(q, k, v, additive)
    with pytest.raises(ValueError, match="`mask == 0` in attnlab's convention"):
        MultiheadAttention(4, 4, 1)(q, additive.expand(3, 3))
    ones = torch.tensor([1.0, 1.0, 0.0])  # a 0/1 float mask is still a mask
    _, attention = scaled_dot_product(q, k, v, ones)
    assert attention[..., 2].abs().max() == 0


@pytest.mark.parametrize("make", [an.causal_mask, lambda T: an.window_mask(T, 1)])
@pytest.mark.parametrize("T", [3.0, True, 0])
def test_a_mask_length_that_is_not_a_positive_integer_is_named(make, T):
    """``causal_mask(3.0)`` failed inside torch.ones: "ones() takes 1 positional argument but
    2 were given"; a 0-d integer tensor (``lengths.max()``) is a length as an int is."""
    with pytest.raises(ValueError, match=re.escape(f"T must be a positive length, got {T!r}")):
        make(T)
    assert torch.equal(make(torch.tensor(3)), make(3))


@pytest.mark.slow
def test_a_float_mask_compiles_without_graph_breaks_and_is_still_checked():
    """The course's ``torch.tril(torch.ones(T, T))`` is a float mask: its 0/1 check read the
    values (a host synchronisation), splitting a compiled block into 7 graphs."""
    import torch._dynamo as dynamo

    block = an.EncoderBlock(8, 2, 16).eval()
    x = torch.randn(2, 4, 8)
    course_mask = torch.tril(torch.ones(4, 4))
    dynamo.reset()
    explained = dynamo.explain(block)(x, mask=course_mask)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)

    compiled = torch.compile(block, fullgraph=True, dynamic=False)
    assert_close(compiled(x, mask=course_mask), block(x, mask=course_mask.bool()))
    additive = torch.zeros(4, 4).masked_fill(course_mask == 0, float("-inf"))
    with pytest.raises(RuntimeError, match="a float mask must hold only 0 and 1"):
        compiled(x, mask=additive)


def test_a_float_mask_of_only_zeros_is_refused_not_read_as_blocking_everything():
    """torch's additive attn_mask of zeros means "attend everywhere"; read as a 0/1 mask it
    blocked every key, and every output was 0 without a word. A graph with no edge, given
    as a float adjacency, is still a graph (each node attends to itself)."""
    from attnlab.nn import GraphAttention, MultiheadAttention, TransformerEncoder, scaled_dot_product

    x = torch.randn(2, 3, 4)
    zeros = torch.zeros(3, 3)
    message = r"^a float mask of only 0s blocks every key .* is mask=None in attnlab$"
    for call in (lambda: scaled_dot_product(x, x, x, zeros),
                 lambda: MultiheadAttention(4, 4, 2)(x, zeros),
                 lambda: MultiheadAttention(4, 4, 2)(x, zeros, return_attention=True),
                 lambda: TransformerEncoder(1, input_dim=4, num_heads=2,
                                            dim_feedforward=8)(x, mask=zeros)):
        with pytest.raises(ValueError, match=message):
            call()
    assert MultiheadAttention(4, 4, 2)(x, zeros + 1).abs().sum() > 0  # a 0/1 mask still works
    assert torch.isfinite(GraphAttention(4, 2)(x[0], zeros)).all()  # no edges: a graph


def _host_reads(run) -> int:
    """How many times ``run()`` reads a tensor's values back to Python (``bool(t)``,
    ``t.item()``, a boolean index's ``nonzero``): each a host synchronisation on a GPU."""
    from torch.utils._python_dispatch import TorchDispatchMode

    reading = {torch.ops.aten._local_scalar_dense.default, torch.ops.aten.nonzero.default}

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += func in reading
            return func(*args, **(kwargs or {}))

    with Count():
        run()
    return Count.n


def test_a_float_mask_is_read_once_per_call_not_twice_in_every_layer():
    """A float mask's values were read in every layer of every forward, by two checks (0/1
    values, not all 0). A stack now reads it once for all its layers, and a single attention
    once, both checks in one read."""
    x, memory = torch.randn(2, 4, 8), torch.randn(2, 5, 8)
    course = torch.tril(torch.ones(4, 4))
    padding = torch.ones(2, 1, 1, 5)
    args = dict(input_dim=8, num_heads=2, dim_feedforward=16)
    encoder = an.TransformerEncoder(3, **args).eval()
    decoder = an.TransformerDecoder(3, **args).eval()
    attention = an.MultiheadAttention(8, 8, 2).eval()
    for run, float_masks in (
            (lambda m: encoder(x, m), 1),
            (lambda m: decoder(x, memory, m, padding if m.dtype != torch.bool else padding.bool(),
                               is_causal=False), 2),
            (lambda m: attention(x, m), 1)):
        # the same call with the masks given as bool, where nothing is read for the mask
        with torch.no_grad():
            extra = _host_reads(lambda: run(course)) - _host_reads(lambda: run(course.bool()))
        assert extra == float_masks


@pytest.mark.parametrize("kind", [list, np.array])
@pytest.mark.parametrize("call", ["scaled_dot_product", "expand_mask", "MultiheadAttention",
                                  "EncoderBlock", "TransformerEncoder", "get_attention_maps",
                                  "TransformerPredictor"])
def test_a_mask_that_is_no_tensor_is_named_as_such(call, kind):
    """The course's mask written as a list or a NumPy array (`mask=[[1, 0], [1, 1]]`) was an
    AttributeError ('list' object has no attribute 'shape', 'ndarray' ... 'is_floating_point')
    from inside the library; it is a TypeError naming the argument and the fix, wherever the
    mask goes in."""
    from attnlab.training import TransformerPredictor

    x = torch.randn(1, 2, 4)
    mask = kind([[1, 0], [1, 1]])
    enc = an.TransformerEncoder(1, input_dim=4, num_heads=1, dim_feedforward=8)
    run = {"scaled_dot_product": lambda: an.scaled_dot_product(x, x, x, mask=mask),
           "expand_mask": lambda: an.expand_mask(mask),
           "MultiheadAttention": lambda: an.MultiheadAttention(4, 4, 1)(x, mask=mask),
           "EncoderBlock": lambda: an.EncoderBlock(4, 1, 8)(x, mask=mask),
           "TransformerEncoder": lambda: enc(x, mask=mask),
           "get_attention_maps": lambda: enc.get_attention_maps(x, mask=mask),
           "TransformerPredictor": lambda: TransformerPredictor(4, 8, 3, 1, 1, 1e-3, 1, 10)(
               x, mask=mask)}[call]
    with pytest.raises(TypeError, match=rf"^mask must be a tensor \(bool or 0/1, True = may "
                                        rf"attend\), got {type(mask).__name__}: pass "
                                        rf"torch.tensor\(mask\)$"):
        run()
