"""One cached decoding step of a causal Transformer stack, as functional calls.

Shapes: B batch, D model width, V vocabulary, H heads, hd head width (D / H), T0 prompt length.

``CausalLM.generate`` (through ``lm_generation.cached_steps``) prefills the prompt with the
ordinary forward pass (which fills a ``KVCache`` per layer) and then produces each further token
with ``_DecodeStep``, which runs the pre-LN (GPT-2) or post-LN (Vaswani et al.) stack as
``torch.nn.functional`` calls over the model's own parameters (shared, never copied).

Why: at batch 1 a 6-layer model spends more time in per-call Python (module ``__call__``, hooks,
argument checks, mask building, cache bookkeeping) than in arithmetic, so removing that overhead
is what makes cached generation fast on a CPU (``benchmarks/RESULTS.md``, generate_lm).
``tests/models/test_causal_lm.py`` checks that the step's logits equal the full forward pass.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..nn import KVCache

if TYPE_CHECKING:  # only for the annotation: causal_lm imports this module (via lm_generation)
    from .causal_lm import CausalLM

__all__: list[str] = []  # private to attnlab.models.lm_generation


class _DecodeStep:
    """One cached decoding step for every layer, written with functional calls.

    The same computation as ``EncoderBlock.forward`` with a cache and one query (tested equal
    to the full forward pass), with the per-call overhead removed: no module ``__call__``, no
    mask (the single new query may see every cached key; only padded keys are masked), no
    dropout (eval mode), and keys/values written into buffers allocated once for the whole
    generation.

    Args:
        model: the CausalLM (its parameters are used as they are, not copied).
        cache: the per-layer caches filled by the prefill pass.
        total: prompt length + new tokens: the buffers' length.
    """

    def __init__(self, model: CausalLM, cache: list[KVCache], total: int) -> None:
        enc = model.encoder
        self.layers, self.kv = [], []
        for layer, c in zip(enc.layers, cache):
            attn, ff = layer.self_attn, layer.linear_net
            n1, n2 = layer.norm1, layer.norm2
            self.layers.append((
                attn.qkv_proj.weight, attn.qkv_proj.bias, attn.o_proj.weight, attn.o_proj.bias,
                attn.rotary, ff[0].weight, ff[0].bias, ff[2].forward, ff[3].weight, ff[3].bias,
                (n1.normalized_shape, n1.weight, n1.bias, n1.eps),
                (n2.normalized_shape, n2.weight, n2.bias, n2.eps),
            ))
            B, H, T0, hd = c.k.shape
            k, v = c.k.new_empty(B, H, total, hd), c.v.new_empty(B, H, total, hd)
            k[:, :, :T0], v[:, :, :T0] = c.k, c.v
            self.kv.append((k, v))
        self.norm_first = enc.layers[0].norm_first
        self.H = enc.layers[0].self_attn.num_heads
        fn = enc.norm
        self.final_norm = ((fn.normalized_shape, fn.weight, fn.bias, fn.eps)
                           if isinstance(fn, nn.LayerNorm) else None)
        self.wte, self.head = model.token_embedding.weight, model.lm_head.weight
        # position rows looked up directly: ``generate`` checked T0 + n <= max_len up front,
        # so the per-step range check (a tensor -> int sync) of ``embed`` is not needed
        pe = model.pos_encoding
        self.pos_table = (pe.embedding.weight if model.positional == "learned"
                          else pe.pe[0] if model.positional == "sinusoidal" else None)

    def __call__(self, token: Tensor, pos: Tensor, length: int, key_mask: Tensor | None) -> Tensor:
        """Logits (B, V) after ``token`` (B, 1) at positions ``pos`` (B, 1), with ``length``
        keys already cached."""
        x = F.embedding(token, self.wte)  # (B, 1, D)
        if self.pos_table is not None:
            x = x + F.embedding(pos, self.pos_table).to(x.dtype)
        B, _, D = x.shape
        H, pre, ln = self.H, self.norm_first, torch.layer_norm
        end = length + 1
        for (wqkv, bqkv, wo, bo, rotary, w1, b1, act, w2, b2, n1, n2), (kb, vb) in zip(
                self.layers, self.kv):
            h = ln(x, *n1) if pre else x
            # (B, 1, 3E) viewed per head [q; k; v]: (B, H, 1, 3·hd), then (B, H, 1, hd) each
            q, k, v = F.linear(h, wqkv, bqkv).view(B, H, 1, 3 * (D // H)).chunk(3, dim=-1)
            if rotary is not None:
                q, k = rotary(q, pos), rotary(k, pos)
            kb[:, :, length:end] = k
            vb[:, :, length:end] = v
            o = F.scaled_dot_product_attention(q, kb[:, :, :end], vb[:, :, :end],
                                               attn_mask=key_mask)  # (B, H, 1, hd)
            x = x + F.linear(o.view(B, 1, D), wo, bo)  # (B, 1, D): heads are contiguous
            if not pre:
                x = ln(x, *n1)
            h = ln(x, *n2) if pre else x
            x = x + F.linear(act(F.linear(h, w1, b1)), w2, b2)
            if not pre:
                x = ln(x, *n2)
        if self.final_norm is not None:
            x = ln(x, *self.final_norm)
        return F.linear(x[:, 0], self.head)  # (B, V)
