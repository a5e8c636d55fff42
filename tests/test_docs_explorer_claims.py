"""docs/attention_explorer.md describes the explorer's run panel in the order the page shows
it: the page once was said to list `steps`, `train_seconds`, `parameters` after the scores,
while it lists them by name, as metrics.json orders them (and the screenshot shows)."""
from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_the_run_panels_order_is_the_pages():
    from attnlab.explorer.record import shown_metrics

    text = re.sub(r"\s+", " ", (DOCS / "attention_explorer.md").read_text(encoding="utf-8"))
    panel = re.search(r"\*\*The run\*\* \(at the top\):(.*?)Each is shown", text).group(1)
    rest = re.findall(r"`([a-z_]+)`", panel)     # the names it lists after the scores
    assert len(rest) >= 3, panel
    metrics = dict.fromkeys(["val_loss", "test_token_accuracy", *sorted(rest)], 1.0)
    shown = [name for name, _ in shown_metrics({"metrics": metrics})]
    assert shown[:2] == ["test_token_accuracy", "val_loss"]
    assert shown[2:] == rest, (rest, shown)
