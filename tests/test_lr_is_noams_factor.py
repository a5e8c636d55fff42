"""``--lr`` under ``--schedule noam`` is a factor, not a rate: ``--help`` says so with the
peak it gives (factor·D^-0.5·warmup^-0.5), and docs/cli.md's example peak is that formula's."""
import re
from pathlib import Path

import pytest

from attnlab.cli import main
from attnlab.schedulers import noam_factor

ROOT = Path(__file__).resolve().parents[1]


def test_help_says_lr_is_noams_factor_and_its_peak(capsys):
    with pytest.raises(SystemExit):
        main(["train", "lm", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--lr F peak learning rate (Noam: its factor, peak factor·D^-0.5·warmup^-0.5)" in text


def test_the_docs_peak_of_lr_1_is_noams():
    cli = " ".join((ROOT / "docs" / "cli.md").read_text(encoding="utf-8").split())
    peak, d, warmup = re.search(r"`--lr 1` peaks at ([\d.e-]+) for D (\d+) and a warm-up of "
                                r"(\d+)", cli).groups()
    assert float(peak) == pytest.approx(noam_factor(int(warmup), int(d), int(warmup), 1.0),
                                        rel=1e-2)  # as printed: two digits
    # and its peak is factor·D^-0.5·warmup^-0.5, as --help says
    assert noam_factor(int(warmup), int(d), int(warmup), 3.0) == pytest.approx(
        3.0 * int(d) ** -0.5 * int(warmup) ** -0.5, rel=1e-12)
