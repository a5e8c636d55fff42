"""Beam search over a step function (re-exported by ``attnlab.generation``).

Shapes: B batch, A rows still searching (A <= B), K beams, V vocabulary, T0 prompt length.

The step function is the one greedy decoding uses (``attnlab.step_protocol``), and must also
have ``reorder(index)``: beam search first repeats each row K times (B -> B·K rows), then
follows the surviving beams after every step. A finished hypothesis is scored the Hugging Face
way:
    score = sum of token log-probabilities / length ** length_penalty
where length counts the generated tokens (the EOS included, the prompt not). Scores are
compared by the logarithm of −score (``_Rules.score``), which orders hypotheses as that
quotient does and which no finite length penalty overflows (``length ** 1000`` is no float).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from .step_protocol import StepFunction, check_positive_int, check_prompt, suppress

__all__ = ["beam_search"]

NEG_INF = float("-inf")


@dataclass(frozen=True)
class _Rules:
    """The settings of one search (K beams, prompt length T0, and beam_search's arguments)."""

    K: int
    T0: int
    max_new_tokens: int
    length_penalty: float
    eos_token_id: int | None
    pad_token_id: int
    suppress_tokens: tuple[int, ...] = ()

    def score(self, logprob: float, length: int) -> float:
        """A number that grows with ``logprob / length ** length_penalty`` (logprob <= 0): the
        negative of its logarithm, lp·ln(length) − ln(−logprob), divided by max(1, |lp|) (which
        changes no order) so that no finite penalty overflows it."""
        if logprob >= 0:  # probability 1: the best score any hypothesis can have
            return math.inf
        scale = max(1.0, abs(self.length_penalty))
        return self.length_penalty / scale * math.log(length) - math.log(-logprob) / scale


@torch.no_grad()
def beam_search(
    step: StepFunction,
    input_ids: Tensor,
    max_new_tokens: int,
    *,
    num_beams: int,
    length_penalty: float = 1.0,
    eos_token_id: int | None = None,
    pad_token_id: int = 0,
    suppress_tokens: tuple[int, ...] = (),
) -> Tensor:
    """Beam search: keep the ``num_beams`` most probable continuations of each row.

    Each step extends every beam by every token, keeps the 2K best candidates per row, files
    those ending in EOS (among the top K) as finished hypotheses scored
    ``sum logprob / length ** length_penalty``, and continues with the K best others. A row is
    done when it holds K finished hypotheses and no running beam can beat the worst of them; at
    ``max_new_tokens`` the running beams count as hypotheses too. The best hypothesis wins.

    Args:
        step: ``step(tokens (B', T)) -> logits (B', V)`` with ``reorder`` (module docstring).
        input_ids: (B, T0) the prompt (for an encoder–decoder model: the start token).
        max_new_tokens: at most this many tokens are appended.
        num_beams: beams K per row; 1 gives the same tokens as greedy decoding.
        length_penalty: > 0 favours longer hypotheses, < 0 shorter ones (Hugging Face's meaning).
        eos_token_id: the token that finishes a hypothesis (None: all run to max_new_tokens).
        pad_token_id: fills the positions after a hypothesis's EOS.
        suppress_tokens: ids no beam is extended by: their log-probabilities are set to -inf
            after the log-softmax and the others are not normalised again, as Hugging Face's
            ``bad_words_ids`` and ``suppress_tokens`` do.

    Returns:
        (B, T0 + N) int64 ids: the prompt, then each row's best hypothesis, padded.

    Raises:
        ValueError: for a bad num_beams, input_ids or max_new_tokens, or a step function
            without ``reorder``.

    Examples:
        >>> class Step:  # next token = last + 1 (mod 5); a model's step also reorders caches
        ...     def __call__(self, tokens):
        ...         return torch.nn.functional.one_hot((tokens[:, -1] + 1) % 5, 5).float()
        ...     def reorder(self, index):
        ...         pass
        >>> beam_search(Step(), torch.zeros(1, 1, dtype=torch.long), 3, num_beams=2).tolist()
        [[0, 1, 2, 3]]
    """
    _check_arguments(step, input_ids, max_new_tokens, num_beams)
    if eos_token_id is not None and not isinstance(eos_token_id, int):
        raise ValueError(f"beam search takes one eos_token_id, got {eos_token_id!r}")
    B, T0 = input_ids.shape
    rules = _Rules(num_beams, T0, max_new_tokens, length_penalty, eos_token_id, pad_token_id,
                   tuple(suppress_tokens))
    found: list[list] = [[] for _ in range(B)]  # per row: (score, tokens), best first
    seqs, scores, items = _search(step, input_ids, found, rules)
    _file_running(found, items, seqs, scores, rules)
    return _best_padded(found, input_ids, pad_token_id)


def _search(step, input_ids: Tensor, found: list[list], rules: _Rules):
    """Step the beams until every row is done or ``max_new_tokens`` were added, filing finished
    hypotheses in ``found``. Returns the running beams (A·K, T0 + N), their scores (A·K,) and
    the batch rows A still searching."""
    seqs, scores = _start(step, input_ids, rules.K)  # (B·K, T0), (B·K,)
    items = list(range(input_ids.shape[0]))  # the batch row of each group of K rows the step holds
    for t in range(rules.max_new_tokens):
        logprobs = suppress(step(seqs).float().log_softmax(dim=-1),
                            rules.suppress_tokens)  # (A·K, V)
        rows, tokens, kept_scores, items = _advance(logprobs, scores, seqs, items, found,
                                                    t + 1, rules)
        if not items:
            break
        index = torch.tensor(rows, device=seqs.device)
        step.reorder(index)
        new = torch.tensor(tokens, device=seqs.device)[:, None]  # (A·K, 1)
        seqs = torch.cat((seqs[index], new), dim=1)  # (A·K, T + 1)
        scores = torch.tensor(kept_scores, device=seqs.device)
    return seqs, scores, items


def _check_arguments(step, input_ids: Tensor, max_new_tokens: int, num_beams: int) -> None:
    check_prompt(input_ids, max_new_tokens)
    check_positive_int("num_beams", num_beams)
    if not callable(getattr(step, "reorder", None)):
        raise ValueError("beam search needs a step function with reorder(index)")


def _start(step, input_ids: Tensor, K: int) -> tuple[Tensor, Tensor]:
    """Repeat each row K times in the step and the prompt; the beams' scores (B·K,)."""
    B, device = input_ids.shape[0], input_ids.device
    step.reorder(torch.arange(B, device=device).repeat_interleave(K))
    seqs = input_ids.repeat_interleave(K, dim=0)  # (B·K, T0)
    # Only the first copy of each row may start: otherwise the K identical beams would all
    # pick the same best token.
    scores = torch.full((B, K), NEG_INF, device=device)
    scores[:, 0] = 0.0
    return seqs, scores.view(-1)  # (B·K,)


def _advance(logprobs: Tensor, scores: Tensor, seqs: Tensor, items: list[int],
             found: list[list], length: int, rules: _Rules):
    """One step of every row still searching: its 2K best candidates, EOS ones filed in
    ``found``. Returns the step's rows to continue from, their new tokens and scores (K per
    row that continues), and the batch rows that continue."""
    K, V = rules.K, logprobs.shape[-1]
    cand = (scores[:, None] + logprobs).view(len(items), K * V)  # (A, K·V)
    top_scores, top_idx = cand.topk(min(2 * K, K * V), dim=1)  # (A, 2K), best first
    top_scores = top_scores.tolist()
    beam, token = (top_idx // V).tolist(), (top_idx % V).tolist()
    rows, tokens, kept_scores, kept_items = [], [], [], []
    for a, b in enumerate(items):
        ranked = [(a * K + beam[a][r], token[a][r], s) for r, s in enumerate(top_scores[a])]
        chosen = _choose(ranked, seqs, found[b], length, rules)
        if chosen is None:
            continue  # this row is done
        for row, tok, s in chosen:
            rows.append(row)
            tokens.append(tok)
            kept_scores.append(s)
        kept_items.append(b)
    return rows, tokens, kept_scores, kept_items


def _choose(ranked: list[tuple[int, int, float]], seqs: Tensor, found: list, length: int,
            rules: _Rules) -> list[tuple[int, int, float]] | None:
    """The K (row, token, score) beams one batch row continues with, from its candidates
    best first; those ending in EOS among the top K are filed in ``found`` instead. None when
    the row is done; fewer than K live candidates are padded with dead (-inf) beams."""
    K, eos = rules.K, rules.eos_token_id
    chosen = []
    for rank, (row, tok, s) in enumerate(ranked):
        if s == NEG_INF or len(chosen) == K:
            break
        if eos is not None and tok == eos:
            if rank < K:
                hyp = torch.cat((seqs[row, rules.T0:], seqs.new_tensor([eos])))
                _add_hypothesis(found, K, rules.score(s, length), hyp)
        else:
            chosen.append((row, tok, s))
    if not chosen or (len(found) == K and not _can_improve(chosen[0][2], found[-1][0], length,
                                                           rules)):
        return None
    return chosen + [(chosen[-1][0], rules.pad_token_id, NEG_INF)] * (K - len(chosen))


def _add_hypothesis(found: list, limit: int, score: float, tokens: Tensor) -> None:
    """Keep the ``limit`` best (score, tokens) of one batch item, best first."""
    found.append((score, tokens))
    found.sort(key=lambda h: -h[0])
    del found[limit:]


def _can_improve(best_running: float, worst_found: float, length: int, rules: _Rules) -> bool:
    """Whether a running beam might still finish with a better score than the worst kept one.

    Log-probabilities only fall as a beam grows, so its sum s stays <= the current one; with a
    positive length penalty the division by length**lp grows it back at most to s/max_len**lp.
    """
    longest = rules.max_new_tokens if rules.length_penalty > 0 else length
    return rules.score(best_running, longest) > worst_found


def _file_running(found: list[list], items: list[int], seqs: Tensor, scores: Tensor,
                  rules: _Rules) -> None:
    """Out of steps: the running beams of the rows still searching are hypotheses too."""
    K, generated = rules.K, seqs.shape[1] - rules.T0
    for a, b in enumerate(items):
        for j in range(K):
            s = float(scores[a * K + j])
            if s > NEG_INF:
                _add_hypothesis(found[b], K, rules.score(s, generated), seqs[a * K + j, rules.T0:])


def _best_padded(found: list[list], input_ids: Tensor, pad_token_id: int) -> Tensor:
    """(B, T0 + N): the prompt, then each row's best hypothesis padded to the longest."""
    best = [h[0][1] if h else input_ids.new_empty(0) for h in found]
    out = input_ids.new_full((len(best), max(len(h) for h in best)), pad_token_id)
    for b, h in enumerate(best):
        out[b, : len(h)] = h
    return torch.cat((input_ids, out), dim=1)
