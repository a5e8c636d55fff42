"""The scoring side of ``attnlab train translate``: translating texts with a trained model, and
the test metrics (exact match, BLEU and chrF by sacrebleu).

Shapes: B batch, S source tokens, T target tokens (SOS ... EOS).

Why a module of its own: the end of training, ``attnlab evaluate`` and ``attnlab translate`` all
decode texts and score them the same way, and none of them needs the task's flags or its
training; ``runtime.py`` holds those. Nothing here imports Lightning.
"""
from __future__ import annotations

import unicodedata

import sacrebleu
import torch
from torch import Tensor

from ...errors import UsageError
from .data import TranslationTokenizers

__all__ = ["pad", "translate_texts", "check_source_lengths", "unfinished_note", "resolve_bleu_tokenize", "bleu_tokenize_of", "score", "Tally",
           "compute_test_metrics", "validation_scores"]


def pad(seqs: list[list[int]], pad_id: int = 0) -> Tensor:
    """Right-pad lists of ids into a (B, L) int64 tensor (L: the longest, at least 1).

    Examples:
        >>> pad([[5, 6, 7], [8]]).tolist()
        [[5, 6, 7], [8, 0, 0]]
    """
    out = torch.full((len(seqs), max(1, max(map(len, seqs)))), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out


@torch.no_grad()
def translate_texts(model, tok: TranslationTokenizers, texts: list[str], *, max_new_tokens: int,
                    num_beams: int = 1, length_penalty: float = 1.0,
                    batch_size: int = 500, labels: list[str] | None = None,
                    device: torch.device | str = "cpu",
                    unfinished: list[int] | None = None,
                    finite: list[bool] | None = None) -> list[str]:
    """Translate texts in batches of similar length (little padding), greedy or beam search.
    ``labels`` name the texts in errors (``--input-file F line N``; default "text number N");
    ``device``: where the model is (training's validation decodes on the GPU it trains on);
    ``unfinished``, when given, gets the index of each text whose translation reached
    ``max_new_tokens`` before the model wrote its end token (so it may be cut short);
    ``finite``, when given, gets whether each text's outputs are finite: the logits of every
    decoding step its search took (weights trained to NaN, a source that overflows the encoder
    or a token whose embedding overflows a later step make them NaN, and the search then
    writes the argmax of a NaN row, as sure as any translation), read by the search itself.

    Raises:
        UsageError: if a text is longer than the model's positional encoding reaches.
    """
    ids = tok.encode_sources(texts)
    # the positions a Transformer's encoding has (a recurrent model has no such limit)
    check_source_lengths(ids, getattr(getattr(model, "config", None), "max_len", None), labels)
    order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
    out: list[str] = [""] * len(texts)
    ok = [True] * len(texts)
    if num_beams > 1:
        batch_size = max(1, batch_size // num_beams)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        src = pad([ids[i] for i in chunk], tok.src.pad_id).to(device)  # (B, S)
        # a NaN row is not "cut short": it has no translation to cut (it is answered null)
        watched = finite is not None or unfinished is not None
        rows_finite: list[bool] | None = [] if watched else None
        generated = model.generate(src, max_new_tokens, num_beams=num_beams,
                                   length_penalty=length_penalty, finite=rows_finite)
        for i, row, good in zip(chunk, generated.tolist(), rows_finite or [True] * len(chunk)):
            out[i] = tok.decode(row[1:])  # after SOS; decode drops EOS and padding
            ok[i] = good
            if unfinished is not None and good and model.eos_id not in row[1:]:
                unfinished.append(i)
    if finite is not None:
        finite += ok
    return out


def check_source_lengths(ids: list[list[int]], max_len: int | None,
                         labels: list[str] | None = None) -> None:
    """``UsageError`` naming the longest source (``labels``; default "text number N") when its
    ``ids`` are more than ``max_len``, the positions the model's encoding has (None: a
    recurrent model, which has no such limit)."""
    longest = max(range(len(ids)), key=lambda i: len(ids[i]), default=None)
    if max_len is not None and longest is not None and len(ids[longest]) > max_len:
        name = labels[longest] if labels else f"text number {longest + 1}"
        raise UsageError(f"{name} has {len(ids[longest])} tokens; this model reads at most "
                         f"{max_len}")


def unfinished_note(unfinished: list[int], labels: list[str], limit: int,
                    count: int | None = None) -> str | None:
    """A line naming the first text whose translation stopped at ``limit`` tokens (the run's
    ``max_target_len``) before the model ended it, so its end may be missing; None if none.
    ``count``: how many stopped so in all (default: those of ``unfinished``).

    Examples:
        >>> unfinished_note([1], ["TEXT number 1", "TEXT number 2"], 8)[:57]
        'the translation of TEXT number 2 stopped at 8 tokens, the'
    """
    if not unfinished:
        return None
    count = len(unfinished) if count is None else count
    more = f" (and {count - 1} more inputs)" if count > 1 else ""
    return (f"the translation of {labels[min(unfinished)]} stopped at {limit} tokens, the most "
            f"this run writes (max_target_len in config.yaml), before the model ended it: it "
            f"may be cut short{more}")


def resolve_bleu_tokenize(refs: list[str], choice: str) -> str:
    """BLEU counts up to 4-grams of words: text of one or two words (German numbers are one
    word) always scores 0, so ``auto`` counts characters there and words elsewhere.

    Examples:
        >>> resolve_bleu_tokenize(["dreihundert", "zweitausendeins"], "auto")
        'char'
    """
    return bleu_tokenize_of(sum(len(r.split()) for r in refs), len(refs), choice)


def bleu_tokenize_of(words: int, refs: int, choice: str) -> str:
    """``resolve_bleu_tokenize``'s choice for ``refs`` references of ``words`` words in all
    (counted a chunk of a file at a time by ``evaluate --data``).

    Examples:
        >>> bleu_tokenize_of(30, 10, "auto"), bleu_tokenize_of(30, 10, "char")
        ('char', 'char')
    """
    if choice != "auto":
        return choice
    return "char" if words / max(1, refs) < 4 else "13a"


def same_form(texts: list[str], run_form: str | None = None) -> list[str]:
    """The texts in Unicode's composed form (NFC). A reference typed on a Mac may hold "é" as
    "e" and a combining accent (NFD), which prints as the model's "é" but differs in every
    character-level comparison: exact match, BLEU's words and chrF's character n-grams would
    all count a translation that prints the same as wrong. sacrebleu does not normalise.
    A run whose tokenisers read text in a compatibility form (``run_form`` NFKC or NFKD)
    writes "fi" and "2" where a reference may hold "ﬁ" and "²": both are compared in NFKC.

    Examples:
        >>> same_form(["cafe\u0301", "x\u00b2"]), same_form(["x\u00b2"], "NFKC")
        (['café', 'x²'], ['x2'])
    """
    form = "NFKC" if run_form in ("NFKC", "NFKD") else "NFC"
    return [unicodedata.normalize(form, t) for t in texts]


def score(hyps: list[str], refs: list[str], *, bleu_tokenize: str = "auto",
          run_form: str | None = None) -> dict[str, float]:
    """test_exact_match (fraction), test_bleu and test_chrf (sacrebleu, 0-100), of the texts
    in one Unicode form (``same_form``)."""
    tally = Tally(resolve_bleu_tokenize(refs, bleu_tokenize), run_form)
    tally.add(hyps, refs)
    return tally.scores()


class Tally:
    """test_exact_match, test_bleu and test_chrf of pairs added a chunk at a time (``add``),
    exactly those of all of them at once: corpus BLEU and chrF are functions of n-gram counts
    summed over the sentences (sacrebleu's ``corpus_bleu`` and ``corpus_chrf`` sum the same
    per-sentence statistics), exact match a count; nothing of a chunk is held after it.

    It relies on two private methods of sacrebleu 2's metrics (``BLEU`` and ``CHRF``),
    ``_extract_corpus_statistics`` (the per-sentence statistics) and
    ``_compute_score_from_stats`` (the score of summed ones), hence ``sacrebleu>=2.3,<3`` in
    pyproject.toml; tests/cli/test_evaluate_streams_translate.py compares its scores of pairs
    added in chunks with ``sacrebleu.corpus_bleu`` and ``corpus_chrf`` of all of them at once.

    Examples:
        >>> tally = Tally("13a")
        >>> tally.add(["the cat sat on the mat"], ["the cat sat on the mat"])
        >>> tally.add(["a dog"], ["the dog ran"])
        >>> tally.pairs, tally.scores()["test_exact_match"]
        (2, 0.5)
    """

    def __init__(self, bleu_tokenize: str, run_form: str | None = None) -> None:
        # corpus_bleu's and corpus_chrf's defaults (sacrebleu 2)
        self.bleu, self.chrf = sacrebleu.BLEU(tokenize=bleu_tokenize), sacrebleu.CHRF()
        self.run_form = run_form
        self.exact, self.pairs = 0, 0
        self.bleu_stats: list | None = None
        self.chrf_stats: list | None = None

    def add(self, hyps: list[str], refs: list[str]) -> None:
        """Count the translations ``hyps`` of one chunk against their references ``refs``, in
        one Unicode form (``same_form``)."""
        hyps, refs = same_form(hyps, self.run_form), same_form(refs, self.run_form)
        self.exact += sum(h.strip() == r.strip() for h, r in zip(hyps, refs, strict=True))
        self.pairs += len(refs)
        self.bleu_stats = _summed(self.bleu_stats,
                                  self.bleu._extract_corpus_statistics(hyps, [refs]))
        self.chrf_stats = _summed(self.chrf_stats,
                                  self.chrf._extract_corpus_statistics(hyps, [refs]))

    def scores(self) -> dict[str, float]:
        """The three scores of every pair added (exact match a fraction, BLEU and chrF 0-100);
        of none, an ``IndexError`` as sacrebleu's (a reader gives no file of no pairs)."""
        bleu = self.bleu._compute_score_from_stats(self.bleu_stats)
        chrf = self.chrf._compute_score_from_stats(self.chrf_stats)
        return {"test_exact_match": self.exact / max(1, self.pairs), "test_bleu": bleu.score,
                "test_chrf": chrf.score}


def _summed(total: list | None, stats: list[list]) -> list | None:
    """The per-sentence statistics ``stats`` summed, element by element, onto ``total``."""
    for row in stats:
        total = list(row) if total is None else [a + b for a, b in zip(total, row, strict=True)]
    return total


def compute_test_metrics(model, tok, pairs, cfg, labels: list[str] | None = None,
                         run_dir=None) -> tuple[dict[str, float], list[str]]:
    """(metrics, translations) of the (source, reference) ``pairs`` with the run's settings;
    ``labels`` name the pairs in errors (``translate_texts``) and in the note on stderr that a
    translation stopped at ``max_target_len`` (its end may be missing from what is scored);
    with ``run_dir``, the metrics are null where outputs are NaN (``scored_translations``)."""
    from ..base import null_scores

    hyps, nan = scored_translations(model, tok, pairs, cfg, labels, run_dir)
    metrics = score(hyps, [t for _, t in pairs], bleu_tokenize=cfg.bleu_tokenize,
                    run_form=cfg.normalize)
    return null_scores(metrics) if nan else metrics, hyps


def scored_translations(model, tok, pairs, cfg, labels: list[str] | None = None,
                        run_dir=None) -> tuple[list[str], bool]:
    """(the translations of the sources of ``pairs`` with the run's settings, whether the
    outputs for some were NaN), with the note (``say``: one for a file scored a chunk at a
    time, within ``said_once``) that some stopped at ``max_target_len`` (their end may be
    missing from what is scored) and, with ``run_dir``, the warning of NaN outputs
    (``said_nan``, the rule of every task's evaluate: its metrics are then null)."""
    from ...notes import say
    from ..base import said_nan

    unfinished: list[int] = []
    finite: list[bool] | None = [] if run_dir is not None else None
    hyps = translate_texts(model, tok, [s for s, _ in pairs], max_new_tokens=cfg.max_target_len,
                           num_beams=cfg.beam, length_penalty=cfg.length_penalty, labels=labels,
                           unfinished=unfinished, finite=finite)
    names = labels or [f"test pair number {n}" for n in range(1, len(pairs) + 1)]
    say("unfinished", len(unfinished), lambda count, _: "note: " + unfinished_note(
        unfinished, names, cfg.max_target_len, count), len(pairs))
    return hyps, finite is not None and said_nan(finite, names, run_dir)


def validation_scores(tok, pairs, cfg):
    """The measurement of ``val_bleu`` and ``val_chrf`` (``--val-bleu N``): a function of the
    model that translates ``pairs`` (the first N validation pairs) greedily where the model is
    and scores them as the test split is scored (``score``, the run's BLEU tokenisation)."""
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]

    def measure(model) -> dict[str, float]:
        device = next(model.parameters()).device
        hyps = translate_texts(model, tok, sources, max_new_tokens=cfg.max_target_len,
                               device=device)
        scores = score(hyps, refs, bleu_tokenize=cfg.bleu_tokenize, run_form=cfg.normalize)
        return {"val_bleu": scores["test_bleu"], "val_chrf": scores["test_chrf"]}

    return measure


def length_buckets(lengths: list[int], most: int = 8) -> list[tuple[int, int]]:
    """At most ``most`` ranges (first, last) of equal width covering ``lengths``.

    Examples:
        >>> length_buckets([1, 2, 3, 9, 12, 25], most=4)
        [(1, 7), (8, 14), (15, 21), (22, 28)]
    """
    low, high = min(lengths), max(lengths)
    width = -(-(high - low + 1) // most)
    return [(a, a + width - 1) for a in range(low, high + 1, width)]


def scores_by_length(tok: TranslationTokenizers, pairs, hyps: list[str],
                     run_form: str | None = None) -> list[dict]:
    """Exact match and chrF of the pairs grouped by their source's length in tokens: one row
    per non-empty bucket, ``{"lengths": "a-b", "first", "last", "pairs", "exact_match",
    "chrf"}``; texts compared in one form as ``score`` compares them (``same_form``)."""
    lengths = [len(ids) for ids in tok.encode_sources([s for s, _ in pairs])]
    tally = LengthTally(length_buckets(lengths), run_form)
    tally.add(lengths, hyps, [t for _, t in pairs])
    return tally.rows()


class LengthTally:
    """``scores_by_length``'s rows of pairs added a chunk at a time (``add``), exactly those of
    all of them at once: a ``Tally`` per bucket of source lengths (``length_buckets`` of every
    pair's, known before the first is added), so that ``evaluate --by-length --data FILE``
    holds a chunk of pairs, not the file.

    Examples:
        >>> tally = LengthTally([(1, 2), (3, 4)])
        >>> tally.add([1, 4], ["one", "four"], ["one", "for"])
        >>> tally.add([2], ["two"], ["two"])
        >>> [(r["lengths"], r["pairs"], r["exact_match"]) for r in tally.rows()]
        [('1-2', 2, 1.0), ('3-4', 1, 0.0)]
    """

    def __init__(self, buckets: list[tuple[int, int]], run_form: str | None = None) -> None:
        self.buckets = buckets
        self.tallies = [Tally("13a", run_form) for _ in buckets]  # BLEU unused: any tokeniser

    def add(self, lengths: list[int], hyps: list[str], refs: list[str]) -> None:
        """Count the translations ``hyps`` of one chunk's sources of ``lengths`` tokens against
        their references ``refs``, each in its length's bucket."""
        for (first, last), tally in zip(self.buckets, self.tallies):
            chosen = [i for i, n in enumerate(lengths) if first <= n <= last]
            if chosen:
                tally.add([hyps[i] for i in chosen], [refs[i] for i in chosen])

    def rows(self) -> list[dict]:
        """One row per bucket that holds a pair (``scores_by_length``'s)."""
        rows = []
        for (first, last), tally in zip(self.buckets, self.tallies):
            if tally.pairs:
                scores = tally.scores()
                rows.append({"lengths": f"{first}-{last}" if last > first else str(first),
                             "first": first, "last": last, "pairs": tally.pairs,
                             "exact_match": scores["test_exact_match"],
                             "chrf": scores["test_chrf"]})
        return rows


def by_length_table(rows: list[dict]) -> str:
    """The rows of ``scores_by_length`` as an aligned text table."""
    lines = [f"{'source tokens':>14}  {'pairs':>6}  {'exact match':>11}  {'chrF':>6}"]
    lines += [f"{r['lengths']:>14}  {r['pairs']:>6}  {r['exact_match']:>11.4f}  {r['chrf']:>6.2f}"
              for r in rows]
    return "\n".join(lines)
