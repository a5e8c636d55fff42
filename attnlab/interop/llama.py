"""Llama, Qwen2, Qwen3 and Mistral models <-> attnlab's ``CausalLM``, weights copied.

The four families are one pre-norm block (RMSNorm, grouped-query attention with RoPE, a SwiGLU
feed-forward network) with a few switches, read and written by ``llama_config``. Both
directions walk the same names: ``model.embed_tokens``, per layer ``input_layernorm`` (attnlab's
``norm1``), ``self_attn.{q,k,v,o}_proj`` (the stacked ``qkv_proj`` through ``set_qkv`` /
``get_qkv``) and ``q_norm``/``k_norm`` (Qwen3), ``post_attention_layernorm`` (``norm2``),
``mlp.{gate,up,down}_proj`` (the same names in ``GatedFeedForward``), then ``model.norm`` and
``lm_head``. ``causal_lm_of`` takes any object holding those modules, a loaded
``*ForCausalLM``, so the GGUF reader can build one the same way.
"""
from __future__ import annotations

import torch
from torch import nn

from .llama_config import LLAMA_CLASSES, llama_family_config, llama_family_settings
from .weights import copy as _copy

__all__ = ["causal_lm_of", "llama_family_of"]


def causal_lm_of(hf) -> nn.Module:
    """The ``CausalLM`` of a Llama-family ``*ForCausalLM`` ``hf`` (its config and modules),
    in float32; ``ValueError`` naming what attnlab cannot represent."""
    from ..models.causal_lm import CausalLM, CausalLMConfig

    settings = llama_family_settings(hf.config.to_dict())
    model = CausalLM(CausalLMConfig(**settings, dropout=0.0, ff_dropout=0.0,
                                    attention_dropout=float(
                                        getattr(hf.config, "attention_dropout", 0.0) or 0.0)))
    _walk(model, hf, to_ours=True)
    return model


def llama_family_of(model: nn.Module, **ids: int | None):
    """The Llama-family ``*ForCausalLM`` holding a ``CausalLM``'s weights (the family that has
    its parts: ``llama_config.llama_family_config``), in float32."""
    import transformers

    model_type, kwargs = llama_family_config(model.config)
    cls = getattr(transformers, LLAMA_CLASSES[model_type])
    config = cls.config_class(**kwargs, **ids)
    hf = cls(config).float()
    _walk(model, hf, to_ours=False)
    return hf


@torch.no_grad()
def _walk(ours: nn.Module, hf, *, to_ours: bool) -> None:
    """Copy every tensor between ``ours`` (CausalLM) and ``hf``, in the direction ``to_ours``."""
    def move(mine, theirs):
        if mine is None and theirs is None:
            return
        _copy(mine, theirs.float()) if to_ours else _copy(theirs, mine.to(theirs.dtype))

    t = hf.model
    move(ours.token_embedding.weight, t.embed_tokens.weight)
    for block, layer in zip(ours.decoder.layers, t.layers, strict=True):
        a, attn = layer.self_attn, block.self_attn
        if to_ours:
            attn.set_qkv(*(p.float() for p in (a.q_proj.weight, a.k_proj.weight,
                                               a.v_proj.weight)),
                         *((None,) * 3 if a.q_proj.bias is None else
                           (p.float() for p in (a.q_proj.bias, a.k_proj.bias, a.v_proj.bias))))
        else:
            for proj, w, b in zip((a.q_proj, a.k_proj, a.v_proj), *_pairs(attn.get_qkv())):
                move(w, proj.weight)
                move(b, proj.bias)
        move(attn.o_proj.weight, a.o_proj.weight)
        move(attn.o_proj.bias, a.o_proj.bias)
        if hasattr(a, "q_norm"):
            move(attn.q_norm.weight, a.q_norm.weight)
            move(attn.k_norm.weight, a.k_norm.weight)
        move(block.norm1.weight, layer.input_layernorm.weight)
        move(block.norm2.weight, layer.post_attention_layernorm.weight)
        for name in ("gate_proj", "up_proj", "down_proj"):
            mine, theirs = getattr(block.linear_net, name), getattr(layer.mlp, name)
            move(mine.weight, theirs.weight)
            move(mine.bias, theirs.bias)
    move(ours.decoder.norm.weight, t.norm.weight)
    if not ours.config.tie_weights:
        move(ours.lm_head.weight, hf.lm_head.weight)


def _pairs(qkv):
    wq, wk, wv, bq, bk, bv = qkv
    return (wq, wk, wv), (bq, bk, bv)
