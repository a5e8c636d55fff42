"""docs/reverse.md says how many steps the default reversal run trains before it stops early,
"the same every time", and docs/cli.md shows that run's stopping line: both are what the run
does now (the pages said 110 after the run had come to stop at 100)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.slow  # trains the default reversal run (~100 steps)
def test_the_default_runs_steps_are_the_ones_the_pages_give(tmp_path, monkeypatch):
    from attnlab.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["train", "reverse", "--out", "runs/reverse"]) == 0
    metrics = json.loads((tmp_path / "runs" / "reverse" / "metrics.json").read_text())
    steps = metrics["steps"]
    assert steps < 600 and metrics["test_sequence_accuracy"] == 1.0
    reverse = re.sub(r"\s+", " ", (DOCS / "reverse.md").read_text(encoding="utf-8"))
    said = re.search(r"the default 42 \((\d+) steps, the same every time", reverse)
    assert said and int(said[1]) == steps, (said and said[0], steps)
    cli = re.sub(r"\s+", " ", (DOCS / "cli.md").read_text(encoding="utf-8"))
    shown = re.search(r"`stopped early at step (\d+)/600: (.*?)`", cli)
    assert shown and int(shown[1]) == steps, (shown and shown[0], steps)
    assert shown[2] == metrics["stopped_early"]
