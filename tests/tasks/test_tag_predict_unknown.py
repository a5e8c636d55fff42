"""A new user's ``attnlab predict`` of a tag run on a sentence with a word the run never saw:
the word is read as ``<unk>``, and docs/cli.md says predict then names it on stderr, as it does
for classify. A tag run said nothing."""
import pytest

from attnlab.cli import main
from tests.tasks.test_tag import TINY, capitalised, write_conll


@pytest.mark.slow  # trains a run
def test_predict_names_the_words_a_tag_run_reads_as_unk(tmp_path, capsys):
    data, out = write_conll(tmp_path / "d.conll", capitalised(20)), tmp_path / "run"
    assert main(["train", "tag", "--data", str(data), "--out", str(out),
                 *TINY[:1], "1", *TINY[2:]]) == 0
    capsys.readouterr()
    assert main(["predict", str(out), "--input", "Xavier lives in Zürich"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ("note: --input holds pieces unknown to this model, each read as "
                            "unk: 'Xavier', 'Zürich'\n")
    assert captured.out.startswith("Xavier/")
    assert main(["predict", str(out), "--input", "John lives in Rome"]) == 0
    assert capsys.readouterr().err == ""
    # the attention map's labels are the words: one read as unk is named there too
    assert main(["plot", "attention", str(out), "--input", "Xavier lives in Zürich", "--out",
                 str(tmp_path / "map.png")]) == 0
    assert capsys.readouterr().err == captured.err
