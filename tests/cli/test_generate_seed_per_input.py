"""``attnlab generate --input-file F --seed S`` samples prompt number k with seed S+k-1, so a
prompt's text does not depend on the lines before it: the user who takes line k out of the file
and runs it alone with ``--prompt`` and ``--seed S+k-1`` gets the text the file gave. Before,
one generator ran on through the file, and the same line after other lines sampled other
text."""
import json

import pytest

from attnlab.cli import main
from tests.reliability.conftest import tiny_args, write_corpus

PROMPTS = ["the", "a fox", "lazy", "the quick"]
SAMPLE = ["--max-new-tokens", "12", "--temperature", "1.5", "--json"]


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("seeded")
    run = tmp / "lm"
    data = {"lm": write_corpus(tmp / "corpus.txt")}
    assert main(["train", "lm", *tiny_args("lm", data, "--max-steps", "2"), "--out",
                 str(run)]) == 0
    return run


def texts(capsys, run, *argv):
    assert main(["generate", str(run), *argv, *SAMPLE]) == 0
    return [json.loads(line)["text"] for line in capsys.readouterr().out.splitlines()]


@pytest.mark.slow  # trains a run
def test_each_line_is_the_text_of_its_prompt_alone_with_its_seed(lm_run, tmp_path, capsys):
    path = tmp_path / "prompts.txt"
    path.write_text("\n".join(PROMPTS) + "\n", encoding="utf-8")
    together = texts(capsys, lm_run, "--input-file", str(path), "--seed", "40")
    alone = [texts(capsys, lm_run, "--prompt", prompt, "--seed", str(40 + k))[0]
             for k, prompt in enumerate(PROMPTS)]
    assert together == alone
    assert len(set(alone)) > 1  # sampled: the seeds give different texts


def test_help_says_how_to_sample_one_line_again(capsys):
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    assert "seed S+k-1 (mod 2^32)" in " ".join(capsys.readouterr().out.split())


@pytest.mark.slow
def test_a_hugging_face_directory_seeds_each_line_alike(tmp_path, capsys):
    pytest.importorskip("transformers")
    import torch

    from tests.interop.test_checkpoint import save_gpt2

    torch.manual_seed(4)
    gpt2 = save_gpt2(tmp_path / "gpt2", extra_rows=0)
    path = tmp_path / "prompts.txt"
    path.write_text("the cat\nthe dog\n", encoding="utf-8")
    together = texts(capsys, gpt2, "--input-file", str(path), "--seed", "7")
    assert together == [texts(capsys, gpt2, "--prompt", prompt, "--seed", str(7 + k))[0]
                        for k, prompt in enumerate(["the cat", "the dog"])]
