"""`evaluate DIR --data FILE` of a translate run reads, translates and scores a long file a
chunk of pairs at a time, as classify, tag and sets runs do (it held every pair, its
translation and sacrebleu's statistics of them all: a file of 10^5 pairs took twice the memory
of 10^4). The scores are those of all the pairs at once, exactly: BLEU and chrF from n-gram
counts summed over the chunks, exact match from a count. The chunk is made small here (8 pairs)
so that a file of 61 pairs has eight."""
from __future__ import annotations

import json

import pytest
import sacrebleu

import attnlab.tasks.translate.runtime as translate_runtime
import attnlab.tasks.translate.scoring as scoring
from attnlab.cli import main
from attnlab.data.numbers import spell
from attnlab.loading import check_run_dir
from attnlab.tasks import get_task

from .test_evaluate_streams import _chunks  # uneven chunks covering 0..n-1

PAIRS = 61


def _texts():
    """Hypotheses and references of some words each, some equal, some not, one of them
    written with a combining accent (compared in one Unicode form)."""
    refs = [f"{spell(n, 'de')} und {spell(n + 1, 'de')} katzen" for n in range(203)]
    hyps = [r if n % 3 == 0 else f"{spell(n + n % 5, 'de')} und katzen" for n, r in
            enumerate(refs)]
    refs[4], hyps[4] = "cafe\u0301 au lait", "café au lait"
    return hyps, refs


@pytest.mark.parametrize("tokenize", ["13a", "char"])
def test_scores_tallied_in_chunks_are_sacrebleus_of_all_pairs_at_once(tokenize):
    hyps, refs = _texts()
    tally = scoring.Tally(tokenize)
    for part in _chunks(len(refs)):
        tally.add(hyps[part], refs[part])
    scores = tally.scores()
    hyps_nfc, refs_nfc = scoring.same_form(hyps), scoring.same_form(refs)
    # sacrebleu's defaults: BLEU smooth exp, 4-grams, no lowercasing; chrF 6 char, 0 word, beta 2
    bleu = sacrebleu.corpus_bleu(hyps_nfc, [refs_nfc], tokenize=tokenize).score
    chrf = sacrebleu.corpus_chrf(hyps_nfc, [refs_nfc]).score
    assert abs(scores["test_bleu"] - bleu) <= 1e-12 and 0 < bleu < 100
    assert abs(scores["test_chrf"] - chrf) <= 1e-12
    assert scores["test_exact_match"] == sum(n % 3 == 0 or n == 4 for n in range(203)) / 203
    assert scores == scoring.score(hyps, refs, bleu_tokenize=tokenize)  # all at once


def _pairs_file(path):
    """A TSV of PAIRS number pairs (English, German), a third of the references wrong."""
    rows = [(spell(n, "en"), spell(n if n % 3 else n + 1, "de")) for n in range(3, 3 + PAIRS)]
    path.write_text("source\ttarget\n" + "".join(f"{s}\t{t}\n" for s, t in rows),
                    encoding="utf-8")
    return path, rows


@pytest.mark.slow  # reads the session's translate run (tests/cli/conftest.py)
def test_evaluate_data_scores_a_chunk_at_a_time_as_the_whole_file(runs, tmp_path, monkeypatch,
                                                                 capsys):
    run = runs["translate"][0]
    data, rows = _pairs_file(tmp_path / "pairs.tsv")
    run_dir, cfg = check_run_dir(str(run), command="evaluate")
    model, tok = translate_runtime.load(get_task("translate"), run_dir, cfg)
    whole, hyps = scoring.compute_test_metrics(model, tok, rows, cfg)  # every pair at once
    sizes = []
    real = scoring.translate_texts
    monkeypatch.setattr(scoring, "translate_texts",
                        lambda model, tok, texts, **kw: sizes.append(len(texts)) or real(
                            model, tok, texts, **kw))
    monkeypatch.setattr(translate_runtime, "CHUNK_ROWS", 8, raising=False)  # (none before)
    capsys.readouterr()
    assert main(["evaluate", str(run), "--data", str(data), "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    scores = json.loads(out)
    assert sizes and max(sizes) <= 8 and sum(sizes) == PAIRS  # never the whole file
    for key in ("test_bleu", "test_chrf", "test_exact_match"):  # printed to 6 digits
        assert scores[key] == float(f"{whole[key]:.6g}"), key
    assert whole["test_exact_match"] == sum(h == t for h, (_, t) in zip(hyps, rows)) / PAIRS
    assert "evaluate: " in err  # how far it is, on stderr
    assert err.count("stopped at") <= 1  # the note of cut translations once, not per chunk


@pytest.mark.slow  # reads the session's translate run
def test_evaluate_data_refuses_a_long_source_anywhere_before_translating(runs, tmp_path,
                                                                         monkeypatch, capsys):
    run = runs["translate"][0]
    data, rows = _pairs_file(tmp_path / "pairs.tsv")
    with open(data, "a", encoding="utf-8") as f:
        f.write(f"{' '.join(['seven'] * 400)}\tsieben\n")
    translated = []
    monkeypatch.setattr(scoring, "translate_texts",
                        lambda *a, **kw: translated.append(1) or [])
    monkeypatch.setattr(translate_runtime, "CHUNK_ROWS", 8, raising=False)
    capsys.readouterr()
    assert main(["evaluate", str(run), "--data", str(data), "--threads", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"attnlab: error: --data {data} line {PAIRS + 2} has 400 tokens")
    assert translated == []
