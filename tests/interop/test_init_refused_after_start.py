"""What docs/finetuning.md says of the refusals found only once a run has started: a language
model's corrupt weights are named in one line (exit 2) after ``attnlab train lm -> OUT``, and
OUT, made for the run, is removed again, the line saying so."""
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from attnlab.cli import main  # noqa: E402
from tests.interop.test_checkpoint import CORPUS, save_gpt2  # noqa: E402

PAGE = Path(__file__).resolve().parents[2] / "docs" / "finetuning.md"


@pytest.mark.slow  # starts a run
def test_an_lm_checkpoints_corrupt_weights_remove_the_run_directory_as_the_docs_say(
        tmp_path, capsys):
    d = save_gpt2(tmp_path / "gpt2")
    weights = d / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    (tmp_path / "text.txt").write_text("\n".join(CORPUS))
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["train", "lm", "--init", str(d), "--data", str(tmp_path / "text.txt"),
                 "--out", str(out), "--block-size", "16", "--max-steps", "1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert f"attnlab train lm -> {out}" in err  # the run had started
    errors = [line for line in err if line.startswith("attnlab: error")]
    assert len(errors) == 1 and "model.safetensors is not a readable" in errors[0]
    assert errors[0].endswith(f"removed {out}, so the same command can run again)")
    assert not out.exists()
    page = " ".join(PAGE.read_text().split())
    assert "a language model's weights that are corrupt" in page
    assert '"removed OUT, so the same command can run again"' in page
    assert "Each of these stops before a run directory exists" not in page
