"""How a test watches a training run from inside: ``probe_loop(monkeypatch, probe)`` calls the
probe's methods, each optional, around the loop's own functions while ``monkeypatch`` holds:

- ``on_train_start(loop)`` as ``Loop.run`` begins (after set-up: a resumed run's ``loop.step``
  is the checkpoint's);
- ``on_train_batch_start(loop, batch)`` before each ``Loop.train_step``, with the batch on the
  device it trains on (with ``--accumulate``, once for each of the step's batches);
- ``on_train_batch_end(loop)`` after it (``loop.step`` counts that step).

A probe may raise to stand in for a crash or a kill at that point.
"""
from attnlab.training import engine

RUN, TRAIN_STEP = engine.Loop.run, engine.Loop.train_step  # the loop's own, before any probe


def probe_loop(monkeypatch, *probes) -> None:
    """Call ``probes``' hooks (see the module's docstring) in every training loop that runs
    while ``monkeypatch`` holds; a later call replaces the probes of an earlier one."""

    def hooks(name: str) -> list:
        return [getattr(p, name) for p in probes if hasattr(p, name)]

    def run(loop):
        for hook in hooks("on_train_start"):
            hook(loop)
        return RUN(loop)

    def train_step(loop, *batches):  # --accumulate: several batches to a step
        if loop.device_batches:
            batches = [loop.fabric.to_device(batch) for batch in batches]
        for batch in batches:
            for hook in hooks("on_train_batch_start"):
                hook(loop, batch)
        out = TRAIN_STEP(loop, *batches)
        for hook in hooks("on_train_batch_end"):
            hook(loop)
        return out

    monkeypatch.setattr(engine.Loop, "run", run)
    monkeypatch.setattr(engine.Loop, "train_step", train_step)
