"""What ``attnlab translate`` and ``predict`` print for a run whose targets span lines (a
CSV's quoted value, a JSONL string with ``\\n``): one line per input, as documented in
docs/cli.md ("Many inputs"), and the text as written with ``--json``."""
import json
import random

import pytest

from attnlab.cli import main

TINY = ["--model-dim", "32", "--num-heads", "2", "--num-layers", "1", "--dim-feedforward", "64",
        "--lr", "3e-3", "--warmup", "10", "--threads", "1", "--tgt-tokenizer", "char"]
WORDS = {"le": "the", "un": "a", "café": "coffee", "thé": "tea", "lait": "milk"}


@pytest.fixture(scope="module")
def lines_run(tmp_path_factory):
    """A run that learnt to write each word of its translation on a line of its own."""
    tmp = tmp_path_factory.mktemp("lines")
    rng = random.Random(0)
    with open(tmp / "pairs.jsonl", "w", encoding="utf-8") as f:
        for _ in range(300):
            words = [rng.choice(list(WORDS)) for _ in range(rng.randint(2, 3))]
            f.write(json.dumps({"source": " ".join(words),
                                "target": "\n".join(WORDS[w] for w in words)}) + "\n")
    out = tmp / "run"
    assert main(["train", "translate", "--data", str(tmp / "pairs.jsonl"), "--out", str(out),
                 "--max-steps", "200", *TINY]) == 0
    return out


@pytest.mark.slow
@pytest.mark.parametrize("command", [["translate"], ["predict"]])
def test_a_translation_that_spans_lines_is_printed_on_one_line(lines_run, tmp_path, capsys,
                                                                command):
    inputs = tmp_path / "inputs.txt"
    inputs.write_text("le café\nun thé lait\n", encoding="utf-8")
    argv = [*command, str(lines_run), "--input-file", str(inputs)]
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    written = [json.loads(line)["translation" if command == ["translate"] else "prediction"]
               for line in capsys.readouterr().out.splitlines()]
    assert written == ["the\ncoffee", "a\ntea\nmilk"]  # the run learnt its line breaks
    assert main(argv) == 0
    assert capsys.readouterr().out.split("\n") == ["the coffee", "a tea milk", ""]
