"""Autoregressive generation: next-token selection, greedy/sampled decoding, beam search.

Shapes: B batch, K beams, V vocabulary, T tokens so far, N new tokens.

Everything here is model-agnostic, and every generating model in attnlab goes through it. A
model is decoded through its *step function*: an object called with every token so far,
``step(tokens) -> logits``, tokens (B, T) -> next-token logits (B, V). A step function that
keeps a key/value cache feeds the model only the tokens it has not seen yet
(``tokens[:, cached:]``), through the fast ``step`` of the modules that own the weights
(``TransformerEncoder.step``, ``TransformerDecoder.step``), so one step costs O(T) instead of
O(T²). A step function
may also have ``reorder(index)``: keep batch rows ``index`` (row i becomes old row
``index[i]``) of whatever it holds (caches, encoder memory). Beam search needs it to follow the
surviving beams; greedy decoding uses it to drop finished rows from the batch.

Decoding stops for a row when it emits ``eos_token_id``; later positions hold ``pad_token_id``.
Beam search lives in ``attnlab.beam`` (its scoring is described there) and is re-exported here;
the step protocol and the argument checks both loops share are in ``attnlab.step_protocol``.
"""
from __future__ import annotations

from typing import Callable, Iterator

import torch
from torch import Tensor

from .beam import beam_search
from .settings import SamplingSettings, check_argument
from .step_protocol import FiniteWatch, StepFunction, check_prompt, suppress

__all__ = ["translate_from_start", "filter_top_k", "filter_top_p", "sampling_scores",
           "select_next_token", "selector", "StepFunction",
           "decode", "decode_stream", "beam_search"]


# ---- choosing the next token ------------------------------------------------------------
def filter_top_k(logits: Tensor, k: int) -> Tensor:
    """Keep the k largest logits of each row; set the rest to -inf (ties with the k-th kept).

    Args:
        logits: (..., V) unnormalised scores.
        k: how many to keep (k >= V keeps everything).

    Returns:
        A new tensor (..., V).

    Raises:
        ValueError: if k is not a positive integer.

    Examples:
        >>> filter_top_k(torch.tensor([[1.0, 3.0, 2.0]]), 2)
        tensor([[-inf, 3., 2.]])
    """
    check_argument(SamplingSettings, "top_k", k)
    if k >= logits.shape[-1]:
        return logits.clone()
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1) the k-th largest
    return logits.masked_fill(logits < kth, float("-inf"))


def filter_top_p(logits: Tensor, p: float) -> Tensor:
    """Nucleus filtering (Holtzman et al., 2020): keep the smallest set of most probable tokens
    whose total probability is >= p; set the rest to -inf. At least one token always stays.

    Args:
        logits: (..., V) unnormalised scores.
        p: probability mass to keep, in (0, 1]; 1 keeps everything.

    Returns:
        A new tensor (..., V).

    Raises:
        ValueError: if p is not in (0, 1].

    Examples:
        >>> filter_top_p(torch.tensor([[0.0, 2.0, 1.0]]).log_softmax(-1), 0.6).isinf().tolist()
        [[True, False, True]]
    """
    check_argument(SamplingSettings, "top_p", p)
    if p >= 1.0:
        return logits.clone()
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (..., V)
    probs = sorted_logits.float().softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs  # mass of the strictly more probable tokens
    drop_sorted = before >= p  # the set already reached p without this token
    drop_sorted[..., 0] = False  # the most probable token always stays
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def select_next_token(
    logits: Tensor,
    *,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """The next token of each row: the argmax, or a sample from softmax(logits / temperature)
    restricted by top-k and then top-p.

    Args:
        logits: (B, V) next-token scores.
        do_sample: sample instead of taking the argmax (then the other options apply).
        temperature: > 0 and at least 1e-6 (below it logits / temperature overflows
            float32: ``SamplingSettings.temperature`` declares both bounds); below 1 sharpens
            the distribution, above 1 flattens it.
        top_k: sample only among the k most probable tokens.
        top_p: sample only from the nucleus of mass p.
        generator: a ``torch.Generator`` for reproducible sampling.

    Returns:
        (B,) int64 token ids.

    Raises:
        ValueError: for a temperature not > 0 or below 1e-6, bad top_k/top_p, or logits not
            (B, V).

    Examples:
        >>> select_next_token(torch.tensor([[0.1, 2.0, -1.0]]))
        tensor([1])
    """
    if logits.ndim != 2:
        raise ValueError(f"logits must be (B, V), got shape {tuple(logits.shape)}")
    check_argument(SamplingSettings, "temperature", temperature)
    if not do_sample:
        if top_k is not None:
            filter_top_k(logits[:0], top_k)  # validate the option even when unused
        if top_p is not None:
            filter_top_p(logits[:0], top_p)
        return logits.argmax(dim=-1)
    probs = sampling_scores(logits, temperature, top_k, top_p).softmax(dim=-1)  # (B, V)
    # a row that is no distribution (a model trained to NaN) takes its argmax, as greedy
    # decoding does: torch.multinomial stopped the command with a traceback; the callers that
    # watch the logits (``FiniteWatch``) then say the output is not finite
    bad = ~probs.isfinite().all(-1, keepdim=True)  # (B, 1)
    probs = torch.where(bad, torch.nn.functional.one_hot(logits.argmax(-1), probs.shape[-1])
                        .to(probs.dtype), probs)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def sampling_scores(logits: Tensor, temperature: float = 1.0, top_k: int | None = None,
                    top_p: float | None = None) -> Tensor:
    """The scores a sample is drawn from (its softmax): logits / temperature, then top-k,
    then top-p, in float32 — the order of Hugging Face's logits warpers, whose distribution
    this equals (``tests/interop/test_generation_hf_sampling.py``).

    Args:
        logits: (B, V) next-token scores.
        temperature: as in ``select_next_token``.
        top_k: as in ``select_next_token``.
        top_p: as in ``select_next_token``.

    Returns:
        (B, V) float32 scores, -inf where a filter removed the token.

    Raises:
        ValueError: for a temperature not > 0 or below 1e-6, or bad top_k/top_p.

    Examples:
        >>> sampling_scores(torch.tensor([[1.0, 3.0, 2.0]]), 0.5, top_k=2)
        tensor([[-inf, 6., 4.]])
    """
    check_argument(SamplingSettings, "temperature", temperature)
    scores = logits.float() / temperature  # (B, V)
    if top_k is not None:
        scores = filter_top_k(scores, top_k)
    if top_p is not None:
        scores = filter_top_p(scores, top_p)
    return scores


# ---- decoding loops ---------------------------------------------------------------------
def selector(do_sample: bool = False, temperature: float = 1.0, top_k: int | None = None,
             top_p: float | None = None,
             generator: torch.Generator | None = None) -> Callable[[Tensor], Tensor]:
    """The next-token rule ``logits (B, V) -> ids (B,)``, its options checked once here (greedy
    is then a bare argmax, with no per-step checks).

    Raises:
        ValueError: for a non-positive temperature or bad top_k/top_p.

    Examples:
        >>> selector()(torch.tensor([[0.1, 2.0, -1.0]]))
        tensor([1])
    """
    select_next_token(torch.zeros(1, 2), do_sample=do_sample, temperature=temperature,
                      top_k=top_k, top_p=top_p)  # raises ValueError on bad options
    if not do_sample:
        return lambda logits: logits.argmax(dim=-1)
    return lambda logits: select_next_token(logits, do_sample=True, temperature=temperature,
                                            top_k=top_k, top_p=top_p, generator=generator)


def stop_ids(eos_token_id, device=None) -> int | Tensor | None:
    """``eos_token_id`` as ``decode_stream`` compares it: None, one id, or a tensor of several
    (a row stops at any of them, as in Hugging Face's ``generate``).

    Examples:
        >>> stop_ids(2), stop_ids([2, 7]).tolist(), stop_ids([5])
        (2, [2, 7], 5)
    """
    if eos_token_id is None:
        return None
    if not isinstance(eos_token_id, (list, tuple)) and getattr(eos_token_id, "ndim", 0) == 0:
        return int(eos_token_id)  # an int, or a NumPy or 0-d tensor one
    ids = [int(i) for i in eos_token_id]
    if not ids:
        raise ValueError("eos_token_id is an empty list; give an id, several, or None")
    return ids[0] if len(ids) == 1 else torch.tensor(ids, device=device)


def decode_stream(
    step: StepFunction,
    input_ids: Tensor,
    max_new_tokens: int,
    *,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int = 0,
    generator: torch.Generator | None = None,
    suppress_tokens: tuple[int, ...] = (),
) -> Iterator[Tensor]:
    """``decode``, yielding each step's new tokens (B, 1) as soon as they exist.

    Each step runs in inference mode, which is never held across a ``yield`` (it is thread
    state); the yielded tensors are ordinary ones. Arguments as in ``decode``.

    Examples:
        >>> step = lambda tokens: torch.nn.functional.one_hot((tokens[:, -1] + 1) % 5, 5).float()
        >>> [t.item() for t in decode_stream(step, torch.tensor([[0]]), 3)]
        [1, 2, 3]
    """
    check_prompt(input_ids, max_new_tokens)
    select = selector(do_sample, temperature, top_k, top_p, generator)
    (B, T0), n = input_ids.shape, max_new_tokens
    stops = stop_ids(eos_token_id, input_ids.device)
    compact = callable(getattr(step, "reorder", None))
    alive = None if eos_token_id is None else torch.ones(B, dtype=torch.bool,
                                                         device=input_ids.device)
    rows = None  # the original row of each row the step holds; None: all rows, in order
    # one buffer filled column by column (no per-step concatenation); the step sees a view of
    # it, so a step function that keeps ``tokens`` beyond its call must copy them
    seqs = torch.cat((input_ids, input_ids.new_zeros(B, n)), dim=1)  # (B', T0 + N)
    for t in range(n):
        with torch.inference_mode():
            nxt = select(suppress(step(seqs[:, : T0 + t]), suppress_tokens))  # (B',)
            seqs[:, T0 + t] = nxt
            token = nxt if rows is None else (  # back to all B rows, dropped ones padded
                nxt.new_full((B,), pad_token_id).index_copy(0, rows, nxt))
            if alive is not None:
                token = torch.where(alive, token, pad_token_id)  # (B,)
                alive = alive & (token != stops if isinstance(stops, int)
                                 else ~torch.isin(token, stops))
        yield token[:, None].clone()  # (B, 1), made outside inference mode
        if alive is None or t + 1 == n:
            continue
        if not bool(alive.any()):
            return
        held = alive if rows is None else alive[rows]
        if compact and not bool(held.all()):  # drop finished rows from the step's batch
            with torch.inference_mode():
                keep = held.nonzero().squeeze(1)
                step.reorder(keep)
                seqs, rows = seqs[keep], (keep if rows is None else rows[keep])


def decode(
    step: StepFunction,
    input_ids: Tensor,
    max_new_tokens: int,
    *,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int = 0,
    generator: torch.Generator | None = None,
    suppress_tokens: tuple[int, ...] = (),
) -> Tensor:
    """Greedy (or sampled) decoding: append ``select_next_token(step(tokens))`` until every row
    has emitted EOS or ``max_new_tokens`` were added.

    When the step function has ``reorder``, rows that finished are dropped from its batch, so
    the remaining rows run faster and a row's result never depends on the others.

    Args:
        step: ``step(tokens (B', T)) -> logits (B', V)``, see the module docstring.
        input_ids: (B, T0) the prompt (for an encoder–decoder model: the start token).
        max_new_tokens: at most this many tokens are appended.
        do_sample: sample instead of taking the most likely token (``select_next_token``).
        temperature: divides the logits before sampling (``select_next_token``).
        top_k: sample among the k most likely tokens (``select_next_token``).
        top_p: sample among the most likely tokens that hold p of the mass (``select_next_token``).
        generator: the random generator of the sampling (``select_next_token``).
        eos_token_id: a row stops after emitting it, or any of a list of ids (None: never
            stop early).
        pad_token_id: fills the positions after a row's EOS.
        suppress_tokens: ids never appended (their logits set to -inf).

    Returns:
        (B, T0 + N) int64 ids: the prompt, then the new tokens (N <= max_new_tokens is the
        longest row; shorter rows are padded after their EOS).

    Raises:
        ValueError: if input_ids is not (B, T) or max_new_tokens is not positive.

    Examples:
        >>> step = lambda tokens: torch.nn.functional.one_hot((tokens[:, -1] + 1) % 5, 5).float()
        >>> decode(step, torch.tensor([[0]]), 3).tolist()
        [[0, 1, 2, 3]]
    """
    new = list(decode_stream(step, input_ids, max_new_tokens, do_sample=do_sample,
                             temperature=temperature, top_k=top_k, top_p=top_p,
                             eos_token_id=eos_token_id, pad_token_id=pad_token_id,
                             generator=generator, suppress_tokens=suppress_tokens))
    return torch.cat((input_ids, *new), dim=1)


def translate_from_start(model, make_step: Callable[[], StepFunction], batch_size: int,
                         max_new_tokens: int, *, num_beams: int = 1, length_penalty: float = 1.0,
                         eos_token_id: int | None = None, device=None,
                         finite: list[bool] | None = None) -> Tensor:
    """An encoder–decoder's ``generate``: in eval mode (restored after), ``make_step()``
    encodes the source and returns the step function; then, from ``model.sos_id`` in every
    row, greedy ``decode`` (one beam) or ``beam_search`` until ``eos_token_id`` (default
    ``model.eos_id``), padding with ``model.pad_id``. Returns (B, 1 + N) ids.

    The model never writes ``model.pad_id`` (unless it is the stop token): padding is never a
    training target, and a written one would read as the padding after EOS, dropped from the
    decoded text. Marian's checkpoints ban it too (``bad_words_ids`` [[pad]]), so the tokens
    are Hugging Face's ``generate``'s (tests/interop/test_marian_pad_banned.py).

    ``finite``, when given, gets per row whether the logits of every step it took were finite
    (``FiniteWatch``: from the search's own logits, greedy or beam)."""
    was_training = model.training
    model.eval()
    try:
        step = make_step()
        if finite is not None:
            step = watch = FiniteWatch(step, batch_size, device)
        start = torch.full((batch_size, 1), model.sos_id, dtype=torch.long, device=device)
        eos = model.eos_id if eos_token_id is None else eos_token_id
        banned = () if model.pad_id == eos else (model.pad_id,)
        if num_beams == 1:
            ids = decode(step, start, max_new_tokens, eos_token_id=eos,
                         pad_token_id=model.pad_id, suppress_tokens=banned)
        else:
            ids = beam_search(step, start, max_new_tokens, num_beams=num_beams,
                              length_penalty=length_penalty, eos_token_id=eos,
                              pad_token_id=model.pad_id, suppress_tokens=banned)
        if finite is not None:
            finite += watch.finite()
        return ids
    finally:
        model.train(was_training)
