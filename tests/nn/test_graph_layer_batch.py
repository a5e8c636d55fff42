"""GraphAttention from the Python API: a batch of graphs over one set of node features."""
import pytest
import torch

from attnlab.nn import GraphAttention


@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize("concat", [True, False])
def test_one_x_over_a_batch_of_graphs_is_each_graph_alone(heads, concat):
    # x (N, F) with adjacency (B, N, N): the documented shapes; with 3 heads this raised
    # "The size of tensor a (6) must match the size of tensor b (3)"
    torch.manual_seed(0)
    gat = GraphAttention(5, 2, num_heads=heads, concat=concat).eval()
    path = torch.tensor([[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0]]).bool()
    star = torch.tensor([[0, 1, 1, 1], [1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]).bool()
    x = torch.randn(4, 5)
    out, weights = gat(x, torch.stack([path, star]), return_attention=True)
    assert out.shape == (2, 4, heads * 2 if concat else 2)
    for b, graph in enumerate((path, star)):
        alone, alone_weights = gat(x, graph, return_attention=True)
        torch.testing.assert_close(out[b], alone)
        torch.testing.assert_close(weights[b], alone_weights)
    assert (weights[1][:, 1, 2:] == 0).all()  # star: leaf 1 sees only the hub and itself


@pytest.mark.parametrize("arguments, named", [
    ((5, 2, 0), "num_heads must be a positive integer, got 0"),  # built: outputs (N, 0)
    ((5, 0, 2), "out_dim must be a positive integer, got 0"),  # a reshape error in forward
    ((0, 2, 2), "in_dim must be a positive integer, got 0"),
])
def test_a_layer_of_no_width_or_heads_is_refused_when_built(arguments, named):
    with pytest.raises(ValueError, match=named):
        GraphAttention(*arguments)
