"""How ``CausalLM`` generates: prompt checks, left alignment, the token loop, the sliding
context, and the cached and uncached step generators.

Shapes: B batch, T0 prompt length, N new tokens, V vocabulary.

Why a module of its own: ``causal_lm.py`` holds the model (embedding, stack, head, forward
pass); this one drives that forward pass token by token. Every function takes the model as its
first argument instead of being mixed into the class, so ``CausalLM.generate`` and
``CausalLM.stream`` stay short and each piece can be tested alone
(``tests/models/test_causal_lm.py`` checks ``cached_steps`` against the full forward pass).
After the prompt, each cached step runs ``decode_step._DecodeStep``.

Prompts of different lengths are left-padded (``left_align``); each row's positions count from
its own first real token, and padded keys are masked, so a padded batch gives each row what that
row gives alone.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import torch
from torch import Tensor

from .decode_step import _DecodeStep

if TYPE_CHECKING:  # only for the annotations: causal_lm imports this module
    from .causal_lm import CausalLM

__all__ = ["left_align", "prepare", "selector", "stream_tokens", "stream_sliding",
           "uncached_steps", "cached_steps"]


def left_align(input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
    """Move each row's padding to the left, keeping the order of its real tokens.

    Generation appends new tokens at the right end, so the last column must be a real token.
    A stable sort on the mask (0 before 1) does it for right padding or any mix.
    """
    order = torch.argsort(attention_mask.long(), dim=1, stable=True)  # (B, T) pads first
    return input_ids.gather(1, order), attention_mask.gather(1, order)


def prepare(model: CausalLM, input_ids: Tensor, max_new_tokens: int,
            attention_mask: Tensor | None) -> tuple[Tensor, Tensor | None]:
    """Validate, and left-align padded prompts; the mask is None when nothing is padded."""
    model._check_ids(input_ids)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    B, T0 = input_ids.shape
    if T0 == 0:
        raise ValueError("input_ids must hold at least one token per row (got T0 = 0)")
    if T0 + max_new_tokens > model.max_len:
        raise ValueError(f"prompt length ({T0}) + max_new_tokens ({max_new_tokens}) exceeds "
                         f"max_len ({model.max_len})")
    if attention_mask is None or bool(attention_mask.bool().all()):
        return input_ids, None
    if attention_mask.shape != input_ids.shape:
        raise ValueError(f"attention_mask must have the shape of input_ids {(B, T0)}, "
                         f"got {tuple(attention_mask.shape)}")
    if not bool(attention_mask.bool().any(1).all()):
        raise ValueError("every prompt needs at least one real token (a row of "
                         "attention_mask is all 0)")
    return left_align(input_ids, attention_mask.bool())


def selector(do_sample, temperature, top_k, top_p, generator):
    """The next-token rule, validated once: greedy is a bare argmax (no per-step checks)."""
    from ..generation import select_next_token

    select_next_token(torch.zeros(1, 2), do_sample=do_sample, temperature=temperature,
                      top_k=top_k, top_p=top_p)  # raises ValueError on bad options
    if not do_sample:
        return lambda logits: logits.argmax(dim=-1)
    return lambda logits: select_next_token(logits, do_sample=True, temperature=temperature,
                                            top_k=top_k, top_p=top_p, generator=generator)


def stream_sliding(model: CausalLM, context: Tensor, n: int, options: dict) -> Iterator[Tensor]:
    """``n`` new tokens (B, 1) one by one past ``max_len``: when the context is full, keep its
    last max_len // 2 tokens, re-read them, and continue (each round is cached)."""
    keep = max(1, model.max_len // 2)
    while n > 0:
        m = min(n, model.max_len - context.shape[1])
        new = list(stream_tokens(model, context, m, None, **options))
        yield from new
        n -= m
        if len(new) < m:  # every row emitted EOS
            return
        context = torch.cat([context, *new], dim=1)[:, -keep:]


def stream_tokens(model: CausalLM, input_ids: Tensor, max_new_tokens: int,
                  attention_mask: Tensor | None, *, do_sample: bool = False,
                  temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                  eos_token_id: int | None = None, use_cache: bool = True,
                  pad_token_id: int | None = None,
                  generator: torch.Generator | None = None) -> Iterator[Tensor]:
    """Each step's new tokens (B, 1) after prompts that ``prepare`` has checked and aligned."""
    select = selector(do_sample, temperature, top_k, top_p, generator)
    if max_new_tokens == 0:
        return
    B = input_ids.shape[0]
    pad = eos_token_id if pad_token_id is None else pad_token_id
    finished = None
    was_training = model.training
    model.eval()  # dropout has no place in generation
    # inference mode is entered per step, never held across a ``yield`` (it is thread
    # state: holding it would leak into the caller's code between tokens)
    try:
        steps = (cached_steps if use_cache else uncached_steps)(
            model, input_ids, attention_mask, max_new_tokens)
        with torch.inference_mode():
            logits = next(steps)  # (B, V)
        for i in range(max_new_tokens):
            with torch.inference_mode():
                token = select(logits)  # (B,)
                if eos_token_id is not None:
                    if finished is None:
                        finished = torch.zeros(B, dtype=torch.bool, device=token.device)
                    token = token.masked_fill(finished, pad)
                    finished = finished | (token == eos_token_id)
                token = token[:, None]  # (B, 1)
            # a normal tensor (made outside inference mode), usable anywhere afterwards
            yield token.clone()
            if i + 1 == max_new_tokens or (finished is not None and bool(finished.all())):
                break
            with torch.inference_mode():
                logits = steps.send(token)
    finally:
        model.train(was_training)


# The step generators yield next-token logits (B, V) and are sent the chosen tokens (B, 1).
def uncached_steps(model: CausalLM, ids: Tensor, attention_mask: Tensor | None, n: int):
    """Re-run the whole sequence at every step (the reference the cached path is tested on)."""
    mask = attention_mask
    while True:
        token = yield model(ids, mask)[:, -1]
        ids = torch.cat([ids, token], dim=1)
        if mask is not None:
            mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)


def cached_steps(model: CausalLM, ids: Tensor, attention_mask: Tensor | None, n: int):
    """Prefill the prompt into a key/value cache, then run one ``_DecodeStep`` per token."""
    B, T0 = ids.shape
    total = T0 + n
    cache = model.encoder.make_cache()
    if attention_mask is None:
        lengths = torch.full((B, 1), T0, device=ids.device)
        key_mask = None
    else:
        lengths = attention_mask.long().sum(1, keepdim=True)  # (B, 1) real prompt tokens
        key_mask = torch.ones(B, 1, 1, total, dtype=torch.bool, device=ids.device)
        key_mask[:, 0, 0, :T0] = attention_mask
    h = model.hidden_states(ids, attention_mask, cache=cache)  # prefill: (B, T0, D)
    token = yield model.lm_head(h[:, -1])  # (B, V)
    # the position of new token t in each row, for all steps at once: (B, n)
    pos = lengths + torch.arange(n, device=ids.device)[None, :]
    step = _DecodeStep(model, cache, total)
    for t in range(n - 1):
        mask_t = None if key_mask is None else key_mask[..., : T0 + t + 1]
        token = yield step(token, pos[:, t : t + 1], T0 + t, mask_t)
