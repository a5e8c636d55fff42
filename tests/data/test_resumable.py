"""ResumableBatches / numbered_batches: a checkpointed position resumes the same stream."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.data import ResumableBatches, numbered_batches, resumable


def _epochs(epoch, start):
    return [(epoch, b) for b in range(start, 5)]


def test_resumed_mid_epoch_continues_with_the_next_batch_then_the_next_epoch():
    loader = ResumableBatches(_epochs, length=5)
    it = iter(loader)
    seen = [next(it) for _ in range(3)]
    state = loader.state_dict()
    assert seen == [(0, 0), (0, 1), (0, 2)] and state == {"epoch": 0, "done": 3, "world": 1}

    again = ResumableBatches(_epochs, length=5)
    again.load_state_dict(state)
    assert list(again) == [(0, 3), (0, 4)]
    assert list(again) == [(1, b) for b in range(5)]  # a full new epoch after it


def test_an_abandoned_epoch_is_not_continued_without_a_restore():
    loader = ResumableBatches(_epochs, length=5)
    it = iter(loader)
    next(it)
    assert next(iter(loader)) == (1, 0)  # a new iteration starts the next epoch afresh


def test_a_length_is_required():
    with pytest.raises(TypeError, match="needs a length"):
        len(ResumableBatches(_epochs))


def test_numbered_batches_give_each_rank_its_own_numbers(monkeypatch):
    # numbered_batches of the module patched: `pytest attnlab/data/resumable.py tests/data/...`
    # imports the module a second time for its examples, and the package's name then is another copy
    per_rank = {}
    for rank in (0, 1):
        monkeypatch.setattr(resumable, "shard", lambda rank=rank: (rank, 2))
        loader = resumable.numbered_batches(lambda n: n, 3)
        per_rank[rank] = list(loader) + list(loader)  # two epochs
    assert per_rank[0] == [0, 2, 4, 6, 8, 10] and per_rank[1] == [1, 3, 5, 7, 9, 11]


def test_numbered_batches_resume_computes_only_the_batches_still_to_come():
    made = []
    loader = numbered_batches(lambda n: made.append(n) or n, 6)
    loader.load_state_dict({"epoch": 1, "done": 4})
    assert list(loader) == [10, 11] and made == [10, 11]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), batch_size=st.integers(1, 9), epochs=st.integers(1, 3),
       data=st.data())
def test_a_run_stopped_anywhere_and_resumed_sees_the_uninterrupted_sequence(
        n, batch_size, epochs, data):
    from attnlab.data import BatchLoader

    dataset = torch.arange(n)

    def loader():
        return BatchLoader(dataset, batch_size, shuffle=True, seed=7)

    straight = loader()
    whole = [b.tolist() for _ in range(epochs) for b in straight]
    stop = data.draw(st.integers(0, len(whole)), label="batches before the crash")

    first = loader()
    seen = []
    while len(seen) < stop:  # one iteration per epoch, as Lightning does; crash after `stop`
        for b in first:
            seen.append(b.tolist())
            if len(seen) == stop:
                break
    resumed = loader()
    resumed.load_state_dict(first.state_dict())
    while len(seen) < len(whole):
        seen += [b.tolist() for b in resumed]
    assert seen == whole


@pytest.mark.parametrize("n, batch_size", [(72, 8), (70, 8), (64, 8)])
def test_every_rank_has_as_many_batches_an_epoch(monkeypatch, n, batch_size):
    """Rank 0 took one batch more where the batches did not divide among the ranks: with
    --accumulate, whose steps end with the epoch, the ranks' last steps took different
    numbers of batches (review). Each rank now has as many, none shared."""
    from attnlab.data import SequenceDataset, sequences

    data = SequenceDataset("copy", 5, 4, n)
    seen = []
    for rank in (0, 1):
        monkeypatch.setattr(sequences, "shard", lambda rank=rank: (rank, 2))
        loader = sequences.BatchLoader(data, batch_size, shuffle=True, seed=1)
        batches = list(loader.epoch_batches(0, 0))
        assert len(batches) == len(loader)
        seen.append([tuple(x[0].tolist()) for x, _ in batches])
    assert len(seen[0]) == len(seen[1]) >= 1
    batches = -(-n // batch_size)
    assert len(seen[0]) == batches // 2


def _shuffled():
    return resumable.ShuffledBatches(lambda shuffle, seed: [f"b{i}" for i in range(8)], rows=8,
                                     batch_size=1, seed=0)


def _take(loader, n):
    """The next ``n`` batches, across epochs, as the training loop takes them."""
    out = []
    while len(out) < n:
        for batch in loader:
            out.append(batch)
            if len(out) == n:
                break
    return out


@pytest.mark.parametrize("before, taken, after", [(2, 6, 1), (1, 7, 2), (3, 5, 2)])
def test_an_endless_supply_resumed_on_another_number_of_processes_takes_no_number_twice(
        monkeypatch, before, taken, after):
    """numbered_batches' one "epoch" is the run: two processes stopped at step 6 of 10 had
    used numbers 0-11; resumed on one, the epoch ran out at 12 and the next began at 10,
    training 10 and 11 again."""
    steps = 10
    state = {"epoch": 0, "done": taken, "world": before}  # rank 0's after `taken` steps
    later = []
    for rank in range(after):
        monkeypatch.setattr(resumable, "shard", lambda rank=rank: (rank, after))
        again = resumable.numbered_batches(lambda n: n, steps)
        again.load_state_dict(state)
        later += _take(again, steps - taken)  # the steps left of the run
    assert not set(range(taken * before)) & set(later) and len(set(later)) == len(later)
    # none left out but what rounding up to a whole step of every process skips
    assert min(later) == -(-taken * before // after) * after


@pytest.mark.parametrize("before, taken, after, rest", [
    (2, 2, 1, {0: ["b4", "b5", "b6", "b7"]}),        # two took b0-b3: one takes the rest
    (1, 3, 2, {0: ["b4", "b6"], 1: ["b5", "b7"]}),  # one took b0-b2: two go on after b3
])
def test_a_run_resumed_on_another_number_of_processes_continues_after_what_all_took(
        monkeypatch, before, taken, after, rest):
    """Two processes stopped after two batches each (b0-b3 of the epoch trained); resumed on
    one, it took the epoch up again at b2, training b2 and b3 twice; one process resumed on
    two went on at b6, leaving b3-b5 out of the epoch."""
    monkeypatch.setattr(resumable, "shard", lambda: (0, before))
    loader = _shuffled()
    it = iter(loader)
    for _ in range(taken):  # each process's batches, as rank 0 counts them
        next(it)
    state = loader.state_dict()
    seen = {}
    for rank in range(after):
        monkeypatch.setattr(resumable, "shard", lambda rank=rank: (rank, after))
        again = _shuffled()
        again.load_state_dict(state)
        seen[rank] = list(again)
    assert seen == rest
