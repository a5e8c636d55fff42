"""How ``CausalLM`` generates: prompt checks, left alignment, its ``attnlab.generation`` step
function, and the sliding context.

Shapes: B batch, T0 prompt length, N new tokens, V vocabulary, D model width.

Why a module of its own: ``causal_lm.py`` holds the model (embedding, stack, head, forward
pass, and ``CausalLM.step``, its one-token fast path); this one adapts it to the step protocol
of ``attnlab.generation``, whose ``decode_stream`` runs the token loop for every model.
``LMStep`` prefills the prompt with the ordinary forward pass (filling a ``KVCache`` per layer,
reserved for the whole generation) and then calls ``CausalLM.step`` once per token
(``tests/models/test_causal_lm.py`` checks its logits against the full forward pass).

Prompts of different lengths are left-padded (``left_align``); each row's positions count from
its own first real token, and padded keys are masked, so a padded batch gives each row what that
row gives alone.
"""
from __future__ import annotations

from typing import Any, Iterator, Protocol

import torch
from torch import Tensor, nn

from ..generation import decode_stream, selector, stop_ids
from ..nn import KVCache, TransformerEncoder
from ..step_protocol import FiniteWatch, check_token_ids

__all__ = ["left_align", "prepare", "selector", "LMStep", "stream_tokens", "stream_sliding",
           "uncached_steps", "cached_steps", "CausalModel"]


class CausalModel(Protocol):
    """What generation uses of a ``CausalLM``, named here rather than imported: the model's
    module imports this one, and the import runs one way only."""

    vocab_size: int
    max_len: int
    training: bool
    decoder: TransformerEncoder
    lm_head: nn.Module

    def __call__(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor: ...

    def _check_ids(self, input_ids: Tensor) -> None: ...

    def hidden_states(self, input_ids: Tensor, attention_mask: Tensor | None = None, *,
                      positions: Tensor | None = None,
                      cache: list[KVCache] | None = None) -> Tensor: ...

    def step(self, input_ids: Tensor, cache: list[KVCache], *, positions: Tensor,
             key_mask: Tensor | None = None) -> Tensor: ...

    def train(self, mode: bool = True) -> Any: ...

    def eval(self) -> Any: ...


def left_align(input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
    """Move each row's padding to the left, keeping the order of its real tokens.

    Generation appends new tokens at the right end, so the last column must be a real token.
    A stable sort on the mask (0 before 1) does it for right padding or any mix.
    """
    order = torch.argsort(attention_mask.long(), dim=1, stable=True)  # (B, T) pads first
    return input_ids.gather(1, order), attention_mask.gather(1, order)


def prepare(model: CausalModel, input_ids: Tensor, max_new_tokens: int,
            attention_mask: Tensor | None) -> tuple[Tensor, Tensor | None]:
    """Validate, and left-align padded prompts; the mask is None when nothing is padded."""
    model._check_ids(input_ids)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    B, T0 = input_ids.shape
    if T0 == 0:
        raise ValueError("input_ids must hold at least one token per row (got T0 = 0)")
    # every position generation will use is below T0 + max_new_tokens: checked here, once,
    # so that the forward passes read no positions (no host synchronisation)
    if T0 + max_new_tokens > model.max_len:
        raise ValueError(f"prompt length ({T0}) + max_new_tokens ({max_new_tokens}) exceeds "
                         f"max_len ({model.max_len})")
    check_token_ids(input_ids, model.vocab_size)
    if attention_mask is None or bool(attention_mask.bool().all()):
        return input_ids, None
    if attention_mask.shape != input_ids.shape:
        raise ValueError(f"attention_mask must have the shape of input_ids {(B, T0)}, "
                         f"got {tuple(attention_mask.shape)}")
    if not bool(attention_mask.bool().any(1).all()):
        raise ValueError("every prompt needs at least one real token (a row of "
                         "attention_mask is all 0)")
    return left_align(input_ids, attention_mask.bool())


class LMStep:
    """The ``attnlab.generation`` step function of a ``CausalLM``: tokens (B, T) -> logits (B, V).

    The first call reads the prompt (left-padded rows described by ``attention_mask``); with
    ``use_cache`` it fills a per-layer ``KVCache`` reserved for ``total`` tokens, and each later
    call feeds only the newest token to ``CausalLM.step``. Without the cache every call re-runs
    the whole sequence (the reference the cached path is tested on). ``reorder`` keeps batch
    rows (generation drops finished rows).

    Args:
        model: the CausalLM, in eval mode.
        attention_mask: (B, T0) 1 = real prompt token, or None when nothing is padded.
        total: prompt length + new tokens.
        use_cache: keep keys and values between calls.
    """

    def __init__(self, model: CausalModel, attention_mask: Tensor | None, total: int,
                 use_cache: bool = True) -> None:
        self.model, self.mask, self.total, self.use_cache = model, attention_mask, total, use_cache
        self.cache = None
        self.key_mask = self.pos = None  # (B, 1, 1, total) real keys; (B, N) new positions
        self.t = 0  # new tokens fed so far

    def __call__(self, tokens: Tensor) -> Tensor:
        if not self.use_cache:
            return self._uncached(tokens)
        if self.cache is None:
            return self._prefill(tokens)
        t, self.t = self.t, self.t + 1
        key_mask = None if self.key_mask is None else self.key_mask[..., : tokens.shape[1]]
        return self.model.step(tokens[:, -1:], self.cache, positions=self.pos[:, t : t + 1],
                               key_mask=key_mask)  # (B, V)

    def _prefill(self, ids: Tensor) -> Tensor:
        B, T0 = ids.shape
        self.cache = self.model.decoder.make_cache()
        h = self.model.hidden_states(ids, self.mask, cache=self.cache)  # (B, T0, D)
        for cache in self.cache:
            cache.reserve(self.total)
        # the position of every new token, for all steps at once: (B, N)
        start = (torch.full((B, 1), T0, device=ids.device) if self.mask is None
                 else self.mask.long().sum(1, keepdim=True))  # (B, 1) real prompt tokens
        self.pos = start + torch.arange(self.total - T0, device=ids.device)[None, :]
        if self.mask is not None:
            self.key_mask = torch.ones(B, 1, 1, self.total, dtype=torch.bool, device=ids.device)
            self.key_mask[:, 0, 0, :T0] = self.mask
        return self.model.lm_head(h[:, -1])  # (B, V)

    def _uncached(self, ids: Tensor) -> Tensor:
        mask = self.mask
        if mask is not None and mask.shape[1] < ids.shape[1]:  # new tokens are real
            mask = torch.cat([mask, mask.new_ones(mask.shape[0], ids.shape[1] - mask.shape[1])], 1)
        return self.model(ids, mask)[:, -1]

    def reorder(self, index: Tensor) -> None:
        if self.mask is not None:
            self.mask = self.mask.index_select(0, index)
        if self.key_mask is not None:
            self.key_mask = self.key_mask.index_select(0, index)
        if self.pos is not None:
            self.pos = self.pos.index_select(0, index)
        for cache in self.cache or ():
            cache.reorder(index)


def stream_sliding(model: CausalModel, context: Tensor, n: int, options: dict) -> Iterator[Tensor]:
    """``n`` new tokens (B, 1) one by one past ``max_len``: when the context is full, keep its
    last max_len // 2 tokens, re-read them, and continue (each round is cached). A row that
    emitted EOS holds pad to the end, as in ``generate``, whatever window it is in."""
    keep = max(1, model.max_len // 2)
    stops, pad = _stops_and_pad(options.get("eos_token_id"), options.get("pad_token_id"))
    done = torch.zeros(context.shape[0], dtype=torch.bool, device=context.device)  # (B,)
    stops = None if stops is None else torch.as_tensor(stops, device=context.device)
    while n > 0:
        m = min(n, model.max_len - context.shape[1])
        new = []
        # each window starts a new decoding, in which every row is alive: a row that emitted
        # EOS in an earlier window must keep its padding, not continue from its re-read tail
        for token in stream_tokens(model, context, m, None, **options):
            new.append(torch.where(done[:, None], pad, token))  # (B, 1)
            yield new[-1]
            if stops is not None:
                done |= torch.isin(new[-1][:, 0], stops)
                if bool(done.all()):  # the last row emitted EOS: as generate, stop here
                    return
        n -= m
        if len(new) < m:  # every row emitted EOS
            return
        context = torch.cat([context, *new], dim=1)[:, -keep:]


def _stops_and_pad(eos_token_id, pad_token_id) -> tuple[int | Tensor | None, int]:
    """The EOS ids a row stops at (``stop_ids``), and what fills a row after its EOS:
    ``pad_token_id``, else the first EOS id (Hugging Face's rule), else 0."""
    stops = stop_ids(eos_token_id)
    first_eos = int(stops[0]) if isinstance(stops, Tensor) else stops
    pad = first_eos if pad_token_id is None else pad_token_id
    return stops, 0 if pad is None else pad


def stream_tokens(model: CausalModel, input_ids: Tensor, max_new_tokens: int,
                  attention_mask: Tensor | None, *, do_sample: bool = False,
                  temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                  eos_token_id: int | list[int] | None = None, use_cache: bool = True,
                  pad_token_id: int | None = None,
                  generator: torch.Generator | None = None,
                  finite: list[bool] | None = None) -> Iterator[Tensor]:
    """Each step's new tokens (B, 1) after prompts that ``prepare`` has checked and aligned:
    ``attnlab.generation.decode_stream`` over an ``LMStep``, in eval mode. ``finite``, when
    given, gets per row whether the logits of every step it took were finite (``FiniteWatch``),
    once the stream ends or is closed (past ``max_len``, ``stream_sliding`` adds a row's
    entries once per window)."""
    selector(do_sample, temperature, top_k, top_p, None)  # bad options fail even for n = 0
    if max_new_tokens == 0:
        return
    _, pad = _stops_and_pad(eos_token_id, pad_token_id)
    was_training = model.training
    model.eval()  # dropout has no place in generation
    watch = None
    try:
        step = LMStep(model, attention_mask, input_ids.shape[1] + max_new_tokens, use_cache)
        if finite is not None:
            step = watch = FiniteWatch(step, input_ids.shape[0], input_ids.device)
        yield from decode_stream(step, input_ids, max_new_tokens, do_sample=do_sample,
                                 temperature=temperature, top_k=top_k, top_p=top_p,
                                 eos_token_id=eos_token_id, pad_token_id=pad,
                                 generator=generator)
    finally:
        model.train(was_training)
        if watch is not None:
            finite += watch.finite()


# Generators of next-token logits (B, V), sent the chosen tokens (B, 1): an LMStep driven by
# hand, as tests compare it with the full forward pass.
def _steps(model: CausalModel, ids: Tensor, attention_mask: Tensor | None, n: int, use_cache: bool):
    step = LMStep(model, attention_mask, ids.shape[1] + n, use_cache)
    while True:
        token = yield step(ids)
        ids = torch.cat([ids, token], dim=1)


def uncached_steps(model: CausalModel, ids: Tensor, attention_mask: Tensor | None, n: int):
    """Re-run the whole sequence at every step (the reference the cached path is tested on)."""
    return _steps(model, ids, attention_mask, n, use_cache=False)


def cached_steps(model: CausalModel, ids: Tensor, attention_mask: Tensor | None, n: int):
    """Prefill the prompt into a key/value cache, then one ``CausalLM.step`` per token."""
    return _steps(model, ids, attention_mask, n, use_cache=True)
