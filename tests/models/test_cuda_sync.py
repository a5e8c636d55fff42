"""A training step of every model the tasks train never waits for the GPU.

Forward, loss, backward and a fused AdamW step run under ``torch.cuda.set_sync_debug_mode
("error")``, which turns every host synchronisation (a ``.item()``, a copy to or from pageable
host memory, ``nonzero``, boolean-mask indexing...) into an error. One step runs first outside
the mode: what happens once (the optimiser's state, the libraries' handles) is not a step's
cost. The batches are on the device before the mode is set. Models from ``compile_cases``.
"""
import pytest
import torch

from .compile_cases import RNN_CASES, TRANSFORMER_CASES

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def train_step(model, optimizer, case, batch):
    loss = case.loss(model, batch)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


def step_without_sync(case):
    device = torch.device("cuda")
    model = case.model(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    batch = case.batch(device)
    train_step(model, optimizer, case, batch)  # the one-time set-up, outside the mode
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        loss = train_step(model, optimizer, case, batch)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert torch.isfinite(loss).item()  # read after the checked step


@pytest.mark.parametrize("case", TRANSFORMER_CASES, ids=lambda c: c.name)
def test_a_training_step_never_synchronises(case):
    step_without_sync(case)


@pytest.mark.xfail(strict=False, raises=RuntimeError,
                   reason="pack_padded_sequence takes the source lengths on the host")
@pytest.mark.parametrize("case", RNN_CASES, ids=lambda c: c.name)
def test_recurrent_models_still_synchronise(case):
    step_without_sync(case)
