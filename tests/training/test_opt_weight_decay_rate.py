"""--weight-decay against the learning rate: AdamW's decoupled decay multiplies each weight
matrix by 1 - rate·decay at every step, so a decay of 1000 with --lr 1e-3 set every matrix
to zero at the first step at the peak (and 20 with --lr 0.1 flipped their sign each step),
and the run finished with exit 0 and a model of zeros. Now refused, in one line naming the
flag and where the rate comes from (--lr, --muon-lr, Noam's peak), before a run directory is
written; a decay whose product with the rate is below 1
still trains."""
import pytest
import torch

from attnlab.cli import main
from attnlab.training.module import make_optimizer


@pytest.mark.parametrize("flags, message", [
    (["--weight-decay", "1000", "--lr", "0.001"],
     "--weight-decay 1000 with a learning rate of 0.001 (--lr): each step would multiply the "
     "weight matrices by 1 - rate × decay = 0 (decoupled weight decay, AdamW's), erasing "
     "them; give a --weight-decay below 1000"),
    (["--weight-decay", "20", "--lr", "0.1"],
     "--weight-decay 20 with a learning rate of 0.1 (--lr): each step would multiply the "
     "weight matrices by 1 - rate × decay = -1 (decoupled weight decay, AdamW's), flipping "
     "them; give a --weight-decay below 10"),
    # Muon's rate counts too, and is named: --muon-lr 0.5 with a decay of 4
    (["--weight-decay", "4", "--optimizer", "muon", "--muon-lr", "0.5"],
     "--weight-decay 4 with a learning rate of 0.5 (--muon-lr): each step would multiply the "
     "weight matrices by 1 - rate × decay = -1 (decoupled weight decay, Muon's), flipping "
     "them; give a --weight-decay below 2"),
    # Noam: --lr is the factor; the peak is 4 · 16^-0.5 · 4^-0.5 = 0.5
    (["--schedule", "noam", "--lr", "4", "--model-dim", "16", "--num-heads", "2",
      "--warmup", "4", "--weight-decay", "2"],
     "--weight-decay 2 with a learning rate of 0.5 (Noam's peak, --lr × D^-½ × warmup^-½ = "
     "4 × 16^-½ × 4^-½): each step would multiply the weight matrices by 1 - rate × decay = "
     "0 (decoupled weight decay, AdamW's), erasing them; give a --weight-decay below 2"),
    # Muon's factor under Noam: 8 · 16^-0.5 · 4^-0.5 = 1, above --lr's peak
    (["--schedule", "noam", "--lr", "1", "--model-dim", "16", "--num-heads", "2",
      "--warmup", "4", "--optimizer", "muon", "--muon-lr", "8", "--weight-decay", "1"],
     "--weight-decay 1 with a learning rate of 1 (Noam's peak, --muon-lr × D^-½ × "
     "warmup^-½ = 8 × 16^-½ × 4^-½): each step would multiply the weight matrices by "
     "1 - rate × decay = 0 (decoupled weight decay, Muon's), erasing them; give a "
     "--weight-decay below 1"),
], ids=["zero", "flip", "muon", "noam", "noam-muon"])
def test_a_decay_that_erases_the_matrices_is_one_line_before_a_run_directory(
        flags, message, tmp_path, capsys):
    out = tmp_path / "run"
    small = ["--max-steps", "1", "--train-size", "16", "--val-size", "8", "--test-size", "8"]
    assert main(["train", "reverse", *small, *flags, "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == f"attnlab: error: {message}"
    assert not out.exists()


def test_the_refused_decay_is_what_adamw_would_have_done():
    """The rule's arithmetic is AdamW's: one step at lr 1e-3 with decay 1000 leaves a matrix
    of zeros (the update of a zero gradient is zero), with 999 it keeps a thousandth."""
    from attnlab.settings import decay_fits

    for decay, left in ((1000.0, 0.0), (999.0, 1e-3)):
        weight = torch.nn.Parameter(torch.ones(3, 3))
        settings = {"lr": 1e-3, "warmup": 0, "weight_decay": decay, "schedule": "constant"}
        opt, _ = make_optimizer([weight], settings, model_dim=8, max_steps=1)
        weight.grad = torch.zeros_like(weight)
        opt.step()
        torch.testing.assert_close(weight.detach(), torch.full((3, 3), left), rtol=1e-5,
                                   atol=1e-9)
        assert (decay_fits(settings) is None) == (left > 0)
