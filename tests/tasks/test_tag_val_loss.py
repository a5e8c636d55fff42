"""``train tag``'s ``val_loss`` is the mean cross-entropy per labelled word of the whole
validation split (what --keep-best and --patience on val_loss compare), not a mean of per-batch
means: a batch of a few short sentences must not weigh as much as one of many long ones.

The check: a two-step run whose validation split has 60 one-word sentences and 10 of twelve
words (two batches of 64 and 6 sentences, 108 and 72 labelled words), then the loss computed by
hand from the saved weights, one sentence at a time. Tolerance: float32 sums over 180 words
(rtol 1e-5)."""
import csv
import json
import random

import pytest
import torch
import torch.nn.functional as F

import attnlab
from attnlab.cli import main
from attnlab.runs import read_yaml
from attnlab.tokenizers import UNK_ID

NAMES = ["John", "Mary", "Paris", "Rome"]
WORDS = ["lives", "in", "the", "city", "and", "walks", "near", "a", "river"]
TINY = ["--max-steps", "2", "--val-every", "2", "--model-dim", "16", "--num-heads", "2",
        "--num-layers", "1", "--dim-feedforward", "16", "--warmup", "1", "--threads", "1",
        "--seed", "3"]


def sentences(rng, n, length):
    out = []
    for _ in range(n):
        words = [rng.choice(NAMES + WORDS) for _ in range(length)]
        out.append((words, ["B-X" if w[0].isupper() else "O" for w in words]))
    return out


def write_conll(path, rows):
    path.write_text("".join("".join(f"{w} {t}\n" for w, t in zip(words, tags)) + "\n"
                            for words, tags in rows))
    return path


@pytest.mark.slow
def test_val_loss_is_the_mean_per_labelled_word_of_the_whole_split(tmp_path):
    rng = random.Random(0)
    train = [s for n in range(2, 7) for s in sentences(rng, 8, n)]
    val = sentences(rng, 60, 1) + sentences(rng, 10, 12)
    run = tmp_path / "run"
    assert main(["train", "tag", "--data", str(write_conll(tmp_path / "train.conll", train)),
                 "--val", str(write_conll(tmp_path / "val.conll", val)),
                 "--out", str(run), *TINY]) == 0

    model, tokenizer = attnlab.load(run)  # the weights of step 2, the step validated last
    tags = read_yaml(run / "config.yaml")["tags"]
    total, words = 0.0, 0
    with torch.no_grad():
        for sentence, truth in val:
            ids = torch.tensor([[tokenizer.index.get(w, UNK_ID) for w in sentence]])  # (1, T)
            logits = model(ids)[0]  # (T, C)
            target = torch.tensor([tags.index(t) for t in truth])  # (T,)
            total += float(F.cross_entropy(logits, target, reduction="sum"))
            words += len(sentence)
    by_hand = total / words

    reported = json.loads((run / "metrics.json").read_text())["val_loss"]
    with open(run / "logs" / "metrics.csv") as f:
        logged = [float(r["val_loss"]) for r in csv.DictReader(f) if r.get("val_loss")]
    torch.testing.assert_close(reported, by_hand, rtol=1e-5, atol=0.0)
    torch.testing.assert_close(logged[-1], by_hand, rtol=1e-5, atol=0.0)
