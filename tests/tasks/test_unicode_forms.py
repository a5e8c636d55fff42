"""A run trained on composed text (NFC) reads the same text typed decomposed (NFD: "e" and a
combining accent, as macOS file names and some editors write it) as the same input: the same
ids, the same prediction, and no note of unknown pieces (translate: test_translate_user.py)."""
import json
import random
import unicodedata

import pytest

from attnlab.cli import main

TINY = ["--model-dim", "32", "--num-heads", "2", "--num-layers", "1", "--dim-feedforward", "64",
        "--lr", "3e-3", "--warmup", "10", "--threads", "1"]


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


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


@pytest.fixture(scope="module")
def fr_run(tmp_path_factory):
    """A character language model trained on French text, composed (NFC)."""
    tmp = tmp_path_factory.mktemp("fr")
    text = "le café est très bon. la crème brûlée est très bonne. "
    (tmp / "fr.txt").write_text(text * 200, encoding="utf-8")
    out = tmp / "run"
    assert main(["train", "lm", "--data", str(tmp / "fr.txt"), "--tokenizer", "char",
                 "--out", str(out), "--max-steps", "80", "--block-size", "32", *TINY]) == 0
    return out


@pytest.mark.slow
def test_a_language_model_continues_a_decomposed_prompt_as_the_composed_one(fr_run, capsys):
    capsys.readouterr()
    said = []
    for prompt in ("le café", nfd("le café")):
        assert main(["generate", str(fr_run), "--prompt", prompt, "--max-new-tokens", "20",
                     "--greedy", "--json"]) == 0
        said.append(capsys.readouterr())
    assert json.loads(said[1].out)["text"] == json.loads(said[0].out)["text"]
    assert "unknown" not in said[1].err


@pytest.mark.slow
def test_generate_stops_at_a_stop_string_typed_decomposed(fr_run, capsys):
    """--stop "é" typed as e + U+0301 was never found in the run's composed text, so the
    output ran on past it; it stops where the composed --stop stops."""
    capsys.readouterr()
    printed = []
    for stop in (None, "é", nfd("é")):
        assert main(["generate", str(fr_run), "--prompt", "le caf", "--max-new-tokens", "30",
                     "--greedy", *(["--stop", stop] if stop else [])]) == 0
        printed.append(capsys.readouterr().out)
    assert printed[0].startswith("le café")  # the model has learnt the text: the é comes up
    assert printed[1] == printed[2] == "le caf\n"


def test_a_stop_string_that_normalises_longer_prints_none_of_itself():
    """In a run that reads NFKC, --stop "ﬁx" is searched as "fix": three characters, where
    the text held back was counted from the two typed, so "a f" was printed before the stop
    (review)."""
    from attnlab.tasks.lm.continuation import StopStreamer
    from attnlab.tokenizers import CharTokenizer

    tok = CharTokenizer.fit(["a fix the bug"], normalize="NFKC")
    stream, out = StopStreamer(tok, ["\ufb01x"]), ""
    for ch in "a fix the bug":
        out += stream.add(tok.encode(ch)[0])
        if stream.stopped:
            break
    assert stream.stopped and out == "a "
