"""Two DDP processes draw their own dropout masks, from the same initial weights."""
import pytest
import torch

from attnlab.cli import main
from attnlab.training.checkpoint import rank_rng, rank_seed
from tests.reliability.conftest import train_ddp

TINY = ["--train-size", "64", "--val-size", "16", "--test-size", "16", "--model-dim", "16",
        "--num-heads", "2", "--dropout", "0.3", "--batch-size", "8", "--warmup", "0",
        "--threads", "1", "--val-every", "100", "--no-early-stop"]


def rank_states(run):
    """Each process's random state after the checkpoint's step, in rank order."""
    state = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    return [ranks["torch"] for ranks in state["rng_ranks"]]


@pytest.mark.slow  # a run of two DDP processes
def test_ddp_processes_draw_their_own_dropout_masks_when_resumed_on_more(tmp_path):
    """A run of one process (two batches a step) resumed on two gave both rank 0's random
    state: reverse's batches all have one shape, so the two processes drew the same dropout
    masks at every step (the effective batch's halves dropped out the same units), and their
    states stayed equal. A run that starts on two processes: test_ddp.py's epoch test, whose
    run is the same as this one's (one launch for both)."""
    assert main(["train", "reverse", "--out", str(tmp_path / "one"), *TINY,  # a step two can share
                 "--accumulate", "2", "--max-steps", "2"]) == 0
    proc = train_ddp("reverse", tmp_path / "one", "--resume", "--max-steps", "4")
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, second = rank_states(tmp_path / "one")
    assert not torch.equal(first, second)


def test_a_process_above_rank_zero_draws_its_own_after_a_resume_on_other_processes():
    """Resumed on as many processes, each takes its own state back; on another number, rank 0
    continues from its own and the others from a seed of their own, not from rank 0's."""
    saved = {"rng": "r0", "rng_ranks": ["r0", "r1"]}
    assert [rank_rng(saved, rank, 2) for rank in (0, 1)] == ["r0", "r1"]
    assert [rank_rng(saved, rank, 3) for rank in (0, 1, 2)] == ["r0", None, None]
    seeds = {rank_seed(7, rank, step) for rank in (1, 2, 3) for step in (0, 6)}
    assert len(seeds) == 6 and all(0 <= seed < 2**63 for seed in seeds)
