"""--baselines' PFN trains for the steps of the weights the tagger is scored with: with
--keep-best those of the tagger's best validation (it trained for the whole budget, however
early the tagger's kept weights were), and the table printed says how many."""
import dataclasses
import json
import re

import pytest

from attnlab.cli import main
from attnlab.tasks.jets.data import write_jets

from .test_task import synthetic_jets


@pytest.mark.slow
def test_the_pfn_trains_for_the_steps_of_the_taggers_kept_weights(tmp_path, capsys,
                                                                    monkeypatch):
    """Training's answer says the best validation was at step 4 of 12 (a real run's best may be
    its last step: the wrapper makes it an earlier one, whatever the toy jets give)."""
    from attnlab import training

    fit = training.fit

    def best_at_4(*args, **kwargs):
        result = fit(*args, **kwargs)
        return dataclasses.replace(result, best={**result.best, "best_step": 4})

    monkeypatch.setattr(training, "fit", best_at_4)
    write_jets(tmp_path / "jets.h5", *synthetic_jets(60, seed=3))
    out = tmp_path / "run"
    code = main(["train", "jets", "--data", str(tmp_path / "jets.h5"), "--out", str(out),
                 "--max-steps", "12", "--batch-size", "16", "--model-dim", "16",
                 "--num-heads", "2", "--dim-feedforward", "32", "--max-constituents", "30",
                 "--warmup", "2", "--val-every", "4", "--lr", "3e-3", "--seed", "1",
                 "--keep-best", "--baselines"])
    printed = capsys.readouterr()
    assert code == 0, printed.err[-2000:]
    best = json.loads((out / "metrics.json").read_text())["best_step"]
    assert best == 4
    assert f"(the tagger's weights and the PFN: {best:,} steps each)" in printed.out
    pfn_steps = [int(s) for s in re.findall(r"baselines: PFN step (\d+)/", printed.err)]
    assert pfn_steps and pfn_steps[-1] == best
