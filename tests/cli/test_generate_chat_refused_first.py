"""``attnlab generate DIR --chat TEXT --seed S`` on a directory whose tokenizer has no chat
template is refused in one line before torch is imported: --seed's generator imported it
first (seconds of a cold start before the refusal), where without --seed the refusal came
at once."""
import json
import subprocess
import sys

import pytest


@pytest.mark.slow  # starts a process
@pytest.mark.parametrize("seed", [[], ["--seed", "3"]])
def test_chat_without_a_template_is_refused_before_torch(seed, tmp_path):
    d = tmp_path / "base"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "llama"}), encoding="utf-8")
    (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}),
                                             encoding="utf-8")
    argv = ["generate", str(d), "--chat", "hi", *seed]
    code = (f"import sys; from attnlab.cli import main; rc = main({argv!r}); "
            f"print(rc, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["2", "False"], done.stderr
    assert done.stderr.count("\n") == 1 and f"--chat: {d} has no chat template" in done.stderr
