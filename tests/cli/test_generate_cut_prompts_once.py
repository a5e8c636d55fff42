"""`generate --input-file` of prompts longer than the model reads said "line N has X tokens; the
model reads its last K" once per prompt: a file of 10^4 long prompts printed 10^4 lines on
stderr. Now it is one line, naming the first such prompt and how many more there are; one
prompt (`--prompt`) says its line as before."""
from __future__ import annotations

import pytest

from attnlab.cli import main

pytestmark = pytest.mark.slow  # reads the session's lm run (tests/cli/conftest.py)

LONG = "the quick brown fox jumps over the lazy dog"  # 43 characters; the model reads 15


def test_many_long_prompts_are_said_once_with_their_count(runs, tmp_path, capsys):
    run = runs["lm"][0]
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("the fox\n" + f"{LONG}\n" * 5, encoding="utf-8")
    capsys.readouterr()
    assert main(["generate", str(run), "--input-file", str(prompts), "--max-new-tokens", "1",
                 "--greedy", "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 6  # every prompt answered
    notes = [line for line in err.splitlines() if "reads its last" in line]
    assert notes == [f"note: --input-file {prompts} line 2 has {len(LONG)} tokens; the model "
                     f"reads its last 15 (--block-size 16); and 4 more of the 6 prompts, each "
                     f"cut to its last 15"]


def test_one_long_prompt_is_said_as_before(runs, capsys):
    capsys.readouterr()
    assert main(["generate", str(runs["lm"][0]), "--prompt", LONG, "--max-new-tokens", "1",
                 "--greedy", "--threads", "1"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "reads its last" in line]
    assert notes == [f"note: --prompt has {len(LONG)} tokens; the model reads its last 15 "
                     f"(--block-size 16)"]
