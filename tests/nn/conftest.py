"""Every test in tests/nn starts from the same random state, so a failure reproduces."""
import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
