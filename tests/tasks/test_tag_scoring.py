"""Entity-level scores of ``attnlab.tasks.tag.scoring`` equal seqeval's (1.2.2, default mode:
conlleval's chunking) on random BIO tag sequences, broken ones included (an I- after O or
after another type), and per type as its classification report gives them. Exact equality:
both sides divide the same integer counts."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.tasks.tag.scoring import entities, entity_scores, per_type_table

seqeval_metrics = pytest.importorskip("seqeval.metrics")
seqeval_chunks = pytest.importorskip("seqeval.metrics.sequence_labeling")

TAGS = st.sampled_from(["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-MISC-X", "I-MISC-X"])
SENTENCES = st.lists(st.lists(TAGS, min_size=0, max_size=12), min_size=1, max_size=6)


@st.composite
def true_and_predicted(draw):
    sizes = draw(st.lists(st.integers(0, 12), min_size=1, max_size=6))
    true = [draw(st.lists(TAGS, min_size=n, max_size=n)) for n in sizes]
    # half the time a prediction near the truth, so that entities often match
    pred = [[t if draw(st.booleans()) else draw(TAGS) for t in s] for s in true]
    return true, pred


@settings(max_examples=200, deadline=None)
@given(SENTENCES)
def test_the_entities_are_seqevals(sentences):
    assert entities(sentences) == seqeval_chunks.get_entities(sentences)


@settings(max_examples=200, deadline=None)
@given(true_and_predicted())
def test_precision_recall_f1_are_seqevals(pair):
    true, pred = pair
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seqeval warns on 0/0 and returns 0, as we do
        expected = (seqeval_metrics.precision_score(true, pred),
                    seqeval_metrics.recall_score(true, pred),
                    seqeval_metrics.f1_score(true, pred))
        report = seqeval_metrics.classification_report(true, pred, output_dict=True)
    s = entity_scores(true, pred)
    assert (s["precision"], s["recall"], s["f1"]) == pytest.approx(expected, abs=1e-12)
    for row in per_type_table(true, pred):
        theirs = report[row["type"]]
        assert (row["precision"], row["recall"], row["f1"], row["support"]) == pytest.approx(
            (theirs["precision"], theirs["recall"], theirs["f1-score"], theirs["support"]),
            abs=1e-12)


def test_a_worked_example():
    true = [["B-PER", "I-PER", "O", "B-LOC"], ["B-LOC", "O"]]
    pred = [["B-PER", "I-PER", "O", "B-PER"], ["I-LOC", "O"]]  # I- after O starts an entity
    s = entity_scores(true, pred)
    assert (s["right"], s["predicted"], s["true"]) == (2, 3, 3)
    assert s["f1"] == pytest.approx(2 / 3)


def test_sentences_of_other_lengths_are_refused():
    with pytest.raises(ValueError, match="same sentences"):
        entity_scores([["O", "O"]], [["O"]])
