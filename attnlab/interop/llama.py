"""Llama, Qwen2, Qwen3 and Mistral models <-> attnlab's ``CausalLM``, weights copied.

The four families are one pre-norm block (RMSNorm, grouped-query attention with RoPE, a SwiGLU
feed-forward network) with a few switches, read and written by ``llama_config``. Both
directions walk the same names: ``model.embed_tokens``, per layer ``input_layernorm`` (attnlab's
``norm1``), ``self_attn.{q,k,v,o}_proj`` (the stacked ``qkv_proj`` through ``set_qkv`` /
``get_qkv``) and ``q_norm``/``k_norm`` (Qwen3), ``post_attention_layernorm`` (``norm2``),
``mlp.{gate,up,down}_proj`` (the same names in ``GatedFeedForward``), then ``model.norm`` and
``lm_head``: ``direct_read``'s one table of names, which both directions read.
``causal_lm_of`` takes a loaded ``*ForCausalLM``.
"""
from __future__ import annotations

from torch import nn

from .direct_read import check_tied_head, check_zero_biases, read_named, write_named
from .llama_config import LLAMA_CLASSES, llama_family_config, llama_family_settings

__all__ = ["causal_lm_of", "llama_family_of"]


def causal_lm_of(hf) -> nn.Module:
    """The ``CausalLM`` of a Llama-family ``*ForCausalLM`` ``hf`` (its config and modules),
    in float32; ``ValueError`` naming what attnlab cannot represent (a config.json key, or
    an o_proj bias of Llama's ``attention_bias`` without ``mlp_bias`` that is not zero)."""
    from ..models.causal_lm import CausalLM, CausalLMConfig

    config = hf.config.to_dict()
    settings = llama_family_settings(config)
    # o_proj biases attnlab has no place for: read only when zero, never dropped
    check_zero_biases(config, hf.state_dict().__getitem__)
    if settings["tie_weights"]:  # transformers unties a head the checkpoint holds apart
        check_tied_head(hf.get_output_embeddings().weight, hf.get_input_embeddings().weight)
    model = CausalLM(CausalLMConfig(**settings, dropout=0.0, ff_dropout=0.0,
                                    attention_dropout=float(
                                        getattr(hf.config, "attention_dropout", 0.0) or 0.0)))
    _walk(model, hf, to_ours=True)
    return model


def llama_family_of(model: nn.Module, *, qkv_bias_as: str = "llama", **ids: int | None):
    """The Llama-family ``*ForCausalLM`` holding a ``CausalLM``'s weights (the family that has
    its parts, q/k/v biases alone as ``qkv_bias_as``: ``llama_config.llama_family_config``),
    in float32."""
    import torch
    import transformers

    model_type, kwargs = llama_family_config(model.config, qkv_bias_as=qkv_bias_as)
    cls = getattr(transformers, LLAMA_CLASSES[model_type])
    config = cls.config_class(**kwargs, **ids)
    hf = cls(config).float()
    _walk(model, hf, to_ours=False)
    if model_type == "llama" and config.attention_bias and not model.config.bias:
        with torch.no_grad():  # q/k/v biases as Llama's attention_bias: o_proj's adds nothing
            for layer in hf.model.layers:
                layer.self_attn.o_proj.bias.zero_()
    return hf


def _walk(ours: nn.Module, hf, *, to_ours: bool) -> None:
    """Copy every tensor between ``ours`` (CausalLM) and ``hf``, in the direction
    ``to_ours``, by ``direct_read``'s one table of names (a checkpoint's tied ``lm_head`` is
    the embedding's memory in both)."""
    theirs = hf.state_dict()
    if to_ours:
        read_named(ours, lambda name, out=None: theirs[name] if out is None
                   else out.copy_(theirs[name]))
    else:
        write_named(ours, theirs)
