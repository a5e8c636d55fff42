"""A tiny trained reversal run shared by the reliability tests (trained once per worker)."""
import pytest

from attnlab.cli import main

TINY_REVERSE = ["--max-steps", "30", "--train-size", "256", "--val-size", "32", "--test-size",
                "64", "--model-dim", "16", "--num-heads", "1", "--batch-size", "32",
                "--val-every", "10", "--checkpoint-every", "10"]


@pytest.fixture(scope="session")
def reverse_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "reverse"
    assert main(["train", "reverse", "--out", str(out), *TINY_REVERSE]) == 0
    return out
