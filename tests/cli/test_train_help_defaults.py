"""`attnlab train TASK --help` states the default each task's run starts from: the number that
config.yaml records when the flag is not given."""
from __future__ import annotations

import re

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


def _switch_entries(task: str, capsys) -> dict[str, str]:
    """{setting: its --help entry, on one line} of each on/off flag of ``train TASK``."""
    with pytest.raises(SystemExit):
        main(["train", task, "--help"])
    entries, current = [], None
    for line in capsys.readouterr().out.splitlines():
        if re.match(r"  -", line):  # an entry starts; its help goes on, indented deeper
            current = [line]
            entries.append(current)
        elif line.startswith("   ") and current is not None:
            current.append(line)
        else:
            current = None
    found = {}
    for entry in (" ".join(" ".join(e).split()) for e in entries):
        switch = re.match(r"--([\w-]+), --no-\1 ", entry)
        if switch:
            found[switch.group(1).replace("-", "_")] = entry[switch.end():]
    return found


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_switch_says_whether_it_is_on_or_off_by_default(task, capsys):
    # `train sort --help` said nothing of --early-stop's default, which is off for sort and on
    # for reverse and copy: a switch that is off said nothing at all
    entries = _switch_entries(task, capsys)
    assert entries, task
    for name, entry in entries.items():
        value = get_task(task).defaults[name]
        if isinstance(value, bool):
            assert entry.endswith(f"(default: {'on' if value else 'off'})"), (name, entry)


def _monitor_entry(task: str, capsys) -> str:
    with pytest.raises(SystemExit):
        main(["train", task, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    return out.split(" --monitor METRIC ", 1)[1].split(" --keep-best,", 1)[0]


@pytest.mark.parametrize("task", sorted(TASKS))
def test_monitor_help_lists_the_metrics_this_task_validates(task, capsys):
    # every task's --help said "the task's: val_loss, val_acc, ...": lm's too, whose validation
    # computes val_loss alone, and reverse's without its val_seq_acc
    entry = _monitor_entry(task, capsys)
    named = set(re.findall(r"val_\w+", entry))
    assert named == set(get_task(task).val_metrics), entry
