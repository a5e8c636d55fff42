"""Training batches that a checkpoint can resume in the middle of an epoch.

A run killed at step k and restarted with ``--resume`` should see, from step k + 1 on, exactly
the batches an uninterrupted run would have seen — not the first batches of its data again.
``ResumableBatches`` gives that to any source of batches that can start part-way:

    epoch_batches(epoch, start) -> the batches of ``epoch`` from the ``start``-th on

must be a pure function of the run's seed, the epoch, ``start`` and this process's rank. The
object records which epoch it is serving and how many of its batches it has handed out;
``state_dict`` / ``load_state_dict`` — the interface Lightning saves in every checkpoint for a
stateful training iterable — carry those two numbers (and the number of processes that counted
them) across the restart.

It always has a length (batches per epoch on this rank): for an iterable without one,
Lightning fetches a batch ahead, and the count saved in a checkpoint would be one too many.
Endless streams (freshly generated examples) use one "epoch" as long as the whole run.
"""
from __future__ import annotations

import math
import random

from typing import Any, Callable, Iterable, Iterator

__all__ = ["ResumableBatches", "numbered_batches", "shard", "length_grouped"]


def shard() -> tuple[int, int]:
    """(rank, world size) of this process under ``torch.distributed``, else (0, 1)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class ResumableBatches:
    """An iterable of training batches whose position survives a checkpoint.

    Args:
        epoch_batches: ``(epoch, start) -> iterable`` of the epoch's batches from the
            ``start``-th on (subclasses may override the method of that name instead).
        length: batches per epoch on this process (a subclass may override ``__len__``).
        passes: whether an epoch is a pass over the training data (the training loop then
            ends an ``--accumulate`` step with it); False for an endless supply of fresh
            batches (``numbered_batches``), whose "epochs" are a length only.

    Examples:
        >>> loader = ResumableBatches(lambda epoch, start: range(start, 4), length=4)
        >>> it = iter(loader); next(it), next(it)
        (0, 1)
        >>> state = loader.state_dict()           # saved in the checkpoint after step 2
        >>> again = ResumableBatches(lambda epoch, start: range(start, 4), length=4)
        >>> again.load_state_dict(state); list(again)
        [2, 3]
    """

    def __init__(self, epoch_batches: Callable[[int, int], Iterable] | None = None, *,
                 length: int | None = None, passes: bool = True) -> None:
        self._epoch_batches, self._length, self.passes = epoch_batches, length, passes
        self.epoch, self.done = 0, 0  # the epoch being served and the batches it has given
        self._restored = False
        # the processes the run's epochs were first dealt out to (``kept``): None, this many
        self.dealt: int | None = None

    #: training examples an epoch passes over, where the loader knows them (None: an endless
    #: supply); a --batch-size above it gets a note (``attnlab.training.engine.batch_note``)
    examples: int | None = None

    def epoch_batches(self, epoch: int, start: int) -> Iterable:
        if self._epoch_batches is None:
            raise NotImplementedError("give epoch_batches or override the method")
        return self._epoch_batches(epoch, start)

    def _shard(self) -> tuple[int, int]:
        """(rank, processes) among which the epoch's batches are dealt out."""
        return shard()

    def _sharing(self) -> int:
        """The processes that share an epoch's batches evenly (``kept``): those it is dealt
        out among."""
        return self._shard()[1]

    def kept(self, batches: int) -> int:
        """How many of an epoch's ``batches`` (of all processes) the processes take: the most
        that they share evenly (the rest is left out, as DistributedSampler(drop_last=True)
        leaves it). Resumed on other processes than the run's (``dealt``), the most that they
        share evenly of those the run's shared: two processes left an epoch's odd batch out,
        which one process resuming them took, as a step of its own, where the run would have
        gone on to the next epoch; from then on every step held other batches than the
        uninterrupted run's. So no batch the run left out is trained; one the run trained that
        these processes cannot share (its one process's odd batch, resumed on two; three
        processes' third, resumed on two) is left out, and ``dealing_note`` says so.

        Examples:
            >>> loader = ResumableBatches(lambda epoch, start: [], length=5)
            >>> loader.kept(5), loader.load_state_dict({"epoch": 0, "done": 1, "world": 2})
            (5, None)
            >>> loader.kept(5), loader.state_dict()
            (4, {'epoch': 0, 'done': 2, 'world': 1, 'dealt': 2})
            >>> loader.dealt = 3; loader.kept(10)  # a run of three: 9 of 10 batches
            9
        """
        world = self._sharing()
        run = batches - batches % (self.dealt or world)  # what the run's processes shared
        return run - run % world

    def all_batches(self) -> int | None:
        """An epoch's batches over all processes, where a subclass knows them (else None)."""
        return None

    def dealing_note(self) -> str | None:
        """The line that says each epoch leaves out batches that the run, on the processes it
        was dealt out to, trained (``kept``); None where it takes them all."""
        world, dealt, batches = self._shard()[1], self.dealt, self.all_batches()
        if dealt is None or batches is None or not self.passes:
            return None
        left = batches - self.kept(batches)
        if left <= batches % dealt:
            return None
        return (f"on {world} processes each epoch leaves out {left} of its {batches} batches, "
                f"which the run on {dealt} process{'es' if dealt > 1 else ''} trained: the "
                f"steps from here are not those of the run uninterrupted")

    def __len__(self) -> int:
        if self._length is None:
            raise TypeError(f"{type(self).__name__} needs a length (see the module docstring)")
        return self._length

    def __iter__(self) -> Iterator[Any]:
        if self.done and not self._restored:  # an epoch left unfinished: start the next one
            self.epoch, self.done = self.epoch + 1, 0
        self._restored = False
        for batch in self.epoch_batches(self.epoch, self.done):
            self.done += 1
            yield batch
        self.epoch, self.done = self.epoch + 1, 0

    def state_dict(self) -> dict[str, int]:
        world = self._shard()[1]
        dealt = {"dealt": self.dealt} if self.dealt not in (None, world) else {}
        return {"epoch": self.epoch, "done": self.done, "world": world, **dealt}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue at ``state``'s place. ``done`` counts this process's batches: an epoch's
        batches are dealt out among the processes (rank r takes every world-th), so a run
        resumed on another number of them continues after the batches all of them took
        (rounded up to a whole batch each: none is trained twice in the epoch), not at the
        saved count of one process's, which trained half an epoch again (two processes
        resumed on one) or left half of it out (one on two). An endless supply's "epochs" are
        a length only (``numbered_batches``: one as long as the run), so there the position
        is counted over the epochs and may move into the next. A state without ``world`` (an
        older checkpoint) is taken as this number of processes'. ``dealt`` (the processes the
        run's epochs were first dealt out to; the saved ``world`` in an older checkpoint) sets
        which of an epoch's batches are taken (``kept``)."""
        self.epoch, self.done = int(state["epoch"]), int(state["done"])
        world = self._shard()[1]
        saved = int(state.get("world", world))
        self.dealt = int(state.get("dealt", saved))
        if saved != world and not self.passes:
            self.epoch, self.done = divmod(-(-(self.epoch * len(self) + self.done) * saved
                                             // world), len(self))
        else:
            self.done = -(-self.done * saved // world)  # the batches of all processes, shared
        self._restored = True


def numbered_batches(make_batch: Callable[[int], Any], steps: int) -> ResumableBatches:
    """An endless supply of fresh batches, ``steps`` per epoch, each a function of its number.

    Batch b of epoch e on DDP rank r is ``make_batch(n)`` with n = (e·steps + b)·world + r, so
    no two batches of a run (on any rank) share a number, and resuming at batch b costs nothing:
    batch b is computed directly.

    Examples:
        >>> list(numbered_batches(lambda n: 10 * n, 3))
        [0, 10, 20]
    """
    def batches(epoch: int, start: int):
        rank, world = shard()
        for b in range(start, steps):
            yield make_batch((epoch * steps + b) * world + rank)

    return ResumableBatches(batches, length=steps, passes=False)


class ShuffledBatches(ResumableBatches):
    """A new shuffle of a split's training batches every epoch, resumable mid-epoch:
    ``make(shuffle=True, seed=S)`` builds an epoch's batches (classify's and tag's
    length-grouped ones), S drawn from the run's seed and the epoch. Under DDP each rank takes
    every world-th batch, all ranks the same count.

    Args:
        make: ``(shuffle, seed) -> list`` of one epoch's batches.
        rows: examples in the split; ``batch_size``: examples per batch.
        seed: the run's seed.

    Examples:
        >>> batches = ShuffledBatches(lambda shuffle, seed: [seed, seed + 1], 4, 2, seed=0)
        >>> list(batches), list(batches), batches.num_batches
        ([1, 2], [2, 3], 2)
    """

    def __init__(self, make: Callable[..., list], rows: int, batch_size: int, seed: int) -> None:
        super().__init__()
        self.make, self.rows, self.batch_size, self.seed = make, rows, batch_size, seed
        self.examples = rows

    def epoch_batches(self, epoch: int, start: int):
        batches = self.make(shuffle=True, seed=self.seed * 100_003 + epoch + 1)
        rank, world = shard()
        return batches[: self.kept(len(batches))][rank::world][start:]

    def __len__(self) -> int:
        return self.kept(self.num_batches) // shard()[1]

    def all_batches(self) -> int:
        return self.num_batches

    @property
    def num_batches(self) -> int:
        """Batches per epoch over all ranks."""
        return math.ceil(self.rows / self.batch_size)


def length_grouped(lengths: list[int], batch_size: int, shuffle: bool,
                   seed: int) -> list[list[int]]:
    """Indices in batches of similar length (classify's texts, tag's sentences), so that a
    batch padded to its longest input holds little padding: sorted by length within windows
    of 50 batches; ``shuffle`` mixes the inputs, then the batch order (seeded), so training
    batches still vary.

    Examples:
        >>> length_grouped([3, 1, 2, 1], 2, shuffle=False, seed=0)
        [[1, 3], [2, 0]]
    """
    order = list(range(len(lengths)))
    rng = random.Random(seed)
    if shuffle:
        rng.shuffle(order)
    window = batch_size * 50
    order = [i for w in range(0, len(order), window)
             for i in sorted(order[w: w + window], key=lambda i: lengths[i])]
    batches = [order[b: b + batch_size] for b in range(0, len(order), batch_size)]
    if shuffle:
        rng.shuffle(batches)
    return batches
