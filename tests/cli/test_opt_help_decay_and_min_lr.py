"""`attnlab train --help` says what --weight-decay decays and where --min-lr leaves each
optimiser's rate, as docs/cli.md does: a pretrained BERT's position and token-type tables
(--init) are decayed, unlike attnlab's own learned positions; under --optimizer muon Muon's rate
ends at --muon-lr × --min-lr / --lr, not at --min-lr."""
from pathlib import Path

import pytest

from attnlab.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _help(capsys) -> str:
    with pytest.raises(SystemExit):
        main(["train", "classify", "--help"])
    return " ".join(capsys.readouterr().out.split())


def _docs() -> str:
    return " ".join((ROOT / "docs" / "cli.md").read_text(encoding="utf-8").split())


def test_weight_decay_help_names_the_pretrained_bert_tables(capsys):
    entry = _help(capsys).split(" --weight-decay F ", 1)[1].split(" --", 1)[0]
    assert "not biases, norms or learned positions" in entry
    assert "a pretrained BERT's (--init) position and token-type tables" in entry, entry
    assert "a pretrained BERT's position and token-type tables" in _docs()


def test_min_lr_help_says_where_muons_rate_ends(capsys):
    entry = _help(capsys).split(" --min-lr F ", 1)[1].split(" --cooldown F ", 1)[0]
    assert "--muon-lr × --min-lr / --lr" in entry, entry
    docs = _docs().split("`--min-lr F` (", 1)[1].split("`--cooldown F`", 1)[0]
    assert "--muon-lr × --min-lr / --lr" in docs, docs
