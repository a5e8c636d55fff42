"""GraphNet from the Python API reads a float adjacency or an edge_index once a pass, not once
a layer: each read of its values is a host synchronisation on a GPU."""
import pytest
import torch

import attnlab.nn.graph as graph_module
from attnlab.models.graph_net import GraphNet


def _counting(monkeypatch, name):
    calls = []
    original = getattr(graph_module, name)

    def counted(graph, *args, **kwargs):
        if graph.dtype != torch.bool:  # a value read: a bool mask is only used as a mask
            calls.append(graph.dtype)
        return original(graph, *args, **kwargs)

    monkeypatch.setattr(graph_module, name, counted)
    return calls


@pytest.mark.parametrize("kind", ["gat", "mean"])
@pytest.mark.parametrize("form", ["float", "edge_index"])
def test_a_three_layer_net_reads_the_graph_once(monkeypatch, kind, form):
    torch.manual_seed(0)
    model = GraphNet(5, 3, kind=kind, model_dim=4, num_heads=2, num_layers=3).eval()
    x = torch.randn(6, 5)
    a = torch.rand(6, 6) < 0.4
    expected = model(x, a)
    graph = a.float() if form == "float" else a.nonzero().T.flip(0)
    calls = _counting(monkeypatch, "as_bool_mask" if form == "float" else "adjacency_from_edges")
    torch.testing.assert_close(model(x, graph), expected)
    assert len(calls) == 1
    if kind == "gat":
        calls.clear()
        for got, want in zip(model.get_attention_maps(x, graph), model.get_attention_maps(x, a)):
            torch.testing.assert_close(got, want)
        assert len(calls) == 1
