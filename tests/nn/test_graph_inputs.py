"""What a learner doing the graph attention exercise gets wrong, named in one line: node
features of another width, a vector, integers or a NumPy array; a graph given as a list, as
float edges or with a node that does not exist. Before, these were a matrix product's
"mat1 and mat2 shapes cannot be multiplied", an IndexError, an AttributeError, a cast's
RuntimeError, or a float-mask message that named no edge_index."""
import numpy as np
import pytest
import torch

from attnlab.models import GraphNet
from attnlab.nn import GraphAttention

EDGES = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # a path 0 - 1 - 2


def gat_layer(x, graph):
    return GraphAttention(5, 4, num_heads=2)(x, graph)


def networks():
    return [GraphNet(5, 3, kind=kind, model_dim=4, num_heads=2) for kind in ("gat", "mean", "mlp")]


X_MISTAKES = [
    (torch.randn(3, 4), ValueError, r"x must be node features \(N, in_dim\) or \(B, N, in_dim\) "
                                    r"with in_dim 5, got shape \(3, 4\)"),
    (torch.randn(5), ValueError, r"with in_dim 5, got shape \(5,\)"),
    (torch.randint(2, (3, 5)), TypeError, r"x must be float node features, got torch.int64: "
                                          r"pass x.float\(\)"),
    (np.zeros((3, 5), dtype=np.float32), TypeError, r"x must be a tensor .* got ndarray"),
]


@pytest.mark.parametrize("x, error, message", X_MISTAKES)
def test_node_features_a_layer_cannot_take_are_named(x, error, message):
    with pytest.raises(error, match=message):
        gat_layer(x, EDGES)


@pytest.mark.parametrize("x, error, message", X_MISTAKES)
def test_node_features_a_network_cannot_take_are_named_for_every_kind(x, error, message):
    for model in networks():
        with pytest.raises(error, match=message):
            model(x, torch.ones(3, 3, dtype=torch.bool))


def test_a_graph_that_is_not_a_tensor_is_a_type_error_naming_the_parameter_passed():
    # GraphAttention's parameter is `graph`, GraphNet's `adjacency`: the message names the one
    # the user passed (GraphNet's said "the graph", a name its signature does not have)
    with pytest.raises(TypeError, match=r"^graph must be a tensor, an edge_index \(2, E\) "
                                        r".* got list"):
        gat_layer(torch.randn(3, 5), EDGES.tolist())
    for model in networks()[:2]:  # "mlp" reads no graph
        with pytest.raises(TypeError, match=r"^adjacency must be a tensor, .* got list"):
            model(torch.randn(3, 5), EDGES.tolist())


def test_float_edges_are_named_as_edges_that_must_be_integers():
    """A (2, E) edge_index of floats was refused as "a float mask must hold only 0 and 1,
    got 2": the learner had given no mask."""
    with pytest.raises(ValueError, match=r"got shape \(2, 4\) of torch.float32; an edge_index "
                                         r"\(2, E\) must be integers: edge_index.long\(\)"):
        gat_layer(torch.randn(3, 5), EDGES.float())


@pytest.mark.parametrize("bad", [7, -1])
def test_an_edge_to_no_node_names_that_node_only(bad):
    """It said "names node 7 or 0": both ends of the edges' range, one of them a real node."""
    edges = torch.tensor([[0, bad], [1, 2]])
    with pytest.raises(ValueError, match=rf"^edge_index names node {bad}, outside 0..2 "
                                         rf"\(the graph has 3 nodes\)$"):
        gat_layer(torch.randn(3, 5), edges)
