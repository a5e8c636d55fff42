"""GraphAttention: equal to PyTorch Geometric's GATConv with copied weights (concat and mean
heads, with and without self-loops), permutation equivariant, finite on isolated nodes; the
edge_index and adjacency forms agree; and a Transformer encoder block masked by the adjacency
is attention over the graph.

Tolerance: float32, atol 1e-5 (the two sum the same terms in different orders)."""
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from attnlab.nn import EncoderBlock, GraphAttention, capture
from attnlab.nn.graph import adjacency_from_edges

ATOL = 1e-5


def random_graph(N=9, E=20, seed=0, loops=()):
    """A directed random graph; self-loops only on the nodes ``loops`` names."""
    g = torch.Generator().manual_seed(seed)
    edges = torch.randint(N, (2, E), generator=g)
    edges = edges[:, edges[0] != edges[1]]  # no self-loops given
    edges = torch.unique(edges, dim=1)      # no repeated edge (PyG would count it twice)
    edges = torch.cat([edges, torch.tensor([list(loops)] * 2, dtype=torch.long)], 1)
    return torch.randn(N, 5, generator=g), edges


@pytest.fixture(scope="module", autouse=True)
def pyg_modules_dir(tmp_path_factory):
    """Where PyG writes the module it generates for GATConv: its first GATConv in a process
    renders a jinja template to ``tempfile.gettempdir()/gat_conv_*.py`` (no setting moves
    it) and never removes it; under the session's temporary directory, not /tmp. One folder
    for the session, whichever set-up of this module it is: PyG generates the module once a
    process, so a second set-up (the module's tests split by others) finds it where the first
    put it."""
    where = tmp_path_factory.getbasetemp() / "pyg"
    where.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(where))
        yield where


def copied(gat: GraphAttention, concat: bool, self_loops: bool):
    from torch_geometric.nn import GATConv

    pyg = GATConv(gat.in_dim, gat.out_dim, heads=gat.num_heads, concat=concat,
                  add_self_loops=self_loops)
    with torch.no_grad():
        pyg.lin.weight.copy_(gat.lin.weight)
        pyg.att_src.copy_(gat.att_src[None])
        pyg.att_dst.copy_(gat.att_dst[None])
        pyg.bias.copy_(gat.bias)
    return pyg.eval()


@pytest.mark.slow
@pytest.mark.parametrize("concat", [True, False])
@pytest.mark.parametrize("self_loops", [True, False])
@pytest.mark.parametrize("loops", [(), (2, 5)])
def test_equals_pyg_gatconv_with_copied_weights(concat, self_loops, loops):
    """Self-loops given in the edges: PyG keeps them without add_self_loops and replaces them
    with its own with it; both are the neighbourhood's self-loop here."""
    torch.manual_seed(0)
    x, edges = random_graph(loops=loops)
    gat = GraphAttention(5, 4, num_heads=3, concat=concat, self_loops=self_loops)
    with torch.no_grad():
        gat.bias.normal_()
    pyg = copied(gat, concat, self_loops)
    expected, (pyg_edges, pyg_alpha) = pyg(x, edges, return_attention_weights=True)
    got, weights = gat(x, edges, return_attention=True)
    assert got.shape == expected.shape == (9, 12 if concat else 4)
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)
    # the weight of every edge PyG used, (H, E'), is ours at [head, target, source]
    torch.testing.assert_close(weights[:, pyg_edges[1], pyg_edges[0]], pyg_alpha.T,
                               atol=ATOL, rtol=0)


def test_weights_sum_to_one_over_the_neighbourhood_and_are_zero_elsewhere():
    x, edges = random_graph(seed=1)
    gat = GraphAttention(5, 4, num_heads=2)
    _, weights = gat(x, edges, return_attention=True)
    mask = adjacency_from_edges(edges, 9) | torch.eye(9, dtype=torch.bool)
    assert (weights[:, ~mask] == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 9))


def test_node_order_does_not_matter():
    x, edges = random_graph(seed=2)
    gat = GraphAttention(5, 4, num_heads=2)
    perm = torch.randperm(9, generator=torch.Generator().manual_seed(3))
    inverse = torch.argsort(perm)
    out = gat(x, edges)
    out_permuted = gat(x[perm], inverse[edges])  # node perm[k] is now node k
    torch.testing.assert_close(out_permuted, out[perm], atol=ATOL, rtol=0)


def test_an_isolated_node_gets_a_finite_output():
    x = torch.randn(4, 5)
    edges = torch.tensor([[0, 1], [1, 0]])  # nodes 2 and 3 have no neighbour
    for self_loops in (True, False):
        gat = GraphAttention(5, 3, num_heads=2, self_loops=self_loops)
        out, weights = gat(x, edges, return_attention=True)
        assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert (weights[:, 2] == 0).all()  # without self-loops: nothing to attend to
    torch.testing.assert_close(out[2], gat.bias)  # zero message, only the bias


def test_edge_index_and_adjacency_agree():
    x, edges = random_graph(seed=4)
    gat = GraphAttention(5, 4, num_heads=2)
    adjacency = adjacency_from_edges(edges, 9)
    out = gat(x, edges)
    torch.testing.assert_close(gat(x, adjacency), out)
    torch.testing.assert_close(gat(x, adjacency.float()), out)  # 0/1 floats are a mask too
    batched = gat(torch.stack([x, x]), torch.stack([adjacency, adjacency]))
    torch.testing.assert_close(batched, torch.stack([out, out]))


def test_an_edge_given_twice_is_the_graph_with_it_once():
    """A graph is a set of edges (docs/history.md): GATConv would weigh a repeat twice."""
    x, edges = random_graph(seed=6)
    gat = GraphAttention(5, 4, num_heads=2)
    repeated = torch.cat([edges, edges[:, :3]], 1)
    torch.testing.assert_close(gat(x, repeated), gat(x, edges))


def test_bad_graphs_are_named():
    gat = GraphAttention(5, 4)
    with pytest.raises(ValueError, match="outside 0..2"):
        gat(torch.randn(3, 5), torch.tensor([[0, 5], [1, 0]]))
    with pytest.raises(ValueError, match=r"\(N, N\) = \(3, 3\)"):
        gat(torch.randn(3, 5), torch.ones(4, 4, dtype=torch.bool))
    # an adjacency of 0/1 integers (as masks.md writes one) was read as a broken edge_index
    with pytest.raises(ValueError, match=r"adjacency must be bool or 0/1 floats.*\.bool\(\)"):
        gat(torch.randn(3, 5), torch.tensor([[1, 1, 0], [1, 1, 1], [0, 1, 1]]))


def test_a_transformer_block_masked_by_the_adjacency_attends_over_the_graph():
    """The course's EncoderBlock with the adjacency (and self-loops) as its mask: every weight
    off the graph is 0, and a node's output ignores the nodes that are not its neighbours.
    With no mask it is the same as the complete graph's mask."""
    torch.manual_seed(0)
    x, edges = random_graph(seed=5)
    block = EncoderBlock(input_dim=5, num_heads=1, dim_feedforward=16, dropout=0.0).eval()
    mask = adjacency_from_edges(edges, 9) | torch.eye(9, dtype=torch.bool)
    with capture(block) as cache:
        out = block(x[None], mask)
    weights = cache["self_attn"][0, 0]  # (N, N)
    assert (weights[~mask] == 0).all()
    i = int(torch.nonzero(~mask.all(-1))[0])  # a node with a non-neighbour
    far = ~mask[i]
    moved = x.clone()
    moved[far] += 10 * torch.randn(int(far.sum()), 5)
    torch.testing.assert_close(block(moved[None], mask)[0, i], out[0, i])
    complete = torch.ones(9, 9, dtype=torch.bool)
    torch.testing.assert_close(block(x[None]), block(x[None], complete))


@pytest.mark.slow
def test_pyg_writes_its_generated_gatconv_module_under_the_sessions_temporary_directory(
        pyg_modules_dir):
    from torch_geometric.nn import GATConv

    conv = GATConv(5, 4, heads=3)
    generated = sys.modules[conv.propagate.__module__].__file__
    assert Path(generated).parent == pyg_modules_dir, generated


@pytest.mark.slow
def test_the_generated_module_is_found_when_this_modules_tests_are_split(tmp_path):
    """A session that runs one comparison, then another module's test, then the check above
    (explicit test ids; --dist worksteal) sets this module up twice: the check passes, the
    generated module being in the folder both set-ups use."""
    here = Path(__file__)
    ids = [f"{here}::test_equals_pyg_gatconv_with_copied_weights[loops0-True-True]",
           f"{here.parents[1]}/test_imports.py::test_the_cycle_finder_finds_a_planted_cycle",
           f"{here}::test_pyg_writes_its_generated_gatconv_module_under_the_sessions_temporary"
           "_directory"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--basetemp", str(tmp_path / "base"), *ids], capture_output=True,
                          text=True, cwd=here.parents[2], timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "3 passed" in done.stdout, done.stdout[-3000:]
