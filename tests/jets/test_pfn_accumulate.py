"""The Particle Flow Network baseline under ``--accumulate K``: it takes K batches a step, as
the tagger does, so ``--baselines`` compares the two on the same jets a step (it took one
batch a step, a K times smaller step than the tagger's, and said nothing)."""
import copy

import pytest
import torch

from attnlab.tasks.jets.runtime import PFNTagger

from .test_task import synthetic_jets


@pytest.mark.slow  # imports the training loop (Lightning) for its rule
def test_k_batches_make_the_step_of_one_batch_of_all_their_jets():
    """Copied weights, float64: K = 3 batches of 5 jets, each cut to its own longest jet (as
    training cuts them), give the weights one batch of the 15 jets gives, within 1e-12."""
    from attnlab.tasks.jets.runtime import pfn_step

    p4, labels = synthetic_jets(9, seed=4, most=20)
    p4, labels = torch.from_numpy(p4[:15]).double(), torch.from_numpy(labels[:15])
    torch.manual_seed(0)
    one = PFNTagger().double()
    many, start = copy.deepcopy(one), copy.deepcopy(one)
    batches = []
    for part in range(3):
        rows = slice(5 * part, 5 * part + 5)
        used = int((p4[rows, :, 0] > 0).sum(1).max())  # the batch's longest jet
        batches.append((p4[rows, :used], labels[rows]))
    assert len({b[0].shape[1] for b in batches}) > 1  # the batches' widths differ
    loss_many = pfn_step(many, torch.optim.SGD(many.parameters(), lr=1.0), batches, None)
    loss_one = pfn_step(one, torch.optim.SGD(one.parameters(), lr=1.0), [(p4, labels)], None)
    assert loss_many == pytest.approx(loss_one, abs=1e-12)
    for (name, a), b in zip(one.named_parameters(), many.parameters()):
        torch.testing.assert_close(b, a, atol=1e-12, rtol=0, msg=name)
    moved = max(float((a - b).detach().abs().max()) for a, b in zip(one.parameters(),
                                                                      start.parameters()))
    assert moved > 1e-6  # the step did move the weights


@pytest.mark.slow
def test_the_baseline_takes_accumulate_batches_a_step(tmp_path):
    """``train_pfn`` on 32 training jets, one step: 4 batches of 8 under --accumulate 4 train
    the PFN as one batch of 32 does (the same jets: one window of ``by_length`` holds them
    all). Float32 and AdamW, so within 1e-5: one step moves a weight by about --lr (1e-3)."""
    from attnlab.tasks import get_task
    from attnlab.tasks.jets import runtime
    from attnlab.tasks.jets.data import write_jets

    write_jets(tmp_path / "jets.h5", *synthetic_jets(16, seed=2))
    train = runtime.Split(str(tmp_path / "jets.h5"), 0, 32)
    trained = []
    for batch_size, accumulate in ((32, 1), (8, 4)):
        cfg = get_task("jets").config(batch_size=batch_size, accumulate=accumulate, seed=5,
                                      max_constituents=30, lr=1e-3, warmup=0)
        trained.append(runtime.train_pfn(cfg, train, steps=1))
    start = PFNTagger()
    for (name, a), b, c in zip(trained[0].named_parameters(), trained[1].parameters(),
                               start.parameters()):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=0, msg=name)
    assert any(not torch.allclose(a, c) for a, c in zip(trained[0].parameters(),
                                                        start.parameters()))


@pytest.mark.slow
def test_under_ddp_the_baseline_takes_every_process_batches_a_step(tmp_path, monkeypatch):
    """Under DDP with 2 processes a tagger's step takes a batch on each; the PFN, trained on
    rank 0 alone, took rank 0's batch only (half the jets a step, and half the epoch). Now one
    step on 2 processes' batches of 8 trains it as one batch of 16 (within 1e-5, as above)."""
    from attnlab.data import resumable
    from attnlab.tasks import get_task
    from attnlab.tasks.jets import runtime
    from attnlab.tasks.jets.data import write_jets

    write_jets(tmp_path / "jets.h5", *synthetic_jets(8, seed=2))
    train = runtime.Split(str(tmp_path / "jets.h5"), 0, 16)
    trained = []
    for batch_size, world in ((16, 1), (8, 2)):
        monkeypatch.setattr(runtime, "shard", lambda world=world: (0, world))
        monkeypatch.setattr(resumable, "shard", lambda world=world: (0, world))
        cfg = get_task("jets").config(batch_size=batch_size, seed=5, max_constituents=30,
                                      lr=1e-3, warmup=0)
        trained.append(runtime.train_pfn(cfg, train, steps=1))
    for (name, a), b in zip(trained[0].named_parameters(), trained[1].parameters()):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=0, msg=name)


def _jets_of(batches) -> list[tuple[float, ...]]:
    """The jets of ``batches`` ((p4, labels) each), each named by its hardest constituent,
    sorted: a step's jets, whatever their order."""
    return sorted(tuple(p4[i, 0].tolist()) for p4, labels in batches for i in range(len(labels)))


@pytest.mark.slow
@pytest.mark.parametrize("accumulate", [1, 2])
def test_under_ddp_with_an_odd_batch_count_the_baseline_steps_hold_the_tagger_jets(
        tmp_path, monkeypatch, accumulate):
    """9 batches an epoch on 2 processes: the tagger's run leaves the odd batch out (each
    process takes 4, as DistributedSampler(drop_last=True)); the PFN kept all 9, took a fifth,
    short step of jets the tagger never saw, and from the second epoch on its steps held other
    jets than the tagger's. Now every PFN step, over 2 epochs, holds the jets of the tagger's
    step of that number (its processes' batches together, --accumulate of them each)."""
    from attnlab.data import resumable
    from attnlab.settings import epoch_steps
    from attnlab.tasks import get_task
    from attnlab.tasks.jets import runtime
    from attnlab.tasks.jets.data import write_jets

    world, epochs = 2, 2
    write_jets(tmp_path / "jets.h5", *synthetic_jets(36, seed=2))
    train = runtime.Split(str(tmp_path / "jets.h5"), 0, 72)  # 9 batches of 8
    cfg = get_task("jets").config(batch_size=8, accumulate=accumulate, seed=5,
                                  max_constituents=30, lr=1e-3, warmup=0)
    tagger: list[list] = []  # the tagger's steps, each the batches of every process
    for rank in range(world):
        monkeypatch.setattr(resumable, "shard", lambda rank=rank: (rank, world))
        loader = runtime.JetBatches(train, cfg)
        steps = epoch_steps(cfg, len(loader), epochs)
        mine = []
        for _ in range(epochs):  # --accumulate batches a step, the epoch's last takes the rest
            batches = list(loader)
            mine += [batches[a:a + accumulate] for a in range(0, len(batches), accumulate)]
        tagger = [t + m for t, m in zip(tagger, mine)] if tagger else mine
    assert len(tagger) == steps and all(len(s) == accumulate * world for s in tagger)

    pfn_steps, real_step = [], runtime.pfn_step
    monkeypatch.setattr(runtime, "pfn_step", lambda pfn, opt, batches, clip: (
        pfn_steps.append(_jets_of(batches)), real_step(pfn, opt, batches, clip))[1])
    monkeypatch.setattr(resumable, "shard", lambda: (0, world))  # the PFN trains on rank 0
    monkeypatch.setattr(runtime, "shard", lambda: (0, world))
    runtime.train_pfn(cfg, train, steps)
    assert pfn_steps == [_jets_of(s) for s in tagger]
