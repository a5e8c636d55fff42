"""`attnlab train graph` flags at their edges: a setting the run would not use is refused in
one line, before a run directory is written."""
import pytest

from attnlab.cli import main


@pytest.mark.parametrize("args, named", [
    # one layer is the output layer: one head; --num-heads 4 trained one head and
    # config.yaml said 4
    (["--num-layers", "1", "--num-heads", "4"], "--num-heads: with --num-layers 1"),
    (["--num-layers", "1", "--model-dim", "16"], "--model-dim: with --num-layers 1"),
    (["--num-layers", "1", "--kind", "mean", "--model-dim", "16"],
     "--model-dim: with --num-layers 1"),
])
def test_a_one_layer_network_refuses_its_hidden_layers_settings(tmp_path, capsys, args, named):
    out = tmp_path / "run"
    assert main(["train", "graph", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0] and not out.exists()
