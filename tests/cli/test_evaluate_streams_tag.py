"""`evaluate DIR --data FILE` of a tag run reads and scores a long file a chunk of sentences at
a time, as classify's does a chunk of rows (tests/cli/test_evaluate_streams.py): the whole
file was read first, its peak memory growing with the file (306 MB at 10^4 sentences, 539 MB
at 10^5). The entity counts and word counts are summed over the chunks, so the metrics are
those of all the sentences at once, exactly, and seqeval's and scikit-learn's of predict's
answers. The chunk is made small here (8 sentences) so that a file of 61 has eight."""
from __future__ import annotations

import json
import random

import pytest

import attnlab.tasks.tag.runtime as tag_runtime
from attnlab.cli import main
from attnlab.tasks.tag.scoring import EntityTally, entity_scores, per_type_table

from .test_evaluate_streams import _evaluate

SENTENCES = 61
NAMES, WORDS = ["John", "Mary", "Rome", "Paris"], ["lives", "in", "the", "city", "and"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def test_entities_counted_in_chunks_score_as_all_sentences_at_once():
    rng = random.Random(0)
    true = [[rng.choice(TAGS) for _ in range(rng.randint(0, 9))] for _ in range(301)]
    pred = [[t if rng.random() < 0.6 else rng.choice(TAGS) for t in s] for s in true]
    tally, start = EntityTally(), 0
    for size in (7, 1, 13, 8) * 100:  # uneven chunks
        tally.add(true[start:start + size], pred[start:start + size])
        start += size
    assert tally.sentences == len(true)
    assert tally.scores() == entity_scores(true, pred)  # the same integers: exact
    assert tally.per_type() == per_type_table(true, pred)
    assert tally.scores()["right"] > 0  # not trivially 0 of 0


def _people(path, rng):
    """A CoNLL file of ``SENTENCES`` sentences whose capitalised words are B-PER."""
    sentences = [[rng.choice(NAMES + WORDS) for _ in range(rng.randint(2, 6))]
                 for _ in range(SENTENCES)]
    path.write_text("".join("".join(f"{w} {'B-PER' if w[0].isupper() else 'O'}\n"
                                    for w in s) + "\n" for s in sentences))
    return sentences


@pytest.fixture
def scored(monkeypatch):
    """How many sentences each call of the model on a list of sentences was given."""
    real, sizes = tag_runtime.predict_tags, []

    def counted(cfg, model, tokenizer, sentences):
        sizes.append(len(sentences))
        return real(cfg, model, tokenizer, sentences)

    monkeypatch.setattr(tag_runtime, "predict_tags", counted)
    return sizes


@pytest.mark.slow
def test_a_long_file_is_scored_a_chunk_at_a_time_with_the_scores_of_its_answers(
        tag_run, scored, monkeypatch, capsys, tmp_path):
    seqeval = pytest.importorskip("seqeval.metrics")
    sklearn = pytest.importorskip("sklearn.metrics")
    path = tmp_path / "held.conll"
    sentences = _people(path, random.Random(1))
    whole, _ = _evaluate(capsys, tag_run, path)  # one chunk
    assert scored == [SENTENCES]
    monkeypatch.setattr(tag_runtime, "CHUNK_ROWS", 8, raising=False)  # (none before)
    scored.clear()
    chunked, err = _evaluate(capsys, tag_run, path)
    assert scored == [8] * 7 + [5]  # never more than a chunk of sentences at once
    assert f"evaluate: {SENTENCES} of {SENTENCES} sentences" in err  # progress of a long file
    assert chunked == whole
    # the scores of predict's answers to the same sentences, as seqeval and scikit-learn give
    # them (to the 6 digits the command prints)
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(" ".join(s) + "\n" for s in sentences))
    assert main(["predict", str(tag_run), "--input-file", str(texts), "--json"]) == 0
    answers = [json.loads(line)["prediction"] for line in capsys.readouterr().out.splitlines()]
    truth = [["B-PER" if w[0].isupper() else "O" for w in s] for s in sentences]
    flat = [t for s in truth for t in s], [t for s in answers for t in s]
    expected = {"test_f1": seqeval.f1_score(truth, answers, zero_division=0),
                "test_precision": seqeval.precision_score(truth, answers, zero_division=0),
                "test_recall": seqeval.recall_score(truth, answers, zero_division=0),
                "test_accuracy": sklearn.accuracy_score(*flat)}
    assert {k: chunked[k] for k in expected} == pytest.approx(expected, abs=5e-7, rel=0)


@pytest.mark.slow
def test_a_bad_tag_of_a_later_chunk_is_refused_before_any_sentence_is_scored(
        tag_run, scored, monkeypatch, capsys, tmp_path):
    path = tmp_path / "held.conll"
    _people(path, random.Random(2))
    lines = path.read_text().count("\n")
    path.write_text(path.read_text() + "Anna B-ORG\n")
    monkeypatch.setattr(tag_runtime, "CHUNK_ROWS", 8, raising=False)
    out, err = _evaluate(capsys, tag_run, path, code=2)
    assert out == "" and scored == []
    assert err.splitlines() == [f"attnlab: error: --data {path} line {lines + 1}: tag 'B-ORG' "
                                f"never seen in training (tags: B-PER, O)"]


@pytest.mark.slow
def test_a_file_that_changes_between_its_readings_is_refused(tag_run, monkeypatch, capsys,
                                                             tmp_path):
    path = tmp_path / "held.conll"
    _people(path, random.Random(3))
    real = tag_runtime.predict_tags

    def appending(*args):  # the file written to while it is scored
        with open(path, "a") as f:
            f.write("Mary B-PER\n\n")
        return real(*args)

    monkeypatch.setattr(tag_runtime, "predict_tags", appending)
    monkeypatch.setattr(tag_runtime, "CHUNK_ROWS", 8, raising=False)  # read on after a chunk
    out, err = _evaluate(capsys, tag_run, path, code=2)
    assert out == ""  # no metrics of rows that were not checked
    assert err.splitlines()[-1] == (f"attnlab: error: --data {path} changed while evaluate "
                                    f"read it (its SHA-256 differs between its readings); "
                                    f"evaluate it again once it is written")
