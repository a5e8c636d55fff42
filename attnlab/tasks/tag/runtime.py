"""The runtime module of ``attnlab train tag``, the part that imports torch (the spec is
``spec.py``): word ids or subword alignment, padded batches, the model (a
``SequenceClassifier(head="token")``, or with ``--init`` a ``BertTagger``), the entity metrics,
and the module-level ``run``, ``load``, ``predict_many``, ``evaluate`` and ``attention_maps``.

From scratch a sentence is its words' ids (B, T) in a vocabulary of the training split's words
(``<unk>`` for the others), padded with id 0; labels (B, T) are tag indices, -100 on padding.
A pretrained encoder reads the words joined by single spaces, as its tokenizer splits them (a
byte-level BPE's, RoBERTa's, with a space before the first word too, as every other word has
one: ``transformers``' ``is_split_into_words=True, add_prefix_space=True``): each subword
belongs to the word its characters fall in (its offsets; a word's bare space token, ``Ġ``, to
the word after it), the first subword of a word carries the word's label, every other
position -100; batches are padded on the right with the tokenizer's pad id and an attention
mask (B, T) (1 = real). A word past ``--max-len`` (words
from scratch, subwords with ``--init``) has no prediction: it is read as ``O``, and a warning
says how many there were (in the training split: its tag is not trained; a warning says so).

Shapes: B batch, T tokens (words or subwords), C tags.
"""
from __future__ import annotations

from functools import partial
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ...data.resumable import ShuffledBatches, length_grouped
from ...data.tables import CHUNK_ROWS, same_both_readings
from ...errors import UsageError
from ...models import BertTagger, SequenceClassifier
from ...models.configs import BertClassifierConfig, SequenceClassifierConfig
from ...notes import progress, said_once, say
from ...run_config import RunSettings
from ...runs import check_test_files, load_weights, read_yaml
from ...settings import epoch_steps
from ...tokenizers import (SPECIAL_TOKENS, UNK_ID, WordTokenizer, in_form, note_cut,
                           note_unknown)
from ...training.tagger import IGNORE
from ..base import (FINITE, attends, config_from_run, each_input, input_name, loads, null_scores,
                    predicts, rng_kept, said_nan, without_nan_metrics)
from ..classify.pretrained import read_init
from ..spaced_input import spaced_tokens
from .data import (Sentences, checked_chunks, files_of, known_tags, load_splits, no_entity_note,
                   shared_sentences, split_name)
from .scoring import EntityTally, entity_scores, format_table

__all__ = ["build_model", "model_config_of", "Encoded", "encode_words", "make_batches",
           "run", "load", "input_reader", "predict_many", "evaluate", "attention_maps", "export_hf"]


def pretrained(cfg: RunSettings) -> bool:
    """Whether the run's model is a pretrained encoder's ``BertTagger``."""
    return cfg.arch != "transformer"


# ---- model ------------------------------------------------------------------------------------

def model_config_of(cfg: RunSettings) -> SequenceClassifierConfig | BertClassifierConfig:
    """The model config of a run (after ``run`` derived the tags and the vocabulary size)."""
    if pretrained(cfg):
        return config_from_run(BertClassifierConfig, cfg, num_classes=len(cfg.tags),
                               vocab_size=cfg.model_vocab_size, attention_dropout=cfg.dropout,
                               pooling="mean")
    return config_from_run(SequenceClassifierConfig, cfg, num_classes=len(cfg.tags),
                           vocab_size=cfg.model_vocab_size, head="token")


def build_model(cfg: RunSettings) -> SequenceClassifier | BertTagger:
    """The model a run's configuration describes (randomly initialised)."""
    config = model_config_of(cfg)
    kind = BertTagger if isinstance(config, BertClassifierConfig) else SequenceClassifier
    return kind(config)


# ---- words to ids -----------------------------------------------------------------------------

@dataclass
class Encoded:
    """One sentence as the model reads it: ``ids`` (and ``types``, a pretrained encoder's
    token types), and ``first[i]``, the position of word i's first token (None: no token),
    and ``empty``, the words of None that are not cut off by --max-len but give no subword at
    all (a zero-width space, a control character, an accent alone: the checkpoint's
    normaliser removes them), so that a warning names the right cause."""

    ids: list[int]
    types: list[int]
    first: list[int | None]
    empty: list[int] = field(default_factory=list)


def fit_vocabulary(cfg: RunSettings, sentences: list[list[str]]) -> WordTokenizer:
    """The words of the training split, most frequent first, at most ``--vocab-size`` ids with
    the four special ones (a ``WordTokenizer`` whose pieces are whole words)."""
    from collections import Counter

    # the run's form (NFC; None: a run resumed from before attnlab normalised): "é" as one
    # code point or as e + accent is one word
    form = cfg.normalize
    counts = Counter(in_form(form, w) for words in sentences for w in words)
    kept = [w for w, _ in counts.most_common(cfg.vocab_size - len(SPECIAL_TOKENS))]
    return WordTokenizer([*SPECIAL_TOKENS, *kept], normalize=form)


def _word_spans(words: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """The words joined by single spaces, and each word's (start, end) in that text."""
    spans, at = [], 0
    for w in words:
        spans.append((at, at + len(w)))
        at += len(w) + 1
    return " ".join(words), spans


def _encode_subwords(tokenizer, words: list[str], max_len: int, lead: str = "",
                     spaced: bool = False) -> Encoded:
    """A pretrained tokenizer's ids of ``words`` (special tokens added, cut to ``max_len``)
    and each word's first subword, found by the subwords' character offsets; ``lead``
    written before the first word (a space: ``_lead``); ``spaced``: each word is read after
    its space (``_spaced``), a word's bare space token its first."""
    text, spans = _word_spans(words)
    text, spans = lead + text, [(a + len(lead), b + len(lead)) for a, b in spans]
    fast = tokenizer.tokenizer
    fast.enable_truncation(max_len)
    try:
        e = fast.encode(text, add_special_tokens=True)
    finally:
        fast.no_truncation()
    first: list[int | None] = [None] * len(words)
    word, space = 0, None  # space: a bare "Ġ" token's position, before its word's characters
    for pos, ((a, b), special) in enumerate(zip(e.offsets, e.special_tokens_mask)):
        if special or b <= a:
            # words read spaced: a word's space alone (no offsets) is its first token, as in
            # transformers' word_ids of words given one by one
            space = pos if spaced and not special and space is None else space
            continue
        while word < len(words) and spans[word][1] < b:  # its last character's word
            word += 1
        if word < len(words) and first[word] is None:
            first[word] = pos if space is None else space
        space = None
    # cut by --max-len: the words after the last one read, when the text was cut at all
    read = [i for i, pos in enumerate(first) if pos is not None]
    end = (read[-1] if read else 0) if e.overflowing else len(words)
    return Encoded(list(e.ids), list(e.type_ids), first,
                   [i for i in range(end) if first[i] is None])


def _lead(cfg: RunSettings, tokenizer) -> str:
    """What a sentence starts with before its first word: a space where the run reads words
    spaced (``words_spaced``) with a tokenizer that would read the first one bare."""
    from ...interop.hf_tokenizer import bare_first_word

    return " " if cfg.words_spaced and bare_first_word(tokenizer.tokenizer) else ""


def _spaced(cfg: RunSettings, tokenizer) -> bool:
    """Whether each word is read after a space token of its own where its first characters do
    not merge with it (``Ġ``): words read spaced (``words_spaced``) by a byte-level BPE,
    whether its first space is ``_lead``'s or the tokenizer's own (``add_prefix_space``)."""
    from ...interop.hf_tokenizer import is_byte_level

    return bool(cfg.words_spaced) and is_byte_level(tokenizer.tokenizer)


def encode_words(cfg: RunSettings, tokenizer, sentences: list[list[str]]) -> list[Encoded]:
    """Each sentence as the model reads it (see the module doc)."""
    if pretrained(cfg):
        lead, spaced = _lead(cfg, tokenizer), _spaced(cfg, tokenizer)
        return [_encode_subwords(tokenizer, words, cfg.max_len, lead, spaced)
                for words in sentences]
    out = []
    for words in sentences:
        ids = [tokenizer.piece_id(w) for w in words[: cfg.max_len]]
        out.append(Encoded(ids, [0] * len(ids),
                           [i if i < cfg.max_len else None for i in range(len(words))]))
    return out


def _labels(encoded: Encoded, tags: list[str], index: dict[str, int], *,
            cut: bool = False) -> list[int]:
    """The label of each position: a word's tag index at its first token, -100 elsewhere;
    with ``cut``, then the tag index of each word past --max-len (validation scores them as
    the test does: read as ``O``; ``TaggerModule``'s labels past the logits)."""
    labels = [IGNORE] * len(encoded.ids)
    for pos, tag in zip(encoded.first, tags):
        if pos is not None:
            labels[pos] = index[tag]
    if cut:
        labels += [index[tags[i]] for i, pos in enumerate(encoded.first)
                   if pos is None and i not in encoded.empty]
    return labels


def make_batches(encoded: list[Encoded], labels: list[list[int]], batch_size: int, *,
                 pad_id: int = 0, types: bool = False, mask: bool = False,
                 shuffle: bool = False, seed: int = 0) -> list[tuple[torch.Tensor, ...]]:
    """Padded batches of sentences of similar length: ids (B, T) padded with ``pad_id`` on
    the right, then with ``mask`` the attention mask (B, T) (1 = real) and with ``types`` the
    token types (B, T), then labels (B, T) (-100 on padding). Sorted by length within windows
    of 50 batches; ``shuffle`` mixes windows and batches (seeded).

    Examples:
        >>> e = [Encoded([5, 6], [0, 0], [0, 1]), Encoded([7], [0], [0])]
        >>> [t.tolist() for t in make_batches(e, [[1, 0], [2]], 2)[0]]
        [[[7, 0], [5, 6]], [[2, -100], [1, 0]]]
    """
    groups = length_grouped([len(e.ids) for e in encoded], batch_size, shuffle, seed)
    return [_pad([encoded[i] for i in g], [labels[i] for i in g], pad_id, types, mask)
            for g in groups]


def _pad(rows: list[Encoded], labels: list[list[int]], pad_id: int, types: bool,
         mask: bool) -> tuple[torch.Tensor, ...]:
    """A batch; a row's labels past its ids (``_labels``' ``cut``) go after column T, so
    that the labels are (B, T + K): the positions' (B, T), then the words past --max-len."""
    T = max(len(r.ids) for r in rows)
    K = max(len(lab) - len(r.ids) for r, lab in zip(rows, labels))
    x = torch.full((len(rows), T), pad_id, dtype=torch.long)  # (B, T)
    y = torch.full((len(rows), T + max(K, 0)), IGNORE, dtype=torch.long)  # (B, T + K)
    m, t = torch.zeros_like(x), torch.zeros_like(x)  # (B, T)
    for row, (r, lab) in enumerate(zip(rows, labels)):
        n, past = len(r.ids), lab[len(r.ids):]
        x[row, :n], y[row, :n], m[row, :n] = torch.tensor(r.ids), torch.tensor(lab[:n]), 1
        y[row, T:T + len(past)] = torch.tensor(past, dtype=torch.long)
        t[row, :n] = torch.tensor(r.types)
    return (x, *([m] if mask else []), *([t] if types else []), y)


def _batching(cfg: RunSettings, tokenizer) -> dict[str, Any]:
    """``make_batches``' padding options for the run's model."""
    if not pretrained(cfg):
        return {"pad_id": 0}
    pad = tokenizer.pad_id if tokenizer.pad_id is not None else cfg.pad_id
    return {"pad_id": pad, "mask": True,
            "types": bool(tokenizer.token_type_ids and cfg.type_vocab_size)}


def _batches_of(cfg, tokenizer, part: Sentences, *, cut: bool = False,
                **options) -> tuple[list, list, dict]:
    """(encoded sentences, their labels, the padding options) of a split; ``cut``: the
    labels hold the tags of the words past --max-len too (``_labels``)."""
    encoded = encode_words(cfg, tokenizer, part.words)
    index = {t: i for i, t in enumerate(cfg.tags)}
    labels = [_labels(e, tags, index, cut=cut) for e, tags in zip(encoded, part.tags)]
    return encoded, labels, {**_batching(cfg, tokenizer), **options}


# ---- predictions and metrics ------------------------------------------------------------------

@dataclass
class Unread:
    """The words of some sentences that the model read nothing of: ``cut`` of them past
    --max-len, and ``empty`` (their text) giving no subword to the checkpoint's tokenizer."""

    cut: int
    empty: list[str]

    @classmethod
    def of(cls, encoded: list[Encoded], sentences: list[list[str]]) -> "Unread":
        empty = [words[i] for e, words in zip(encoded, sentences) for i in e.empty]
        return cls(sum(pos is None for e in encoded for pos in e.first) - len(empty), empty)

    def say(self, cfg: RunSettings, *, training: bool = False,
            validation: bool = False) -> None:
        """A warning line on stderr per cause (none when every word was read); ``training``:
        the words are the training split's, whose tags are then not trained; ``validation``:
        the validation split's, read as ``O`` by its scores (those without a subword left out,
        ``_labels``), which --keep-best and --patience compare."""
        what = "subword" if pretrained(cfg) else "word"
        if self.cut and training:
            print(f"warning: {self.cut} word(s) of the training split lie past --max-len "
                  f"{cfg.max_len} ({what}s): their tags are not trained", file=sys.stderr,
                  flush=True)
        else:  # predict: once, of the whole file (``say``)
            split = " of the validation split" if validation else ""
            say("past --max-len", self.cut, lambda count, _: (
                f"warning: {count} word(s){split} lie past --max-len {cfg.max_len} "
                f"({what}s) and have no prediction: they are read as O"), self.cut)
        self.say_empty(cfg, "their tags are not trained" if training else
                       "the validation scores leave them out" if validation else
                       "they are read as O")

    def say_empty(self, cfg: RunSettings, then: str) -> None:
        first = self.empty[0] if self.empty else None
        say("no subword", len(self.empty), lambda count, _: (
            f"warning: {count} word(s) give no subword to --init {cfg.init}'s tokenizer "
            f"(first {first!r}; its normaliser removes such characters), so the model reads "
            f"nothing of them: {then}"), len(self.empty))


@torch.no_grad()
def predict_tags(cfg: RunSettings, model, tokenizer, sentences: list[list[str]]
                 ) -> tuple[list[list[str]], Unread, list[bool]]:
    """(each sentence's predicted tags, one per word; the words the model did not read and
    that were read as ``O``; whether the scores of each sentence's words were all finite: the
    argmax of a NaN row is the first tag, as sure as any), in batches of 64 sentences (padding
    is masked, so a batch gives what each sentence alone gives)."""
    model.eval()
    encoded = encode_words(cfg, tokenizer, sentences)
    out: list[list[str]] = [[] for _ in sentences]
    finite = [True] * len(sentences)
    # make_batches reorders by length: each batch's "labels" hold its sentences' positions
    where = [[i] for i in range(len(encoded))]
    for *inputs, rows in make_batches(encoded, where, 64, **_batching(cfg, tokenizer)):
        scores = model(*inputs)  # (B, T, tags)
        preds, oks = scores.argmax(-1).tolist(), scores.isfinite().all(-1).tolist()  # (B, T)
        for row, p, ok in zip(rows[:, 0].tolist(), preds, oks):
            first = encoded[row].first
            out[row] = ["O" if pos is None else cfg.tags[p[pos]] for pos in first]
            finite[row] = all(ok[pos] for pos in first if pos is not None)
    return out, Unread.of(encoded, sentences), finite


def tag_metrics(true: list[list[str]], predicted: list[list[str]]) -> dict[str, Any]:
    """``test_f1``, ``test_precision``, ``test_recall`` (entities), ``test_accuracy``
    (words) and ``test_per_type``."""
    return _scores(EntityTally().add(true, predicted))


def _scores(tally: EntityTally) -> dict[str, Any]:
    """``tag_metrics`` of the sentences ``tally`` counted."""
    s = tally.scores()
    return {"test_f1": s["f1"], "test_precision": s["precision"], "test_recall": s["recall"],
            "test_accuracy": tally.right_words / tally.words if tally.words else 0.0,
            "test_per_type": tally.per_type()}


def _test(cfg, model, tokenizer, part: Sentences, run_dir: Path | None = None,
          what: str = "") -> dict[str, Any]:
    """``tag_metrics`` of ``part``; with ``run_dir``, null where an output is NaN
    (``without_nan_metrics``, its warning naming ``what``'s sentence)."""
    predicted, unread, finite = predict_tags(cfg, model, tokenizer, part.words)
    unread.say(cfg)
    metrics = tag_metrics(part.tags, predicted)
    if run_dir is None:
        return metrics
    labels = [f"sentence {i} of {what}" for i in range(1, len(finite) + 1)]
    return without_nan_metrics(metrics, finite, labels, run_dir)


# ---- the task's functions (the commands call these through Task.runtime) --------------------

def _start(cfg, splits, run_dir: Path, task):
    """(the run config with the tags and vocabulary derived, the tokenizer, the model holding
    its first weights): random, a Hugging Face encoder's (``--init DIR``) or a tag run's."""
    tags = sorted(known_tags(splits["train"]))
    cfg = cfg.derive(tags=tags)
    if not cfg.init:
        tokenizer = fit_vocabulary(cfg, splits["train"].words)
        cfg = cfg.derive(model_vocab_size=tokenizer.vocab_size)
        return cfg, tokenizer, build_model(cfg)
    from ...training.checkpoint import resumes_from_checkpoint, saved_tokenizer_file

    if resumes_from_checkpoint(cfg, run_dir):
        return cfg, _tokenizer(run_dir, cfg), build_model(cfg)
    cfg, tokenizer, model = _init_weights(cfg, splits.get("init"), tags, task)
    if saved_tokenizer_file(cfg, run_dir):  # resumed before its first checkpoint
        tokenizer = _tokenizer(run_dir, cfg)
    return cfg, tokenizer, model


def _init_weights(cfg, checkpoint, tags: list[str], task):
    """(config, tokenizer, model) of a run from --init DIR that starts (a new one, or one
    resumed before its first checkpoint): DIR's weights, read again and checked against
    init_sha256 (``checkpoint``: the Hugging Face one ``validate`` read, if it did)."""
    if checkpoint is None and not (Path(cfg.init) / "config.yaml").is_file():
        # resumed: validate read none, before the run was seeded; read here drawing nothing,
        # so that the run draws what a new run draws
        with torch.random.fork_rng(devices=[]):
            checkpoint = read_init(cfg.init, cfg.init_sha256, task="tag")
    if checkpoint is not None:
        cfg = cfg.derive(model_vocab_size=checkpoint.config.vocab_size)
        model = build_model(cfg)
        missing, unexpected = model.bert.load_state_dict(checkpoint.model.state_dict(),
                                                         strict=False)
        assert not missing and all(k.startswith("pooler.") for k in unexpected), unexpected
        return cfg, checkpoint.tokenizer, model
    # an attnlab tag run: its model, a new head where its tags differ
    from ...interop.source import reread_init_source

    reread_init_source(Path(cfg.init), cfg.init_sha256, task="tag")
    source = task.read_config(read_yaml(Path(cfg.init) / "config.yaml"), cfg.init)
    old, tokenizer = _load(Path(cfg.init), source)
    cfg = cfg.derive(model_vocab_size=source.model_vocab_size)
    model = build_model(cfg)
    state = old.state_dict()
    if list(source.tags) != tags:
        head = "classifier." if pretrained(cfg) else f"output_net.{len(model.output_net) - 1}."
        state = {k: v for k, v in state.items() if not k.startswith(head)}
    model.load_state_dict(state, strict=list(source.tags) == tags)
    return cfg, tokenizer, model


def run(task, cfg: RunSettings, run_dir: Path, checked: Any = None) -> dict[str, float]:
    """Train on the splits ``task.validate`` read (``checked``; read again when None), test on
    the test split, write the run."""
    from ...training import finish, fit  # Lightning: only when training
    from ...training.tagger import TaggerModule

    splits = checked if checked is not None else load_splits(cfg)
    cfg, tokenizer, model = _start(cfg, splits, run_dir, task)
    encoded, labels, options = _batches_of(cfg, tokenizer, splits["train"])
    Unread.of(encoded, splits["train"].words).say(cfg, training=True)
    train = ShuffledBatches(partial(make_batches, encoded, labels, cfg.batch_size, **options),
                            len(encoded), cfg.batch_size, cfg.seed)
    steps = (epoch_steps(cfg, train.num_batches, cfg.epochs) if cfg.epochs
             else cfg.max_steps)
    val_encoded, val_labels, _ = _batches_of(cfg, tokenizer, splits["val"], cut=True)
    Unread.of(val_encoded, splits["val"].words).say(cfg, validation=True)
    val = make_batches(val_encoded, val_labels, 64, **_batching(cfg, tokenizer))
    module = TaggerModule(model, cfg, steps, cfg.tags, entity_scores)
    result = fit(module, train, torch.utils.data.DataLoader(val, batch_size=None), cfg, run_dir,
                 max_steps=steps,
                 val_check_interval=cfg.val_every or None,
                 tokenizer=tokenizer)
    if not result.is_global_zero:
        return finish(cfg, run_dir, model, {}, result, tokenizer=tokenizer)
    scores = _test(cfg, model, tokenizer, splits["test"])
    metrics = finish(cfg, run_dir, model, scores, result, tokenizer=tokenizer)
    print(f"\ntest split, per entity type ({len(splits['test'])} sentences):\n"
          f"{format_table(scores['test_per_type'])}")
    sys.stdout.flush()
    return metrics


def _tokenizer(run_dir: Path, cfg: RunSettings):
    from ...interop.saved import load_any_tokenizer

    return load_any_tokenizer(Path(run_dir) / "tokenizer.json")


@loads
def _load(run_dir: Path, cfg: RunSettings):
    """(model in eval mode, tokenizer)."""
    model = build_model(cfg)
    load_weights(model, Path(run_dir) / "model.safetensors")
    return model.eval(), _tokenizer(run_dir, cfg)


def load(task, run_dir: Path, cfg: RunSettings):
    """The trained model and its tokenizer: ``(model, tokenizer)``."""
    return _load(run_dir, cfg)


def export_hf(task, run_dir: Path, cfg: RunSettings) -> tuple[Any, dict[str, Any], None]:
    """``attnlab export --hf``: a run from ``--init`` of a BERT-family checkpoint as its
    family's ``*ForTokenClassification`` (``id2label`` the run's tags;
    ``attnlab.interop.bert_classify.tagger_to_hf``) with the checkpoint's tokenizer, and no
    note. A run of attnlab's own encoder is a UsageError, as classify's: Hugging Face has no
    class for it (nor a tokenizer for its word vocabulary)."""
    if not pretrained(cfg):
        raise UsageError(f"export: {run_dir} is a tag run of attnlab's own encoder; Hugging "
                         f"Face has a token classification class only for a run from --init "
                         f"of a BERT-family checkpoint")
    from ...interop.bert_classify import tagger_to_hf
    from ...interop.tokenizer import to_hf_tokenizer

    model, tok = _load(run_dir, cfg)
    hf = tagger_to_hf(model, model_type=cfg.arch, labels=list(cfg.tags), specials=tok.specials)
    # truncation=True cuts where the run cut its inputs (--max-len)
    theirs = to_hf_tokenizer(tok, model_max_length=cfg.max_len)
    if _lead(cfg, tok):  # its text read as the run read its words: the first after a space
        from ...interop.hf_tokenizer import with_prefix_space

        theirs.backend_tokenizer.pre_tokenizer = with_prefix_space(tok.tokenizer).pre_tokenizer
    return hf, {"": theirs}, None


class _WholeWords:
    """A tag run's word vocabulary as ``note_unknown`` reads it: each word of a text (split at
    white space) that the vocabulary lacks is read as ``<unk>``, as ``encode_words`` reads it
    (``WordTokenizer.unknown`` would split it into attnlab's word pieces instead)."""

    unknown_means = WordTokenizer.unknown_means  # what such a word is, in the note's words

    def __init__(self, vocabulary: WordTokenizer) -> None:
        self.vocabulary = vocabulary

    def unknown(self, text: str) -> list[str]:
        return [w for w in text.split() if self.vocabulary.piece_id(w) == UNK_ID]


def _words(text: str, label: str) -> list[str]:
    """The words of one sentence; refused where ``text`` holds several lines, which
    ``str.split`` would join into one sentence (``spaced_tokens``)."""
    words = spaced_tokens(text, label, "sentence")
    if not words:
        raise UsageError(f"{label}: no words to tag")
    return words


def _note_unknown(cfg: RunSettings, tokenizer, texts: list[str], labels: list[str]) -> None:
    """The note of the inputs' words (or a checkpoint's subwords) read as unk."""
    note_unknown(tokenizer if pretrained(cfg) else _WholeWords(tokenizer), texts, labels)


def _say_only_o(run_dir: Path, cfg: RunSettings) -> None:
    """A run whose only tag is ``O`` (made before train tag refused a --data file without an
    entity) tags every word ``O``: ``predict`` and ``evaluate`` say so."""
    if list(cfg.tags) == ["O"]:  # of the run, not of an input: said once by predict
        say("only O", 1, lambda *_: (
            f"warning: {run_dir} has no tag but 'O' (its --data {cfg.data} had no entity, "
            f"which train tag now refuses), so it tags every word O"), 1)


def input_reader(task, run_dir: Path, cfg: RunSettings):
    """One input's words, as ``predict_many`` reads it (``_words``)."""
    return lambda text: _words(text, "--input")


@predicts
def predict_many(task, run_dir: Path, cfg: RunSettings, texts: list[str],
                 labels: list[str]) -> list[dict[str, Any]]:
    """Each text's words (split at white space) with their tags: ``"prediction"`` the tags,
    ``"tokens"`` the words, and the printed ``"line"`` ``word/TAG word/TAG ...``."""
    sentences = each_input(texts, labels, input_reader(task, run_dir, cfg))
    model, tokenizer = _load(run_dir, cfg)
    _say_only_o(run_dir, cfg)
    _note_unknown(cfg, tokenizer, texts, labels)
    predicted, unread, finite = predict_tags(cfg, model, tokenizer, sentences)
    unread.say(cfg)
    return [{"prediction": tags, "tokens": words, FINITE: ok,
             "line": " ".join(f"{w}/{t}" for w, t in zip(words, tags))}
            for words, tags, ok in zip(sentences, predicted, finite)]


@rng_kept()  # a notebook's seeded draws after it are as before it
def evaluate(task, run_dir: Path, cfg: RunSettings, data: str | None) -> dict[str, Any]:
    """The test metrics on ``data`` (a file in the run's format), or on the run's test split
    (re-drawn with its seed, refused if the files changed); the per-type table on stderr.
    ``data`` is read and scored ``CHUNK_ROWS`` sentences at a time (``EntityTally``: the
    metrics of all its sentences, exact), after a first pass that checks every sentence
    (``checked_chunks``): what is held grows with the chunk, not the file, and a long file
    says on stderr how far it is."""
    model, tokenizer = _load(run_dir, cfg)
    if data is not None:
        chunks, total, digest, notes = checked_chunks(cfg, data, CHUNK_ROWS)
        what, chunk = f"--data {data}", CHUNK_ROWS
    else:
        check_test_files(files_of(cfg), cfg.data_sha256)
        splits = load_splits(cfg, val_file=False)
        part, what = splits["test"], split_name("test", splits["test"], bool(cfg.test))
        notes = [shared_sentences(splits["train"], part, what),
                 no_entity_note(known_tags(part), what, "test_")]
        chunks, total, chunk = (lambda: [part]), len(part), len(part)  # no progress to say
    _say_only_o(run_dir, cfg)
    for note in filter(None, notes):  # as train tag says them of its held-out splits
        print(note, file=sys.stderr, flush=True)
    tally, nan, started = EntityTally(), False, time.perf_counter()
    with said_once(total):  # the words not read and the NaN outputs: said once, of them all
        for part in chunks():
            predicted, unread, finite = predict_tags(cfg, model, tokenizer, part.words)
            unread.say(cfg)
            before = tally.sentences
            tally.add(part.tags, predicted)
            nan |= said_nan(finite, [f"sentence {before + i} of {what}"
                                     for i in range(1, len(part) + 1)], run_dir)
            progress("evaluate", before, tally.sentences, total, started, chunk, "sentences")
    if data is not None:
        same_both_readings(part.path, digest, part.sha256)
    metrics = null_scores(_scores(tally)) if nan else _scores(tally)
    print(format_table(metrics["test_per_type"]), file=sys.stderr)
    return metrics


@attends
def attention_maps(task, run_dir: Path, cfg: RunSettings, text: str):
    """``plot attention`` and ``view``: every layer's (H, T, T) map of one sentence, one row
    and column per word (from scratch) or per subword, special tokens included (``--init``)."""
    words = _words(text, "--input")
    model, tokenizer = _load(run_dir, cfg)
    _note_unknown(cfg, tokenizer, [text], [input_name()])  # as predict says it: a label is a word
    e = encode_words(cfg, tokenizer, [words])[0]
    # the words cut by --max-len: those without a token that are not empty (a word that gives
    # the checkpoint's tokenizer no subword, a zero-width space, is read, as nothing)
    cut = sum(pos is None and i not in e.empty for i, pos in enumerate(e.first))
    note_cut(len(words), len(words) - cut, cfg.max_len, what=input_name(), unit="words")
    if pretrained(cfg):
        inputs = _pad([e], [[IGNORE] * len(e.ids)], 0, bool(_batching(cfg, tokenizer)["types"]),
                      True)[:-1]
        labels = [tokenizer.tokenizer.id_to_token(i) for i in e.ids]
    else:
        inputs, labels = (torch.tensor([e.ids]),), words[: len(e.ids)]
    return [m[0] for m in model.get_attention_maps(*inputs)], labels, labels
