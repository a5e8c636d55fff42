"""What a run from a Hugging Face BERT-family ``--init`` directory says before it trains
(``init_notes``), once ``pretrained.read_init`` has read the checkpoint: the things that are
not errors, yet would otherwise pass in silence.

    head_note          a fine-tuned ``*ForSequenceClassification`` / ``*ForTokenClassification``
                       (its head and ``id2label`` are left behind) or ``*ForQuestionAnswering`` /
                       ``*ForMultipleChoice`` (its head): the run's head is new
    vocabulary_note    a tokeniser of fewer ids than the model's embedding rows (one copied from
                       another model reads each token as another's embedding)
    init_unknown_note  training text read mostly as the tokeniser's unk token (a script or
                       casing its vocabulary lacks)

classify's and tag's ``validate`` print them with their other notes, before the run directory
is written, and not on ``--resume``.
"""
from __future__ import annotations

from pathlib import Path

from ...errors import UsageError, first_few

__all__ = ["init_notes", "head_note", "vocabulary_note", "init_unknown_note", "UNKNOWN_SHARE",
           "UNKNOWN_SAMPLE"]

# the classes whose head a fine-tuned checkpoint holds that a run does not read (its encoder
# is read; the run's head is new, for the run's own labels): those with labels (id2label),
# and those whose head has none (answer spans' start and end; one score per choice)
_LABELLED = ("ForSequenceClassification", "ForTokenClassification")
_FINE_TUNED = (*_LABELLED, "ForQuestionAnswering", "ForMultipleChoice")
# the share of a training split's tokens read as the checkpoint's unk token worth a warning:
# a pretrained vocabulary reads text of the languages it was trained on with well under 1%
# unknown, so a tenth is text of a script or casing it lacks (an uncased vocabulary given a
# cased checkpoint's text, Chinese to an English WordPiece), all of it one token to the model
UNKNOWN_SHARE = 0.1
UNKNOWN_SAMPLE = 10_000  # texts tokenised to find it: a big corpus is not tokenised twice


def head_note(checkpoint) -> str | None:
    """A note where the Hugging Face ``checkpoint`` (``read_init``'s) is a fine-tuned model
    (config.json's ``architectures``: a ``*ForSequenceClassification`` or
    ``*ForTokenClassification``, whose head and labels (``id2label``) are not read, or a
    ``*ForQuestionAnswering`` or ``*ForMultipleChoice``, whose head is not), and the run
    trains a new head from random weights. Said, so that a user who meant to go on from
    the checkpoint's predictions is not surprised by a run that starts from chance.

    Examples:
        >>> from types import SimpleNamespace
        >>> head_note(SimpleNamespace(source=Path("no-such-dir"))) is None
        True
    """
    from ...runs import read_json

    try:
        config = read_json(Path(checkpoint.source) / "config.json")
    except (OSError, ValueError, UsageError):
        return None
    classes = config.get("architectures") if isinstance(config, dict) else None
    head = next((c for c in classes or () if isinstance(c, str) and c.endswith(_FINE_TUNED)),
                None)
    if head is None:
        return None
    labelled = head.endswith(_LABELLED)  # a span or choice head's id2label is the default's
    labels = config.get("id2label") if labelled else None
    names = ([str(labels[k]) for k in sorted(labels, key=lambda k: int(k))]
             if isinstance(labels, dict) and all(str(k).isdigit() for k in labels) else [])
    held = f" for {len(names)} labels ({first_few(names)})" if names else ""
    left = "its head and labels are not" if labelled else "its head is not"
    return (f"note: --init {checkpoint.source} is a {head}{held}: its encoder is read, {left}; "
            f"this run trains a new head, from random weights, for the labels of its own data")


def init_unknown_note(checkpoint, texts: list[str], what: str = "the training texts") -> str | None:
    """A warning where more than ``UNKNOWN_SHARE`` of the tokens the Hugging Face
    ``checkpoint``'s tokeniser (``read_init``'s) makes of ``texts`` are its unk token: the
    encoder reads all of them as one token, and nothing else would say so before the run
    trains on them. None for a tokeniser without an unk token (GPT-2's byte-level BPE has
    none to give).

    Examples:
        >>> from types import SimpleNamespace
        >>> no_unk = SimpleNamespace(tokenizer=SimpleNamespace(unk_id=None))
        >>> init_unknown_note(no_unk, ["a"]) is None
        True
    """
    tok = checkpoint.tokenizer
    if tok.unk_id is None or not texts:
        return None
    if len(texts) > UNKNOWN_SAMPLE:  # a share, not a count: the first texts tell it
        texts, what = texts[:UNKNOWN_SAMPLE], f"the first {UNKNOWN_SAMPLE:,} of {what}"
    ids = tok.encode_batch(texts)
    total, unknown = sum(map(len, ids)), sum(row.count(tok.unk_id) for row in ids)
    if not total or unknown <= UNKNOWN_SHARE * total:
        return None
    pieces: dict[str, None] = {}  # the first few, in order, each once
    for text, row in zip(texts, ids):
        if tok.unk_id in row:
            pieces.update(dict.fromkeys(tok.unknown(text)))
        if len(pieces) >= 3:
            break
    name = tok.tokenizer.id_to_token(tok.unk_id)
    return (f"warning: {unknown / total:.0%} of the {total:,} tokens of {what} are {name} to "
            f"--init {checkpoint.source}'s tokenizer (such as "
            f"{', '.join(map(repr, list(pieces)[:3]))}): the model reads them all as one token; "
            f"is the text of a language, script or casing that checkpoint was trained on?")


def init_notes(checkpoint, texts: list[str], what: str) -> list[str]:
    """What a run from the Hugging Face ``checkpoint`` (``read_init``'s; None: an attnlab
    run, nothing to say) says before it trains on ``texts`` (its training split, named
    ``what``): ``head_note``, ``vocabulary_note`` and ``init_unknown_note``, those that apply."""
    if checkpoint is None:
        return []
    return [n for n in (head_note(checkpoint), vocabulary_note(checkpoint),
                        init_unknown_note(checkpoint, texts, what)) if n]


def vocabulary_note(checkpoint) -> str | None:
    """A note where the Hugging Face ``checkpoint``'s tokeniser gives fewer ids than its
    model has embedding rows (more are refused when it is read). Some checkpoints pad their
    embedding so, but most BERT-family ones ship a tokeniser of the model's size, and a
    tokeniser copied from another model (a cased one of 28,996 ids beside an uncased model
    of 30,522 rows) would give each token another token's embedding, in silence.

    Examples:
        >>> from types import SimpleNamespace
        >>> same = SimpleNamespace(tokenizer=SimpleNamespace(vocab_size=90),
        ...                        config=SimpleNamespace(vocab_size=90))
        >>> vocabulary_note(same) is None
        True
    """
    ids, rows = checkpoint.tokenizer.vocab_size, checkpoint.config.vocab_size
    if ids >= rows:
        return None
    return (f"note: --init {checkpoint.source}'s tokenizer gives {ids:,} ids and its model has "
            f"{rows:,} embedding rows, {rows - ids:,} of them never read; if the tokenizer is "
            f"not the one saved with these weights, each token reads another's embedding")
