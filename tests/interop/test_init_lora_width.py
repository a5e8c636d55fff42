"""``--lora-rank`` above the width of the model ``--init`` starts from: the refusal named
``--model-dim``, a flag the user never gave (the width is the checkpoint's); it names the
width and the --init it comes from, in one line, before a run directory exists."""
import pytest

from attnlab.cli import main

from .test_checkpoint import CORPUS, save_gpt2


@pytest.mark.slow  # the CLI, in process (refused before training)
def test_a_rank_above_inits_width_names_init_not_model_dim(tmp_path, capsys):
    gpt2 = save_gpt2(tmp_path / "gpt2")  # 32 wide
    text = tmp_path / "t.txt"
    text.write_text("\n".join(CORPUS), encoding="utf-8")
    out = tmp_path / "run"
    assert main(["train", "lm", "--init", str(gpt2), "--data", str(text), "--out", str(out),
                 "--lora-rank", "64"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"--lora-rank 64 is above the model width (32, --init {gpt2}'s)" in lines[0], lines
    assert "--model-dim" not in lines[0]
    assert not out.exists()
