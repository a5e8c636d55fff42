"""A BERT-family checkpoint's files read straight into an attnlab ``BertEncoder``, without
``transformers`` (``bert_encoder_of``).

Shapes: D model width, F feed-forward width, V vocabulary, P positions, N token types.

Reading a checkpoint through ``transformers`` imports its model code (a large part of a
run's start: benchmarks/RESULTS.md, "finetune after the fixed costs") to build a Hugging Face
model that is converted and thrown away. The encoder needs only
``config.json``'s sizes and the tensors by name (under no prefix in a saved ``BertModel``, under
``bert.``, ``roberta.`` or ``distilbert.`` in a task model built on one):

    Hugging Face tensor                        DistilBERT's                  attnlab BertEncoder
    embeddings.word_embeddings      (V, D)     (the same)                    word_embeddings
    embeddings.position_embeddings  (P, D)     (the same)                    position_embeddings
    embeddings.token_type_embeddings (N, D)    (none)                        token_type_embeddings
    embeddings.LayerNorm            (D,)       (the same)                    embed_norm
    encoder.layer.i.                           transformer.layer.i.          encoder.layers.i.
      attention.self.query/key/value (D, D)      attention.q_lin/k_lin/v_lin   self_attn (stacked
                                                                               per head: set_qkv)
      attention.output.dense        (D, D)       attention.out_lin             self_attn.o_proj
      attention.output.LayerNorm    (D,)         sa_layer_norm                 norm1
      intermediate.dense            (F, D)       ffn.lin1                      linear_net.0
      output.dense                  (D, F)       ffn.lin2                      linear_net.3
      output.LayerNorm              (D,)         output_layer_norm             norm2
    pooler.dense                    (D, D)     (none)                        pooler

A LayerNorm that old TensorFlow ports saved as ``gamma`` / ``beta`` reads as ``weight`` /
``bias``, as ``transformers`` reads it. Tensors outside the encoder (a task head, an MLM head)
and the index buffers older files saved (``position_ids``) are left out; an encoder tensor the
config does not describe (a layer past ``num_hidden_layers``: a config.json of fewer layers
than its weights), or any tensor outside the encoder where config.json's ``architectures`` is
a base model (``BertModel``, which has no head), is reported, so that a truncated model is
never read in silence. The encoder has BERT's pooler where the weights hold one.
What ``config.json`` describes that the encoder cannot be (a decoder, relative positions, a
factorised embedding, an activation attnlab lacks) is refused with a ValueError, as
``attnlab.interop.from_hf`` refuses the same model.

Example:
    >>> stored = bert_tensors("model.safetensors")                        # doctest: +SKIP
    >>> encoder, missing, mismatched = bert_encoder_of(stored, "bert", config)  # doctest: +SKIP
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ..activation_names import hf_activation
from ..models.bert import BertEncoder
from ..models.configs import BertEncoderConfig

__all__ = ["bert_tensors", "bert_encoder_of", "hf_tensors_of", "layer_names", "BASE_PREFIX"]

# model_type -> the prefix of the encoder's tensors in a task model's checkpoint
BASE_PREFIX = {"bert": "bert.", "roberta": "roberta.", "xlm-roberta": "roberta.",
               "camembert": "roberta.", "distilbert": "distilbert."}
_ROBERTA_STYLE = ("roberta", "xlm-roberta", "camembert")  # positions from pad_token_id + 1
_WORDS = "embeddings.word_embeddings.weight"
# the encoder's own tensors start with these (after the prefix); the rest is a head's
_ENCODER_PARTS = ("embeddings.", "encoder.", "transformer.", "pooler.")
# index buffers older transformers saved: no weights, rebuilt from the config
_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")


def bert_tensors(weights: str | Path) -> dict[str, Tensor]:
    """Every tensor of a ``model.safetensors`` or ``pytorch_model.bin`` file, or of the
    shards a ``model.safetensors.index.json`` names, by name, on the CPU (the pickle read with
    ``weights_only=True``)."""
    from safetensors.torch import load_file

    from .source import weight_files

    out: dict[str, Tensor] = {}
    for each in weight_files(Path(weights)):
        out.update(load_file(each, device="cpu") if each.suffix == ".safetensors" else
                   torch.load(each, map_location="cpu", weights_only=True))
    return out


def _renamed(stored: Mapping[str, Tensor], model_type: str) -> dict[str, Tensor]:
    """The encoder's tensors without their prefix, ``gamma`` / ``beta`` read as ``weight`` /
    ``bias``; the unprefixed tensors outside the encoder (a head) under their own names."""
    prefix = BASE_PREFIX[model_type]
    if _WORDS in stored or prefix + _WORDS not in stored:
        prefix = ""  # a saved base model (or neither: the missing tensors are named later)
    out = {}
    for name, tensor in stored.items():
        if not name.startswith(prefix):
            if not name.startswith(_ENCODER_PARTS):  # a head beside the prefixed encoder
                out.setdefault(name, tensor)
            continue
        name = name[len(prefix):]
        if name.endswith(".gamma"):
            name = name[:-len("gamma")] + "weight"
        elif name.endswith(".beta"):
            name = name[:-len("beta")] + "bias"
        out[name] = tensor
    return out


def _encoder_config(model_type: str, config: Mapping[str, Any],
                    pooler: bool) -> BertEncoderConfig:
    """``BertEncoder``'s config from ``config.json`` (``config``), with the defaults of
    ``transformers``' config classes for what it leaves out; ValueError for a model the
    encoder cannot be."""

    def need(key: str) -> Any:
        if config.get(key) is None:
            raise ValueError(f"{model_type}: config.json has no {key!r}")
        return config[key]

    if model_type == "distilbert":
        if config.get("sinusoidal_pos_embds"):
            raise ValueError("distilbert with sinusoidal_pos_embds=True is not supported")
        sizes = dict(model_dim=need("dim"), num_heads=need("n_heads"),
                     num_layers=need("n_layers"), dim_feedforward=need("hidden_dim"),
                     type_vocab_size=0, dropout=config.get("dropout", 0.1),
                     attention_dropout=config.get("attention_dropout", 0.1))
        act, eps = config.get("activation", "gelu"), 1e-12  # DistilBERT's LayerNorms: 1e-12
    else:
        for flag in ("is_decoder", "add_cross_attention"):
            if config.get(flag):
                raise ValueError(f"{model_type}: {flag}=True (a causal decoder) is not "
                                 f"supported: attnlab's BertEncoder attends both ways and has "
                                 f"no cross-attention, so its outputs would differ")
        width = need("hidden_size")
        if config.get("embedding_size", width) != width:
            raise ValueError(f"{model_type}: embedding_size ({config['embedding_size']}) != "
                             f"hidden_size ({width}) needs a projection attnlab's encoder lacks")
        style = config.get("position_embedding_type") or "absolute"
        if style != "absolute":
            raise ValueError(f"{model_type}: position_embedding_type {style!r} is not "
                             f"supported (only 'absolute')")
        sizes = dict(model_dim=width, num_heads=need("num_attention_heads"),
                     num_layers=need("num_hidden_layers"),
                     dim_feedforward=need("intermediate_size"),
                     type_vocab_size=config.get("type_vocab_size", 2),
                     dropout=config.get("hidden_dropout_prob", 0.1),
                     attention_dropout=config.get("attention_probs_dropout_prob", 0.1))
        act, eps = config.get("hidden_act", "gelu"), config.get("layer_norm_eps", 1e-12)
    roberta = model_type in _ROBERTA_STYLE
    pad = config.get("pad_token_id", 1 if roberta else 0)
    return BertEncoderConfig(
        vocab_size=need("vocab_size"), max_len=config.get("max_position_embeddings", 512),
        pooler=pooler, activation=hf_activation(act, model_type), layer_norm_eps=eps,
        pad_token_id=0 if pad is None else pad,
        position_style="roberta" if roberta else "absolute", **sizes)


def layer_names(model_type: str, i: int) -> dict[str, str]:
    """Role -> the Hugging Face module name of layer ``i``'s parts."""
    if model_type == "distilbert":
        p = f"transformer.layer.{i}."
        return {"q": p + "attention.q_lin", "k": p + "attention.k_lin",
                "v": p + "attention.v_lin", "o": p + "attention.out_lin",
                "ff1": p + "ffn.lin1", "ff2": p + "ffn.lin2", "norm1": p + "sa_layer_norm",
                "norm2": p + "output_layer_norm"}
    p = f"encoder.layer.{i}."
    return {"q": p + "attention.self.query", "k": p + "attention.self.key",
            "v": p + "attention.self.value", "o": p + "attention.output.dense",
            "ff1": p + "intermediate.dense", "ff2": p + "output.dense",
            "norm1": p + "attention.output.LayerNorm", "norm2": p + "output.LayerNorm"}


def _targets(model: BertEncoder, model_type: str) -> list[tuple[str, nn.Module | None, str]]:
    """(Hugging Face module name, our module, kind) of every part: kind "embedding", "norm",
    "linear", or "q"/"k"/"v" (a third of ``self_attn``'s stacked projection)."""
    parts = [("embeddings.word_embeddings", model.word_embeddings, "embedding"),
             ("embeddings.position_embeddings", model.position_embeddings, "embedding"),
             ("embeddings.LayerNorm", model.embed_norm, "norm")]
    if model.token_type_embeddings is not None:
        parts.append(("embeddings.token_type_embeddings", model.token_type_embeddings,
                      "embedding"))
    for i, block in enumerate(model.encoder.layers):
        names = layer_names(model_type, i)
        parts += [(names[r], block.self_attn, r) for r in ("q", "k", "v")]
        parts += [(names["o"], block.self_attn.o_proj, "linear"),
                  (names["ff1"], block.linear_net[0], "linear"),
                  (names["ff2"], block.linear_net[3], "linear"),
                  (names["norm1"], block.norm1, "norm"), (names["norm2"], block.norm2, "norm")]
    if model.pooler is not None:
        parts.append(("pooler.dense", model.pooler, "linear"))
    return parts


def _expected(module: nn.Module, kind: str) -> dict[str, tuple[int, ...]]:
    """The tensors (suffix -> shape) a Hugging Face part of ``kind`` holds for ``module``."""
    if kind in ("q", "k", "v"):  # (E, in) each, (E,) biases
        e = module.embed_dim
        shapes = {"weight": (e, module.input_dim)}
        return {**shapes, "bias": (e,)} if module.qkv_proj.bias is not None else shapes
    if kind == "embedding":
        return {"weight": tuple(module.weight.shape)}
    return {"weight": tuple(module.weight.shape), "bias": tuple(module.bias.shape)}


def _is_base_model(config: Mapping[str, Any]) -> bool:
    """Whether config.json's ``architectures`` name only base models (``BertModel``,
    ``RobertaModel``, ...: no head), not a task model (``*For...``) or none at all."""
    classes = config.get("architectures")
    return (isinstance(classes, list) and bool(classes)
            and all(isinstance(c, str) and c.endswith("Model") and "For" not in c
                    for c in classes))


@torch.no_grad()
def bert_encoder_of(stored: Mapping[str, Tensor], model_type: str, config: Mapping[str, Any]
                    ) -> tuple[BertEncoder | None, list[str], list, list[str]]:
    """The encoder ``config`` (``config.json``'s mapping) describes, holding ``stored``'s
    tensors (``bert_tensors``), in eval mode.

    Args:
        stored: the checkpoint's tensors by name, as saved.
        model_type: ``config.json``'s ``model_type``, one of ``BASE_PREFIX``.
        config: ``config.json``'s mapping.

    Returns:
        ``(encoder, missing, mismatched, unexpected)``: the tensors the config describes that
        ``stored`` lacks (names as saved, without a prefix), ``(name, stored shape, config's
        shape)`` of those of another shape, and the encoder's tensors of ``stored`` the config
        does not describe (sorted); the encoder is None unless all three are empty.

    Raises:
        ValueError: for a model the encoder cannot be (see the module doc) or a
            ``model_type`` not in ``BASE_PREFIX``.

    Examples:
        >>> enc = BertEncoder(40, model_dim=8, num_heads=2, num_layers=1, dim_feedforward=16)
        >>> config = {"vocab_size": 40, "hidden_size": 8, "num_attention_heads": 2,
        ...           "num_hidden_layers": 1, "intermediate_size": 16}
        >>> bert_encoder_of({}, "bert", config)[1][:2]
        ['embeddings.word_embeddings.weight', 'embeddings.position_embeddings.weight']
    """
    if model_type not in BASE_PREFIX:
        raise ValueError(f"model_type must be one of {', '.join(BASE_PREFIX)}, got "
                         f"{model_type!r}")
    tensors = _renamed(stored, model_type)
    model = BertEncoder(_encoder_config(model_type, config,
                                        pooler="pooler.dense.weight" in tensors))
    parts = _targets(model, model_type)
    missing, mismatched, used = [], [], set(_BUFFERS)
    for name, module, kind in parts:
        for suffix, shape in _expected(module, kind).items():
            key = f"{name}.{suffix}"
            used.add(key)
            if key not in tensors:
                missing.append(key)
            elif tuple(tensors[key].shape) != shape:
                mismatched.append((key, tuple(tensors[key].shape), shape))
    # a task model's head is left out (its own names: classifier., cls., qa_outputs., ...);
    # a base model's file holds no head, so a tensor outside its encoder is one the config
    # does not describe either
    base = _is_base_model(config)
    unexpected = sorted(n for n in tensors if n not in used
                        and (base or n.startswith(_ENCODER_PARTS)))
    if missing or mismatched or unexpected:
        return None, missing, mismatched, unexpected
    _copy_into(parts, tensors)
    return model.eval(), [], [], []


def _copy_into(parts, tensors: Mapping[str, Tensor]) -> None:
    """Copy ``tensors`` into the modules of ``parts`` (``_targets``'s), every one present and
    of its shape; the query, key and value of a layer are stacked once all three are read."""
    qkv: dict[int, dict[str, Tensor]] = {}
    for name, module, kind in parts:
        weight, bias = tensors[f"{name}.weight"], tensors.get(f"{name}.bias")
        if kind in ("q", "k", "v"):
            held = qkv.setdefault(id(module), {})
            held[kind], held["b" + kind] = weight, bias
            if len(held) == 6:  # all three read: stacked per head
                module.set_qkv(held["q"], held["k"], held["v"], held["bq"], held["bk"],
                               held["bv"])
            continue
        module.weight.copy_(weight)
        if kind != "embedding":
            module.bias.copy_(bias)


@torch.no_grad()
def hf_tensors_of(model: BertEncoder, model_type: str) -> dict[str, Tensor]:
    """The inverse of ``bert_encoder_of``: ``model``'s weights under the names (no prefix) of
    a Hugging Face ``model_type`` encoder, by the same table (the pooler left out: each
    ``*ForSequenceClassification`` head holds it under its own name). Q, K and V are unstacked
    from ``self_attn`` (``get_qkv``); a model without token types has none.

    Examples:
        >>> enc = BertEncoder(40, model_dim=8, num_heads=2, num_layers=1, dim_feedforward=16)
        >>> hf_tensors_of(enc, "distilbert")["transformer.layer.0.attention.q_lin.weight"].shape
        torch.Size([8, 8])
    """
    out: dict[str, Tensor] = {}
    for name, module, kind in _targets(model, model_type):
        if name.startswith("pooler."):
            continue
        if kind in ("q", "k", "v"):
            wq, wk, wv, bq, bk, bv = module.get_qkv()
            weight, bias = {"q": (wq, bq), "k": (wk, bk), "v": (wv, bv)}[kind]
        else:
            weight, bias = module.weight, getattr(module, "bias", None)
        out[f"{name}.weight"] = weight.detach().clone()
        if bias is not None and kind != "embedding":
            out[f"{name}.bias"] = bias.detach().clone()
    return out
