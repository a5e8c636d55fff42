"""translate's test_bleu, test_chrf and test_exact_match against sacrebleu's corpus scores and
a count by hand, on translations that trip scores up: a short one (the brevity penalty), an
empty one, spaces around a text, one-word references (``--bleu-tokenize auto`` counts
characters there)."""
import pytest

from attnlab.tasks.translate.scoring import score

sacrebleu = pytest.importorskip("sacrebleu")
TOL = 1e-12
REFS = ["the cat sat on the mat today", "a dog ran in the park", "it rains again this week",
        "we like green tea"]
HYPS = ["the cat sat on the mat", "", " it rains again this week ", "we like green tea"]


def test_sentences_equal_sacrebleus_corpus_scores():
    found = score(HYPS, REFS)  # references of 4 or more words: auto is 13a
    bleu = sacrebleu.corpus_bleu(HYPS, [REFS], tokenize="13a")
    assert bleu.bp < 1  # the short and the empty translation cost the brevity penalty
    assert found["test_bleu"] == pytest.approx(bleu.score, abs=TOL)
    assert found["test_chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score, abs=TOL)
    assert found["test_exact_match"] == 2 / 4  # by hand: the spaced third and the fourth


def test_one_word_references_count_characters():
    refs, hyps = ["dreihundert", "zweitausendeins", "elf"], ["dreihundert", "zweitausend", ""]
    found = score(hyps, refs)
    assert found["test_bleu"] == pytest.approx(
        sacrebleu.corpus_bleu(hyps, [refs], tokenize="char").score, abs=TOL)
    assert sacrebleu.corpus_bleu(hyps, [refs], tokenize="13a").score == 0.0  # why: no 4-gram
    assert found["test_exact_match"] == 1 / 3
