"""``attnlab train translate``: tiny end-to-end runs (built-in numbers and --data FILE), the run
directory, evaluate/predict/load, metrics, and the usage errors (exit 2, one line)."""
import csv
import json
import math

import pytest
import torch

import attnlab
from attnlab.cli import main
from attnlab.tasks import get_task
from attnlab.tasks.base import line_of
from attnlab.tasks.translate.data import TranslationTokenizers
from attnlab.tasks.translate.scoring import score

TINY = ["--model-dim", "16", "--num-heads", "2", "--num-layers", "1", "--dim-feedforward", "32",
        "--batch-size", "16", "--warmup", "5", "--vocab-size", "270"]


@pytest.fixture(scope="module")
def number_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "numbers"
    code = main(["train", "translate", "--out", str(out), "--max-number", "200", "--test-size", "12",
                 "--val-size", "6", "--max-steps", "40", "--lr", "3e-3", *TINY])
    assert code == 0
    return out


@pytest.mark.slow
def test_number_run_writes_the_run_directory(number_run):
    for name in ("config.yaml", "model.safetensors", "tokenizer.json", "target_tokenizer.json",
                 "metrics.json", "cross_attention.png"):
        assert (number_run / name).is_file(), name
    metrics = json.loads((number_run / "metrics.json").read_text())
    assert set(metrics) >= {"test_exact_match", "test_bleu", "test_chrf", "steps",
                            "train_seconds", "parameters"}
    assert metrics["steps"] == 40
    assert 0.0 <= metrics["test_exact_match"] <= 1.0 and 0.0 <= metrics["test_chrf"] <= 100.0
    # training did something: the logged loss fell
    rows = list(csv.DictReader(open(number_run / "logs" / "metrics.csv")))
    losses = [float(r["train_loss"]) for r in rows if r.get("train_loss")]
    assert losses[-1] < losses[0] - 0.5
    # a file's settings are not recorded for a run on the built-in data, but for the
    # columns by which `evaluate --data FILE` reads one
    cfg = _cfg(number_run)
    assert "test" not in cfg and {"src_column", "tgt_column"} <= set(cfg)


@pytest.mark.slow
def test_evaluate_reproduces_the_test_metrics_and_load_returns_model_and_tokenizers(number_run, capsys):
    saved = json.loads((number_run / "metrics.json").read_text())
    capsys.readouterr()
    assert main(["evaluate", str(number_run)]) == 0
    again = json.loads(capsys.readouterr().out)
    for key in ("test_exact_match", "test_bleu", "test_chrf"):
        assert again[key] == pytest.approx(saved[key], abs=1e-9)
    model, tok = attnlab.load(number_run)
    assert isinstance(tok, TranslationTokenizers) and not model.training
    src = torch.tensor([tok.encode("one hundred and seven")])
    out = model.generate(src, _cfg(number_run)["max_target_len"])
    expected = tok.decode(out[0, 1:].tolist())
    task = get_task("translate")
    cfg = task.typed(_cfg(number_run), number_run)
    found = task.runtime().predict_many(task, number_run, cfg, ["one hundred and seven"],
                                        ["--input"])
    assert line_of(found[0]) == expected
    # digits are spelled in the source language first
    assert task.runtime().translate(task, number_run, cfg, ["107"]) == [expected]


@pytest.mark.slow
def test_evaluate_data_reads_a_source_of_digits_as_translate_does(number_run, tmp_path, capsys):
    """evaluate --data read "107" as an unknown word (scores near 0, no word said) where
    translate reads it as "one hundred and seven"; digits outside the run's numbers are refused
    naming the line, as translate refuses them."""
    scores = []
    for source in ("one hundred and seven", "107"):
        (tmp_path / "p.csv").write_text(f"source,target\n{source},hundertsieben\n")
        assert main(["evaluate", str(number_run), "--data", str(tmp_path / "p.csv")]) == 0
        scores.append(json.loads(capsys.readouterr().out))
    assert scores[1] == scores[0]
    (tmp_path / "p.csv").write_text("source,target\n7,sieben\n200,zweihundert\n")
    assert main(["evaluate", str(number_run), "--data", str(tmp_path / "p.csv")]) == 2
    assert capsys.readouterr().err == (
        f"attnlab: error: --data {tmp_path / 'p.csv'} line 3 (200) is outside the numbers this "
        f"run was trained on: 0 to 199 (max_number 200 in config.yaml)\n")


@pytest.mark.slow
def test_evaluate_data_is_sacrebleu_on_what_translate_writes(number_run, tmp_path, capsys):
    """A user's check: translate the sources of a file with `attnlab translate`, score them
    against the references with sacrebleu (character BLEU: one-word references) and by hand
    (exact match); evaluate --data on the file gives those numbers. (The run is barely
    trained: the first reference is its own translation, so that some of it scores.)"""
    import sacrebleu

    sources = ["one hundred and seven", "twelve", "ninety nine", "three", "zero"]
    capsys.readouterr()
    assert main(["translate", str(number_run), *sources, "--json"]) == 0
    hyps = [json.loads(line)["translation"] for line in capsys.readouterr().out.splitlines()]
    refs = [hyps[0], "zwölf", "neunundneunzig", "drei", "null"]
    with open(tmp_path / "p.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("source", "target"), *zip(sources, refs)])
    assert main(["evaluate", str(number_run), "--data", str(tmp_path / "p.csv")]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["test_exact_match"] == pytest.approx(
        sum(h == r for h, r in zip(hyps, refs)) / len(refs), abs=1e-6)
    bleu = sacrebleu.corpus_bleu(hyps, [refs], tokenize="char").score
    assert got["test_bleu"] == pytest.approx(bleu, rel=1e-5) and bleu > 0
    assert got["test_chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score, rel=1e-5)


def _cfg(run_dir):
    from attnlab.runs import read_yaml

    return read_yaml(run_dir / "config.yaml")


@pytest.mark.slow
def test_user_data_file_with_custom_columns(tmp_path, capsys):
    data = tmp_path / "pairs.tsv"
    words = ["a", "b", "c", "d", "e"]
    lines = ["en\tde"] + [f"{x} {y}\t{y} {x}" for x in words for y in words]
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    code = main(["train", "translate", "--data", str(data), "--src-column", "en", "--tgt-column", "de",
                 "--tgt-tokenizer", "word", "--out", str(out), "--max-steps", "15", "--val-size", "2",
                 *TINY])
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert {"test_exact_match", "test_bleu", "test_chrf"} <= set(metrics)
    cfg = _cfg(out)
    assert cfg["data"] == str(data.resolve()) and cfg["tgt_tokenizer"] == "word"
    # the built-in data's settings are not recorded for a run that trained on a file
    assert not {"dataset", "src", "tgt", "max_number", "test_size"} & set(cfg)
    assert main(["predict", str(out), "--input", "a b"]) == 0
    # evaluate re-draws the held-out rows from the same file; a changed file is refused
    assert main(["evaluate", str(out)]) == 0
    # another file is read with the run's columns, or with those named as train names them
    capsys.readouterr()
    own, other = tmp_path / "own.tsv", tmp_path / "other.tsv"
    own.write_text("\n".join(lines[:6]) + "\n")
    other.write_text("\n".join(["source\ttarget", *lines[1:6]]) + "\n")
    assert main(["evaluate", str(out), "--data", str(own)]) == 0
    expected = json.loads(capsys.readouterr().out)
    assert main(["evaluate", str(out), "--data", str(other), "--src-column", "source",
                 "--tgt-column", "target"]) == 0
    assert json.loads(capsys.readouterr().out) == expected
    assert main(["evaluate", str(out), "--data", str(other), "--src-column", "source",
                 "--tgt-column", "source"]) == 2
    assert "--src-column and --tgt-column are both 'source'" in capsys.readouterr().err
    data.write_text("\n".join(lines[:-1]) + "\n")
    capsys.readouterr()
    assert main(["evaluate", str(out)]) == 2
    assert f"--data {data.resolve()} changed since this run was trained" in capsys.readouterr().err


@pytest.mark.slow
def test_val_every_of_a_data_run_is_honoured(tmp_path):
    """`train translate --data FILE --val-every N` once validated once an epoch whatever N was
    (the flag was taken and ignored); it now validates every N steps."""
    data = tmp_path / "pairs.tsv"
    words = ["a", "b", "c", "d", "e", "f"]
    lines = ["en\tde"] + [f"{x} {y}\t{y} {x}" for x in words for y in words]
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    assert main(["train", "translate", "--data", str(data), "--src-column", "en",
                 "--tgt-column", "de", "--tgt-tokenizer", "word", "--out", str(out),
                 "--max-steps", "6", "--val-every", "3", "--val-size", "2", *TINY]) == 0
    rows = list(csv.DictReader(open(out / "logs" / "metrics.csv")))
    # 30 training pairs in batches of 16: an epoch is 2 steps (it validated at 2, 4 and 6)
    assert [int(r["step"]) for r in rows if r.get("val_loss")] == [3, 6]
    assert _cfg(out)["val_every"] == 3


def test_length_penalty_of_a_greedy_run_is_refused(tmp_path, capsys):
    """`train translate --length-penalty F` with --beam 1 (greedy testing) is refused: it was
    once taken and ignored."""
    out = tmp_path / "r"
    code, err = error_of(capsys, ["train", "translate", "--out", str(out),
                                  "--length-penalty", "0.6"])
    assert code == 2 and err == ("attnlab: error: --length-penalty: for beam search (--beam N > "
                                 "1) only; with --beam 1 the test translations are greedy\n")
    assert not out.exists()


@pytest.mark.parametrize("kinds, refused", [(("word", "word"), True), (("char", "word"), True),
                                            (("word", "bpe"), False)])
def test_a_vocab_size_no_bpe_tokenizer_uses_is_refused(tmp_path, capsys, kinds, refused):
    """`--src-tokenizer word --tgt-tokenizer word --vocab-size 300` trained with every word of
    the pairs, the size taken and silently unused."""
    out = tmp_path / "r"
    flags = ["train", "translate", "--out", str(out), "--src-tokenizer", kinds[0],
             "--tgt-tokenizer", kinds[1], "--vocab-size", "300", "--max-steps", "1", *TINY]
    if not refused:  # one side fits a BPE of that size: the flag is used
        assert main(flags) == 0  # (a BPE fit on few pairs may stop short of 300 pieces)
        assert _cfg(out)["tgt_tokenizer"] == "bpe" and 260 <= _cfg(out)["vocab_size"] <= 300
        return
    code, err = error_of(capsys, flags)
    assert code == 2 and err == (f"attnlab: error: --vocab-size: the BPE vocabulary's size; "
                                 f"--src-tokenizer {kinds[0]} and --tgt-tokenizer {kinds[1]} "
                                 f"keep every symbol of the training pairs\n")
    assert not out.exists()


def test_score_counts_exact_matches_and_uses_character_bleu_for_one_word_targets():
    refs = ["dreihundert", "zweitausendeins", "null", "sieben"]
    perfect = score(refs, refs)
    assert perfect == {"test_exact_match": 1.0, "test_bleu": pytest.approx(100.0),
                       "test_chrf": pytest.approx(100.0)}
    half = score(["dreihundert", "zweitausendzwei", "eins", "sieben"], refs)
    assert half["test_exact_match"] == 0.5 and 0 < half["test_bleu"] < 100


def test_auto_bleu_of_sentences_counts_words_and_the_brevity_penalty_of_a_short_and_an_empty_one():
    """What ``score`` decides before sacrebleu counts (not sacrebleu's arithmetic, which it
    calls): references of four or more words are tokenised as 13a, and a short and an empty
    translation are scored, not dropped. Every word the model wrote is right, so BLEU is 100 ·
    the brevity penalty alone, exp(1 − 22/15): 22 reference words, 15 written."""
    refs = ["the cat sat on the mat today", "a dog ran in the park", "it rains again this week",
            "we like green tea"]
    hyps = ["the cat sat on the mat", "", " it rains again this week ", "we like green tea"]
    found = score(hyps, refs)
    assert found == score(hyps, refs, bleu_tokenize="13a")
    assert found["test_bleu"] == pytest.approx(100 * math.exp(1 - 22 / 15), rel=1e-12)
    assert found["test_exact_match"] == 2 / 4  # the spaced third and the fourth


def test_auto_bleu_of_one_word_references_counts_characters():
    """A one-word reference has no 4-gram of words, so 13a would score every translation 0."""
    refs, hyps = ["dreihundert", "zweitausendeins", "elf"], ["dreihundert", "zweitausend", ""]
    found = score(hyps, refs)
    assert found == score(hyps, refs, bleu_tokenize="char") and 0 < found["test_bleu"] < 100
    assert score(hyps, refs, bleu_tokenize="13a")["test_bleu"] == 0.0
    assert found["test_exact_match"] == 1 / 3


def test_scores_count_case_and_inner_spaces_but_not_the_spaces_around_a_text():
    """As docs/translation.md#metrics says it."""
    perfect = {"test_exact_match": 1.0, "test_bleu": pytest.approx(100.0),
               "test_chrf": pytest.approx(100.0)}
    assert score(["drei hundert"], ["  drei hundert \t"]) == perfect  # character BLEU
    words = "es ist drei Uhr am Morgen"  # enough words for BLEU's 4-grams (13a)
    assert score([f" {words}"], [f"{words}  "], bleu_tokenize="13a") == perfect
    upper = score([words.upper()], [words], bleu_tokenize="13a")
    assert upper["test_exact_match"] == 0.0 and upper["test_bleu"] < 100
    assert upper["test_chrf"] < 100
    spaced = score([words.replace(" ", "  ")], [words], bleu_tokenize="13a")
    assert spaced == {**perfect, "test_exact_match": 0.0}


def test_a_translation_that_prints_as_its_reference_scores_as_one_in_any_unicode_form():
    """A reference in decomposed form (NFD, as a Mac may store "é") once scored the model's
    composed "é" as wrong: exact match 0, BLEU 59.5, chrF 44.1 for identical-looking text."""
    composed, decomposed = "un caf\u00e9 noir", "un cafe\u0301 noir"
    assert score([composed], [decomposed]) == {"test_exact_match": 1.0,
                                               "test_bleu": pytest.approx(100.0),
                                               "test_chrf": pytest.approx(100.0)}


def test_a_run_that_reads_compatibility_forms_is_scored_in_them():
    """A run whose --config chose NFKC learnt "fi" and "2" for "ﬁ" and "²": its right answer
    scored 0 against the reference as typed. Scored in NFKC, it is right; an NFC run's "fi"
    is still not the reference's "ﬁ"."""
    hyp, ref = "le film numéro 2", "le \ufb01lm numéro \u00b2"
    assert score([hyp], [ref], run_form="NFKC")["test_exact_match"] == 1.0
    assert score([hyp], [ref], run_form="NFKD")["test_exact_match"] == 1.0
    assert score([hyp], [ref], run_form="NFC")["test_exact_match"] == 0.0


def error_of(capsys, argv):
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    return code, err


def test_unknown_language_is_a_usage_error_naming_it(capsys, tmp_path):
    code, err = error_of(capsys, ["train", "translate", "--tgt", "klingon", "--out", str(tmp_path / "r")])
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "--tgt: unknown language 'klingon'" in err and "e.g. en, de, fr" in err
    assert not (tmp_path / "r").exists()  # nothing was written


@pytest.mark.parametrize("content, needle", [
    ("source,text\none,eins\n", "no column 'target' (columns: source, text)"),
    ("source,target\none,eins,zwei\n", "line 2: 3 fields, but the header has 2"),
    ("source,target\none,\n", "line 2: empty value in column 'target'"),
])
def test_malformed_data_file_is_a_usage_error_naming_file_and_problem(capsys, tmp_path, content, needle):
    data = tmp_path / "bad.csv"
    data.write_text(content)
    code, err = error_of(capsys, ["train", "translate", "--data", str(data), "--out", str(tmp_path / "r")])
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert str(data) in err and needle in err


@pytest.mark.parametrize("argv, needle", [
    (["--data", "missing.csv"], "--data: file not found: missing.csv"),
    (["--epochs", "2"], "--epochs: the built-in numbers are generated without end"),
    (["--max-number", "100", "--test-size", "60"], "--test-size + --val-size (260) must be at most half"),
    (["--vocab-size", "100"], "--vocab-size must be an integer >= 260, got 100"),
    (["--dataset", "dates", "--src", "klingon"], "--src: unknown locale 'klingon'; babel writes dates"),
    (["--src-tokenizer", "sentencepiece"], "argument --src-tokenizer: invalid choice"),
])
def test_bad_flags_are_usage_errors(capsys, tmp_path, argv, needle):
    code, err = error_of(capsys, ["train", "translate", "--out", str(tmp_path / "r"), *argv])
    assert code == 2 and err.count("\n") == 1 and needle in err, err


@pytest.mark.slow
def test_plot_attention_shows_cross_attention_of_the_models_translation(number_run, tmp_path):
    from attnlab.tasks.translate.runtime import cross_attention_maps

    out = tmp_path / "a.png"
    assert main(["plot", "attention", str(number_run), "--input", "12", "--out", str(out)]) == 0
    assert out.stat().st_size > 1000
    model, tok = attnlab.load(number_run)
    maps, x_labels, y_labels = cross_attention_maps(model, tok, "twelve", "zwölf")
    assert x_labels == ["twelve"] and y_labels[0] == "<sos>"
    assert len(maps) == 1 and maps[0].shape == (2, len(y_labels), 1)  # L × (H, T, S)
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(2, len(y_labels)))  # rows are softmaxes


@pytest.mark.slow
@pytest.mark.parametrize("flags, expected", [
    ({}, ("word", "bpe")),                            # English words; German numbers are one word
    ({"max_number": 10_000_000}, ("word", "bpe")),    # German millions: words the sample lacks
    ({"src": "de", "tgt": "en", "max_number": 10_000_000}, ("bpe", "word")),
    ({"dataset": "dates"}, ("word", "word")),
])
def test_auto_tokenizers_can_write_every_test_target(flags, expected):
    """``auto`` takes a word tokeniser only where the words are a closed set: with German
    numbers up to 10^7 (several words, most rows with a word no other row has) words would make
    most test targets <unk>, which no model can write."""
    from attnlab.commands.train import build_config
    from attnlab.tasks.translate.data import builtin_splits, fit_tokenizer, resolve_tokenizer

    cfg = build_config("translate", {"out": "unused", **flags})
    stream, _, test = builtin_splits(cfg)
    sample = stream.sample(5000)  # what training fits its tokenisers on (TOKENIZER_SAMPLE)
    kinds = tuple(resolve_tokenizer("auto", [p[side] for p in sample], builtin=True)
                  for side in (0, 1))
    assert kinds == expected
    tgt = fit_tokenizer(kinds[1], [t for _, t in sample], cfg["vocab_size"])
    targets = [t for _, t in test[:300]]
    assert [tgt.decode(tgt.encode(t)) for t in targets] == targets


@pytest.mark.slow
def test_config_yaml_records_the_tokenisers_auto_chose_before_training(tmp_path, monkeypatch):
    """--resume rebuilds the run from config.yaml: it must hold the kinds ``auto`` chose when
    training started (not ``auto``, which a later rule could resolve otherwise), and the same
    command given again with --resume, ``auto`` and all, must continue the run."""
    import attnlab.training.engine as engine
    from attnlab.runs import read_yaml

    run = tmp_path / "run"
    real_run, seen = engine.Loop.run, []

    def train(self):  # the loop, as it starts training
        seen.append(read_yaml(run / "config.yaml"))
        return real_run(self)

    monkeypatch.setattr(engine.Loop, "run", train)
    argv = ["train", "translate", "--out", str(run), "--max-number", "300", "--test-size", "8",
            "--val-size", "4", "--tgt-tokenizer", "auto", *TINY]
    assert main([*argv, "--max-steps", "2"]) == 0
    assert (seen[0]["src_tokenizer"], seen[0]["tgt_tokenizer"]) == ("word", "bpe")
    # two steps: an untrained model's translation, whose bytes decode to broken characters that
    # encode back longer than the model reads; its figure once crashed the finished run
    assert (run / "cross_attention.png").is_file() and (run / "metrics.json").is_file()
    assert main([*argv, "--max-steps", "4", "--resume"]) == 0
    assert json.loads((run / "metrics.json").read_text())["steps"] == 4


def test_only_the_built_in_numbers_refuse_digits_outside_their_range():
    from attnlab.errors import UsageError
    from attnlab.tasks.translate.data import spell_digits

    numbers = get_task("translate").config(src="en", max_number=1000, dataset="numbers",
                                           data=None)
    assert spell_digits(numbers, ["999", " 7 ", "seven"]) == ["nine hundred and ninety-nine",
                                                               "seven", "seven"]
    with pytest.raises(UsageError, match=r"^--input \(1000\) is outside the numbers this run "
                                         r"was trained on: 0 to 999 \(max_number 1000 in"):
        spell_digits(numbers, ["1000"], ["--input"])
    # a user's --data run and the dates learnt no numbers: digits are their text, unchanged
    big = "99999999999999999999999"
    assert spell_digits(get_task("translate").config(data="pairs.csv"), [big]) == [big]
    assert spell_digits(get_task("translate").config(dataset="dates"), [big]) == [big]


def test_a_nan_row_of_a_batch_is_not_noted_as_cut_short():
    """A batch with one text of NaN outputs (answered null) noted that text's translation as
    "may be cut short", a translation never printed."""
    from types import SimpleNamespace

    from attnlab.tasks.translate.scoring import translate_texts

    class Tok:  # each text's ids: its length, once per character
        src = SimpleNamespace(pad_id=0)

        def encode_sources(self, texts):
            return [[len(t)] * len(t) for t in texts]

        def decode(self, ids):
            return "w" * len(ids)

    class NoEnd:  # never writes its end token; a source of 3s gives NaN logits
        eos_id = 2

        def generate(self, src, max_new_tokens, *, num_beams, length_penalty, finite):
            finite += [bool(row[0] != 3) for row in src]
            return torch.full((len(src), max_new_tokens + 1), 5)

    unfinished, finite = [], []
    out = translate_texts(NoEnd(), Tok(), ["ab", "abc"], max_new_tokens=4,
                          unfinished=unfinished, finite=finite)
    assert out == ["wwww", "wwww"] and finite == [True, False]
    assert unfinished == [0]
