"""``attnlab evaluate``'s column flags are ``train``'s, and docs/cli.md lists each of them."""
from pathlib import Path

from attnlab.cli import build_parser
from attnlab.commands.evaluate import column_settings

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _flags(parser):
    return {s for action in parser._actions for s in action.option_strings}


def test_evaluate_takes_every_column_flag_of_train_and_the_docs_list_them():
    commands = build_parser()._subparsers._group_actions[0].choices
    evaluate = _flags(commands["evaluate"])
    trains = commands["train"]._subparsers._group_actions[0].choices
    train_columns = {s for p in trains.values() for s in _flags(p) if s.endswith("-column")}
    assert train_columns and train_columns <= evaluate
    assert {f"--{n.replace('_', '-')}" for n in column_settings()} == train_columns
    section = DOCS.read_text().split("## Use a trained run")[1].split("\n## ")[0]
    assert [f for f in sorted(train_columns) if f"[{f} " not in section] == []
