"""A run trained on composed text (NFC) reads the same text typed decomposed (NFD: "e" and a
combining accent, as macOS file names and some editors write it) as the same input: the same
ids, the same prediction, and no note of unknown pieces."""
import json
import random
import unicodedata

import pytest

import attnlab
from attnlab.cli import main

TINY = ["--model-dim", "32", "--num-heads", "2", "--num-layers", "1", "--dim-feedforward", "64",
        "--lr", "3e-3", "--warmup", "10", "--threads", "1"]
FRENCH = {"le": "the", "un": "a", "café": "coffee", "thé": "tea", "crème": "cream",
          "été": "summer", "élève": "pupil"}


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


@pytest.fixture(scope="module")
def translate_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nfc")
    rng = random.Random(0)
    rows = []
    for _ in range(400):
        words = [rng.choice(list(FRENCH)) for _ in range(rng.randint(1, 4))]
        rows.append(" ".join(words) + "\t" + " ".join(FRENCH[w] for w in words))
    (tmp / "pairs.tsv").write_text("source\ttarget\n" + "\n".join(rows) + "\n", encoding="utf-8")
    out = tmp / "run"
    assert main(["train", "translate", "--data", str(tmp / "pairs.tsv"), "--out", str(out),
                 "--max-steps", "150", *TINY]) == 0
    return out


@pytest.mark.slow
def test_translate_reads_decomposed_accents_as_the_composed_text(translate_run, capsys):
    capsys.readouterr()
    text = "le café été"
    assert main(["translate", str(translate_run), text, nfd(text), "--json"]) == 0
    out = capsys.readouterr()
    composed, decomposed = [json.loads(line) for line in out.out.splitlines()]
    assert composed["translation"] == "the coffee summer"  # the run learnt the words
    assert decomposed["translation"] == composed["translation"]
    assert "unknown" not in out.err
    _, tok = attnlab.load(translate_run)
    assert tok.encode(nfd(text)) == tok.encode(text)


@pytest.mark.slow
def test_a_tagger_reads_a_decomposed_name_as_the_word_it_learnt(tmp_path, capsys):
    rng = random.Random(1)
    names, words = ["José", "Zoë", "Mégane", "Renée"], ["vit", "à", "la", "ville", "et", "marche"]
    lines = []
    for _ in range(200):
        sentence = [rng.choice(names) if rng.random() < 0.3 else rng.choice(words)
                    for _ in range(rng.randint(3, 7))]
        lines.append("".join(f"{w} {'B-X' if w in names else 'O'}\n" for w in sentence))
    (tmp_path / "names.conll").write_text("\n".join(lines), encoding="utf-8")
    out = tmp_path / "run"
    assert main(["train", "tag", "--data", str(tmp_path / "names.conll"), "--out", str(out),
                 "--max-steps", "60", *TINY]) == 0
    capsys.readouterr()
    text = "Zoë et José vit à la ville"
    assert main(["predict", str(out), "--input", text, "--json"]) == 0
    composed = json.loads(capsys.readouterr().out)
    assert main(["predict", str(out), "--input", nfd(text), "--json"]) == 0
    result = capsys.readouterr()
    assert json.loads(result.out)["prediction"] == composed["prediction"]
    assert composed["prediction"][:3] == ["B-X", "O", "B-X"]
    assert "unknown" not in result.err
