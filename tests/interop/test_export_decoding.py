"""``attnlab export`` of a translate run writes how the run decodes into
``generation_config.json`` (its beams, length penalty and longest output), so that
``transformers``' ``generate`` with no arguments translates as ``attnlab translate RUN`` does,
not greedily and cut at transformers' own default of 20 tokens; a ``max_length`` given to
``generate`` still wins."""
import csv
import json
import random

import pytest
import torch

from attnlab.cli import main

from .conftest import transformers  # noqa: F401  (skips without the hf extra)

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
TINY = ["--max-steps", "2", "--warmup", "1", "--model-dim", "16", "--num-heads", "2",
        "--num-layers", "1", "--dim-feedforward", "32", "--threads", "1",
        "--src-tokenizer", "word", "--tgt-tokenizer", "word"]


def _pairs(path):
    """Pairs whose targets (24 words) are longer than transformers' default of 20 tokens."""
    rng = random.Random(0)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["source", "target"])
        for _ in range(200):
            words = [rng.choice(WORDS) for _ in range(12)]
            writer.writerow([" ".join(words), " ".join(words[::-1] + words)])
    return path


@pytest.mark.slow  # trains a run
def test_transformers_translates_an_exported_beam_run_as_attnlab_translate_does(tmp_path,
                                                                                capsys):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    run, out = tmp_path / "run", tmp_path / "hf"
    assert main(["train", "translate", "--data", str(_pairs(tmp_path / "pairs.csv")),
                 "--out", str(run), "--beam", "3", "--length-penalty", "0.5", *TINY]) == 0
    assert main(["export", str(run), "--hf", str(out)]) == 0
    written = json.loads((out / "generation_config.json").read_text())
    assert (written["num_beams"], written["length_penalty"]) == (3, 0.5)
    # attnlab's beams end as transformers' "never" (its default, False, gave other ids in 30 of
    # 120 tiny random Marian models' seeds, beams and penalties, the review found)
    assert written["early_stopping"] == "never"
    hf = AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    source = AutoTokenizer.from_pretrained(out)
    target = AutoTokenizer.from_pretrained(out / "target_tokenizer")
    texts = [" ".join(WORDS), "gamma delta mu"]
    capsys.readouterr()
    assert main(["translate", str(run), *texts]) == 0
    ours = capsys.readouterr().out.splitlines()
    with torch.no_grad():
        theirs = [target.decode(hf.generate(**source([text], return_tensors="pt"))[0],
                                skip_special_tokens=True) for text in texts]
    assert theirs == ours
    with torch.no_grad():  # a length given to generate still wins over the file's
        shorter = hf.generate(**source(texts[:1], return_tensors="pt"), max_length=8)
    assert shorter.shape[1] == 8
