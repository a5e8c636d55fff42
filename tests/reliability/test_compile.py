"""``--compile`` trains through torch.compile and leaves a run directory like any other."""
import pytest
from safetensors import safe_open

from attnlab.cli import main

from .conftest import TINY_REVERSE

pytestmark = pytest.mark.slow  # trains a run through torch.compile


def test_compiled_run_saves_plain_weight_names_and_predicts(tmp_path, capsys):
    import torch
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    out = tmp_path / "compiled"
    argv = ["train", "reverse", "--out", str(out), "--compile", *TINY_REVERSE]
    argv[argv.index("--max-steps") + 1] = "12"
    assert main(argv) == 0
    # compiled once for training and once for evaluation mode (validation every 10 steps),
    # not again for each validation, nor for the test split and figures (eager after training)
    assert counters["stats"]["unique_graphs"] == 2, dict(counters["stats"])
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        names = list(f.keys())
    assert names and not any("_orig_mod" in n for n in names), names[:5]
    capsys.readouterr()
    assert main(["predict", str(out), "--input", "1 2 3"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()[-1].split()) == 3
