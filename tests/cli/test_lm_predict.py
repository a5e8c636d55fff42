"""`attnlab predict` on an lm run continues the whole prompt as `generate --greedy` does, for
`--max-new-tokens` tokens, and says where a prompt longer than the model reads is cut; an
exported lm says how far transformers' `generate` can go (issue #37, items 2 and 9c)."""
import json
import random
import shutil

import pytest

from attnlab.cli import main

pytestmark = pytest.mark.slow  # every test here reads a trained run

WORDS = "the terms of this license apply to all copies and any work based on the program".split()
PROMPTS = ["the terms of this License", "e", "xxxxxxxxxxxxxxxxxxxxe"]  # all end in "e"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lm32")
    rng = random.Random(0)
    (tmp / "t.txt").write_text(" ".join(rng.choice(WORDS) for _ in range(3000)), encoding="utf-8")
    assert main(["train", "lm", "--data", str(tmp / "t.txt"), "--out", str(tmp / "run"),
                 "--max-steps", "60", "--model-dim", "32", "--num-heads", "2",
                 "--num-layers", "1", "--dim-feedforward", "64", "--block-size", "32",
                 "--batch-size", "16", "--threads", "1"]) == 0
    return tmp / "run"


def _json_lines(capsys) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_predict_continues_each_whole_prompt_as_generate_greedy_does(run, tmp_path, capsys):
    """The old predict read only the prompt's last token at block size 32: every prompt
    ending in "e" got the same continuation."""
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n", encoding="utf-8")
    assert main(["predict", str(run), "--input-file", str(prompts), "--json",
                 "--max-new-tokens", "24"]) == 0
    predicted = [line["prediction"] for line in _json_lines(capsys)]
    assert main(["generate", str(run), "--input-file", str(prompts), "--json", "--greedy",
                 "--max-new-tokens", "24"]) == 0
    generated = [line["text"] for line in _json_lines(capsys)]
    assert predicted == generated
    assert len(set(predicted)) == len(PROMPTS)  # the prompts differ before their last "e"
    # one --input prints the same line as that input's line of the file
    assert main(["predict", str(run), "--input", PROMPTS[0], "--max-new-tokens", "24"]) == 0
    assert capsys.readouterr().out == predicted[0] + "\n"


def test_json_keeps_the_newlines_of_a_continuation_and_the_plain_line_is_one(tmp_path,
                                                                              capsys):
    """predict --json wrote a continuation's newlines as spaces: "\nab\nab" read back as
    " ab ab", not what the model (and generate --json) wrote."""
    (tmp_path / "lines.txt").write_text("ab\n" * 2000, encoding="utf-8")
    assert main(["train", "lm", "--data", str(tmp_path / "lines.txt"), "--out",
                 str(tmp_path / "run"), "--max-steps", "30", "--seed", "0", "--model-dim", "32",
                 "--num-heads", "2", "--num-layers", "1", "--dim-feedforward", "64",
                 "--block-size", "16", "--batch-size", "16", "--lr", "0.01",
                 "--threads", "1"]) == 0
    capsys.readouterr()
    run = str(tmp_path / "run")
    assert main(["generate", run, "--prompt", "ab", "--greedy", "--max-new-tokens", "6",
                 "--json"]) == 0
    generated = json.loads(capsys.readouterr().out)["text"]
    assert "\n" in generated  # the model learnt the lines
    assert main(["predict", run, "--input", "ab", "--max-new-tokens", "6", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["prediction"] == generated
    assert main(["predict", run, "--input", "ab", "--max-new-tokens", "6"]) == 0
    assert capsys.readouterr().out == generated.replace("\n", " ") + "\n"  # one line


def test_a_prompt_longer_than_the_block_is_continued_from_its_end_saying_so(run, capsys):
    long = " ".join(WORDS)  # 79 characters: the char model reads its last 31
    assert main(["predict", str(run), "--input", long, "--max-new-tokens", "40"]) == 0
    out, err = capsys.readouterr()
    assert err == f"note: --input has {len(long)} tokens; the model reads its last 31 " \
                  f"(--block-size 32)\n"
    assert main(["generate", str(run), "--prompt", long, "--greedy",
                 "--max-new-tokens", "40"]) == 0
    gen_out, gen_err = capsys.readouterr()
    assert gen_err == err.replace("--input", "--prompt")
    assert gen_out == long + out  # 40 new tokens past a 32-token context: the window slid


def test_the_default_length_is_the_runs_predict_tokens(run, tmp_path, capsys):
    old = tmp_path / "old"
    shutil.copytree(run, old)
    config = (old / "config.yaml").read_text()
    assert "predict_tokens: 100\n" in config
    (old / "config.yaml").write_text(config.replace("predict_tokens: 100\n",
                                                    "predict_tokens: 7\n"))
    assert main(["predict", str(old), "--input", "the terms"]) == 0
    default = capsys.readouterr().out
    assert main(["generate", str(old), "--prompt", "the terms", "--greedy",
                 "--max-new-tokens", "7"]) == 0
    assert default == capsys.readouterr().out.removeprefix("the terms")
    assert len(default) == 7 + 1  # 7 characters and the newline


def test_max_new_tokens_is_in_help_and_checked(run, capsys):
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    assert "--max-new-tokens N" in capsys.readouterr().out
    assert main(["predict", str(run), "--input", "the", "--max-new-tokens", "0"]) == 2
    assert capsys.readouterr().err == ("attnlab: error: --max-new-tokens must be a positive "
                                       "integer, got 0\n")


def test_max_new_tokens_is_refused_for_a_run_that_does_not_continue_text(tmp_path, capsys):
    from pathlib import Path

    reverse = tmp_path / "reverse"
    shutil.copytree(Path(__file__).parents[1] / "fixtures" / "reverse-trainer", reverse)
    assert main(["predict", str(reverse), "--input", "1 2 3", "--max-new-tokens", "5"]) == 2
    assert capsys.readouterr().err == (f"attnlab: error: --max-new-tokens is for lm runs; "
                                       f"{reverse} is a reverse run\n")


def test_export_says_how_far_transformers_can_generate(run, tmp_path, capsys):
    """transformers' generate indexes the learned position table past its 32 rows and fails:
    the export says so, with the number."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "hf"
    assert main(["export", str(run), "--hf", str(out)]) == 0
    err = capsys.readouterr().err
    assert ("note: the exported model reads at most 32 positions (n_positions, the run's "
            "--block-size): transformers' generate fails once prompt + max_new_tokens pass "
            "32 tokens") in err
    hf = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    with pytest.raises(IndexError):
        hf.generate(torch.tensor([[5, 6, 7]]), max_new_tokens=40, do_sample=False)


def test_a_continuation_s_line_ends_of_every_kind_print_as_spaces():
    """predict prints one line per input: a "\\r" (alone or in "\\r\\n") would otherwise move the
    terminal back to the line's start and print the rest over it; --json keeps the text."""
    from attnlab.tasks.lm.continuation import prediction_of

    got = prediction_of("the\r\ncoffee\rtea\u2028milk\n")
    assert got["line"] == "the coffee tea milk "
    assert got["prediction"] == "the\r\ncoffee\rtea\u2028milk\n"
