"""Entity-level precision, recall and F1 of BIO tag sequences, as conlleval and seqeval count
them (seqeval's default mode), in plain Python: no torch, no seqeval.

An entity (a "chunk") is a run of tags of one type, found left to right over each sentence
with conlleval's two rules, which also read tag sequences that break BIO (an ``I-`` after
``O``):

    a chunk starts at a tag   B-x; or I-x after O; or any x-tag after a tag of another type
    a chunk ends before a tag  B or O after B or I; or a tag of another type after B or I

An ``I-x`` after ``O`` or after another type therefore starts an entity, as in conlleval.
Sentences never share an entity (seqeval puts an ``O`` between them). A predicted entity is
right when a true one has the same type, first and last word. Then, over all types ("micro"):

    precision = right / predicted,   recall = right / true,   F1 = 2·P·R / (P + R)

with 0 for 0/0, as seqeval gives it. ``tests/tasks/test_tag_scoring.py`` checks these
numbers against seqeval 1.2.2 on many random tag sequences.

Examples:
    >>> entities([["B-PER", "I-PER", "O", "I-LOC"]])
    [('PER', 0, 1), ('LOC', 3, 3)]
    >>> scores = entity_scores([["B-PER", "O", "B-LOC"]], [["B-PER", "O", "B-PER"]])
    >>> scores["precision"], scores["recall"], round(scores["f1"], 4)
    (0.5, 0.5, 0.5)
"""
from __future__ import annotations

from collections.abc import Sequence

__all__ = ["entities", "entity_scores", "EntityTally", "counts_by_type", "per_type_table", "format_table",
           "split_tag"]


def split_tag(tag: str) -> tuple[str, str]:
    """(prefix, type) of a tag as seqeval reads it: ``"B-PER"`` -> ``("B", "PER")``,
    ``"O"`` -> ``("O", "_")`` (seqeval's type of a tag without one)."""
    return tag[0], tag[1:].split("-", maxsplit=1)[-1] or "_"


def _ends(prev: str, prev_type: str, tag: str, kind: str) -> bool:
    """Whether the chunk the previous tag belongs to ends before this tag."""
    if prev not in ("B", "I"):
        return False
    return tag in ("B", "O") or prev_type != kind


def _starts(prev: str, prev_type: str, tag: str, kind: str) -> bool:
    """Whether a chunk starts at this tag."""
    if tag == "O":
        return False
    return tag == "B" or prev == "O" or prev_type != kind


def entities(sentences: Sequence[Sequence[str]]) -> list[tuple[str, int, int]]:
    """Every entity of ``sentences`` as (type, first, last): positions count across the
    sentences joined with one ``O`` between them (seqeval's offsets), the last inclusive."""
    found: list[tuple[str, int, int]] = []
    offset = 0
    for sentence in sentences:
        prev, prev_type, begin = "O", "", 0
        for i, tag in enumerate([*sentence, "O"]):  # the O closes the last entity
            prefix, kind = split_tag(tag)
            if _ends(prev, prev_type, prefix, kind):
                found.append((prev_type, offset + begin, offset + i - 1))
            if _starts(prev, prev_type, prefix, kind):
                begin = i
            prev, prev_type = prefix, kind
        offset += len(sentence) + 1
    return found


def _ratio(a: int, b: int) -> float:
    return a / b if b else 0.0


def _prf(right: int, predicted: int, true: int) -> dict[str, float]:
    p, r = _ratio(right, predicted), _ratio(right, true)
    return {"precision": p, "recall": r, "f1": _ratio(2 * p * r, p + r) if p + r else 0.0}


def counts_by_type(true: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]
                   ) -> dict[str, tuple[int, int, int]]:
    """(right, predicted, true) entity counts of each type that either side has, sorted by
    type."""
    gold, guess = set(entities(true)), set(entities(predicted))
    types = sorted({t for t, _, _ in gold | guess})
    return {t: (sum(1 for e in guess & gold if e[0] == t), sum(1 for e in guess if e[0] == t),
                sum(1 for e in gold if e[0] == t)) for t in types}


class EntityTally:
    """Entity counts of each type (right, predicted, true), and counts of sentences and words
    (all, right), of sentences given a chunk at a time (``add``): a sentence's entities are its own, so the
    sums are those of all the sentences at once, and the scores of them (``scores``,
    ``per_type``) exact, whatever the chunks.

    Examples:
        >>> tally = EntityTally().add([["B-PER", "O"]], [["B-PER", "O"]])
        >>> tally.add([["B-LOC"]], [["O"]]).scores()["recall"], tally.words, tally.right_words
        (0.5, 3, 2)
    """

    def __init__(self) -> None:
        self.counts: dict[str, tuple[int, int, int]] = {}
        self.sentences = self.words = self.right_words = 0

    def add(self, true: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]
            ) -> "EntityTally":
        """Count the sentences ``true`` and their ``predicted`` tags; ``ValueError`` if the
        two sides have different numbers of sentences or words."""
        if [len(s) for s in true] != [len(s) for s in predicted]:
            raise ValueError("true and predicted tags must have the same sentences and lengths")
        for kind, counts in counts_by_type(true, predicted).items():
            held = self.counts.get(kind, (0, 0, 0))
            self.counts[kind] = tuple(a + b for a, b in zip(held, counts))
        self.sentences += len(true)
        self.words += sum(map(len, true))
        self.right_words += sum(a == b for t, p in zip(true, predicted) for a, b in zip(t, p))
        return self

    def scores(self) -> dict[str, float]:
        """Entity-level ``precision``, ``recall`` and ``f1`` (micro: over all types), and the
        counts ``right``, ``predicted`` and ``true``."""
        right, guessed, gold = (sum(c[i] for c in self.counts.values()) for i in range(3))
        return {**_prf(right, guessed, gold), "right": right, "predicted": guessed,
                "true": gold}

    def per_type(self) -> list[dict[str, float | str]]:
        """One row per entity type either side has, sorted by type: ``type``,
        ``precision``, ``recall``, ``f1`` and ``support`` (the true entities of the type), as
        the rows of seqeval's ``classification_report``."""
        return [{"type": t, **_prf(*self.counts[t]), "support": self.counts[t][2]}
                for t in sorted(self.counts)]


def entity_scores(true: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]
                  ) -> dict[str, float]:
    """Entity-level ``precision``, ``recall`` and ``f1`` (micro: over all types), and the
    counts ``right``, ``predicted`` and ``true`` (``EntityTally.scores``).

    Raises:
        ValueError: if the two sides have different numbers of sentences or words.
    """
    return EntityTally().add(true, predicted).scores()


def per_type_table(true: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]
                   ) -> list[dict[str, float | str]]:
    """``EntityTally.per_type`` of ``true`` and ``predicted``."""
    return EntityTally().add(true, predicted).per_type()


def format_table(rows: list[dict[str, float | str]]) -> str:
    """``per_type_table``'s rows as aligned text."""
    width = max(4, *(len(str(r["type"])) for r in rows)) if rows else 4
    lines = [f"{'type':<{width}}  precision  recall      f1  support"]
    for r in rows:
        lines.append(f"{r['type']:<{width}}  {r['precision']:9.4f}  {r['recall']:6.4f}  "
                     f"{r['f1']:6.4f}  {int(r['support']):7d}")
    return "\n".join(lines)
