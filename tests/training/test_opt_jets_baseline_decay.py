"""jets' ``--baselines`` Particle Flow Network trains "as the tagger was": with
``--weight-decay`` it decays its matrices only, as the tagger's AdamW does (it decayed its
biases too), and with ``--optimizer muon`` (nothing in a PFN for Muon) its AdamW takes the
same groups instead of one of every parameter."""
import pytest

from attnlab.tasks import get_task
from attnlab.training import module


class Built(Exception):
    """Raised by the stand-in optimiser: what it was given is all the test needs."""


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_the_pfn_baseline_decays_its_matrices_only(optimizer, monkeypatch):
    from attnlab.tasks.jets.runtime import train_pfn

    given = {}

    def make_optimizer(params, cfg, **_):
        given["params"] = list(params)
        raise Built

    monkeypatch.setattr(module, "make_optimizer", make_optimizer)
    cfg = get_task("jets").config(weight_decay=0.1, optimizer=optimizer)
    with pytest.raises(Built):
        train_pfn(cfg, None, 1)
    groups = given["params"]
    assert all(isinstance(g, dict) and not g.get("muon") for g in groups)
    for group in groups:
        vectors = [p for p in group["params"] if p.ndim < 2]
        assert not vectors or group["weight_decay"] == 0.0
        assert group["weight_decay"] == 0.0 or group["params"]
    assert sum(g["weight_decay"] > 0 for g in groups) == 1
