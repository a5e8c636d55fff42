"""GraphNet's layers: the mean-neighbour layer is the mean over N(i) ∪ {i}, whatever form the
adjacency comes in (with or without its self-loops, bool or 0/1 floats), in the model's dtype."""
import torch

from attnlab.models.graph_net import GraphNet

ADJACENCY = torch.tensor([[0, 1, 0, 0],   # a path 0 - 1 - 2, node 3 alone
                          [1, 0, 1, 0],
                          [0, 1, 0, 0],
                          [0, 0, 0, 0]], dtype=torch.bool)


def mean_net():
    torch.manual_seed(0)
    return GraphNet(3, 2, kind="mean", model_dim=4, num_layers=1).eval()


def test_mean_is_over_the_neighbours_and_the_node_once():
    """A self-loop given in the adjacency counted the node twice (node 0: (2 x0 + x1) / 3,
    not (x0 + x1) / 2), so the same graph gave other logits with its self-loops written out."""
    model, x = mean_net(), torch.randn(4, 3)
    by_hand = torch.stack([(x[0] + x[1]) / 2, (x[0] + x[1] + x[2]) / 3, (x[1] + x[2]) / 2, x[3]])
    expected = model.layers[0].lin(by_hand)
    looped = ADJACENCY | torch.eye(4, dtype=torch.bool)
    for adjacency in (ADJACENCY, looped, looped.float()):
        torch.testing.assert_close(model(x, adjacency), expected)


def test_mean_runs_in_the_models_dtype():
    """A float64 model failed: the adjacency was made float32 whatever x was."""
    x = torch.randn(4, 3)
    expected = mean_net()(x, ADJACENCY)
    got = mean_net().double()(x.double(), ADJACENCY)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got.float(), expected)
