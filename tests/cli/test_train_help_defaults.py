"""`attnlab train TASK --help` states the default each task's run starts from: the number that
config.yaml records when the flag is not given."""
from __future__ import annotations

import pytest

from attnlab.cli import main
from attnlab.tasks import TASKS, get_task


def _entry(task: str, flag: str, capsys) -> str:
    with pytest.raises(SystemExit):
        main(["train", task, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    return out.split(f" {flag} N ", 1)[1].split(" --", 1)[0]


@pytest.mark.parametrize("task", sorted(t for t in TASKS
                                        if "dim_feedforward" in get_task(t).defaults))
def test_dim_feedforward_help_gives_the_width_a_run_gets(task, capsys):
    # every task sets its own width (reverse 64, lm 512), which --model-dim does not scale:
    # `train reverse --model-dim 16` trains a 64-wide feed-forward, not the 2·D once promised
    entry = _entry(task, "--dim-feedforward", capsys)
    width = get_task(task).defaults["dim_feedforward"]
    assert entry.endswith(f"(default: {width})") and "·D" not in entry, entry
