"""A NaN or infinite loss stops training with a clear message and keeps the last good checkpoint."""

import pytest
import torch

from attnlab.cli import main
from attnlab.tasks import get_task
from attnlab.training import NonFiniteLoss, TaskModule, fit

pytestmark = pytest.mark.slow  # trains runs until the loss diverges


class _BlowsUpAt(TaskModule):
    """Regression whose loss turns NaN from step ``bad_step`` on."""

    def __init__(self, model, cfg, max_steps, bad_step):
        super().__init__(model, cfg, max_steps)
        self.bad_step, self.steps = bad_step, 0

    def loss(self, batch):  # training only: these runs have no validation
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        self.steps += 1
        if self.steps > self.bad_step:
            loss = loss * float("nan")
        return loss, {}


@pytest.mark.parametrize("on_device", [False, True])
def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch, on_device):
    """On one CPU process the loss is checked at every step, before its gradients are applied;
    on an accelerator (``on_device``: the same path, forced here on the CPU) the step of the
    first non-finite loss is kept on the device and read before the next checkpoint."""
    from attnlab.training import engine

    if on_device:
        real_setup = engine.Loop.setup

        def setup(self):
            resumed = real_setup(self)
            self.immediate = False
            return resumed

        monkeypatch.setattr(engine.Loop, "setup", setup)
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    cfg = get_task("reverse").config(lr=1e-2, warmup=2, checkpoint_every=5, model_dim=4)
    module = _BlowsUpAt(torch.nn.Linear(4, 1), cfg, 40, bad_step=12)
    with pytest.raises(NonFiniteLoss, match=r"loss became nan at step 13.*last good checkpoint"):
        fit(module, loader, None, cfg, tmp_path, max_steps=40)
    state = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert state["global_step"] == 10
    assert all(torch.isfinite(t).all() for t in state["state_dict"].values())


def test_divergent_cli_run_exits_2_with_one_line(tmp_path, capsys):
    code = main(["train", "reverse", "--out", str(tmp_path / "r"), "--lr", "1e30", "--grad-clip", "0",
                 "--warmup", "1", "--max-steps", "60", "--train-size", "256", "--val-size", "32",
                 "--test-size", "64", "--model-dim", "16", "--num-heads", "1", "--batch-size", "32"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert "loss became" in err[-1] and "lower --lr" in err[-1]
    assert not (tmp_path / "r" / "model.safetensors").exists(), "a diverged run saves no model"
