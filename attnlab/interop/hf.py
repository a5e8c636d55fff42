"""Weight conversion between Hugging Face ``transformers`` models and attnlab models.

Shapes: D model width, E = D attention width, F feed-forward width, V vocabulary.

``transformers`` is imported inside the functions that need it (the ``hf`` extra), so
``import attnlab.interop`` costs nothing. Conversions copy tensors; the two models share nothing.

Layout differences handled here:
- GPT-2 stores its linear layers as ``Conv1D`` with weight (in, out), y = x W + b, the
  transpose of ``nn.Linear``'s (out, in); its ``c_attn`` stacks [Q | K | V] along the output.
- attnlab's self-attention stacks Q, K, V per head (``MultiheadAttention.set_qkv`` converts).
- BERT's blocks are post-LN: ``attention.output.LayerNorm`` is attnlab's ``norm1`` and
  ``output.LayerNorm`` its ``norm2``.
- Marian (both ways) lives in ``marian.py``: its residual features are in another order.
"""
from __future__ import annotations

import torch
from torch import nn

from ..models.configs import CausalLMConfig
from .llama_config import LLAMA_CLASSES, LLAMA_FAMILY
from .marian import marian_to_seq2seq, seq2seq_to_marian
from .source import BERT_FAMILY
from .weights import ACT_TO_HF as _ACT_TO_HF
from .weights import activation as _activation
from .weights import copy as _copy
from .weights import copy_linear as _copy_linear
from .weights import copy_norm as _copy_norm

__all__ = ["from_hf", "to_hf", "BERT_FAMILY"]


def from_hf(hf_model: nn.Module, *, release: bool = False) -> nn.Module:
    """The attnlab model equivalent to a Hugging Face model, weights copied.

    Supported:
        - ``GPT2LMHeadModel`` -> ``attnlab.models.CausalLM``: ``m(input_ids)`` gives the same
          logits (B, T, V), and ``m.generate`` the same greedy continuations.
        - ``LlamaForCausalLM``, ``Qwen2ForCausalLM``, ``Qwen3ForCausalLM``,
          ``MistralForCausalLM`` -> ``CausalLM`` with RMSNorm, SwiGLU, grouped-query
          attention, RoPE (θ, none/linear/llama3 scaling), Qwen2's q/k/v biases (and
          Llama's ``attention_bias`` without ``mlp_bias``, as ``to_hf(qkv_bias_as="llama")``
          writes them, when its o_proj biases are zero), Qwen3's QK-norm, Mistral's sliding
          window (``attnlab.interop.llama``), in float32.
        - ``BertModel`` and BERT-family encoders (RoBERTa, XLM-R, CamemBERT, DistilBERT; or a
          task model built on one, whose base model is converted) ->
          ``attnlab.models.bert.BertEncoder``: ``m(input_ids, attention_mask=None,
          token_type_ids=None)`` gives the last hidden states (B, T, D), and ``m.pool`` of
          them the pooler output (B, D) when the Hugging Face model has a pooler.
        - ``MarianMTModel`` -> ``attnlab.models.Seq2SeqTransformer`` (post-LN, sinusoidal
          positions, separate source and target embeddings both holding Marian's shared one):
          ``m(src, tgt, src_mask=attention_mask)`` gives the logits of
          ``hf(input_ids=src, attention_mask=..., decoder_input_ids=tgt)``, and
          ``m.generate(src, N, src_mask=...)`` Hugging Face's greedy ids (start token first)
          when ``forced_eos_token_id`` is None — attnlab never forces EOS at the length limit.
          ``pad_id``, ``sos_id`` (Marian's ``decoder_start_token_id``) and ``eos_id`` come
          from the config; without ``src_mask`` the source mask is ``src != pad_token_id``.
          The residual features are permuted (see ``attnlab.interop.marian``), so hidden
          states are Marian's in another feature order; logits are in the same order.

    Args:
        hf_model: a ``transformers`` model instance.
        release: empty ``hf_model`` (GPT-2, Llama family) as it is read, so that a model read
            only to be converted (a GGUF file's) is not whole twice in memory; it is then unusable.

    Returns:
        The attnlab model, in the same train/eval mode as ``hf_model``.

    Raises:
        ValueError: for a model type or configuration attnlab cannot represent.

    Examples:
        >>> from transformers import GPT2Config, GPT2LMHeadModel
        >>> lm = from_hf(GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=2, n_head=4)))
    """
    model_type = getattr(getattr(hf_model, "config", None), "model_type", None)
    if release and model_type not in _RELEASED:
        raise ValueError(f"from_hf: release=True is for {', '.join(_RELEASED)}, not {model_type!r}")
    if model_type in BERT_FAMILY:
        model = _bert_family(getattr(hf_model, "base_model", hf_model), model_type)
    elif model_type in _WITH_HEAD:
        name, convert = _WITH_HEAD[model_type]
        if not hasattr(hf_model, "lm_head"):
            raise ValueError(f"from_hf converts {name} (with its LM head), "
                             f"got {type(hf_model).__name__}")
        model = convert(hf_model, release=True) if release else convert(hf_model)
    else:
        raise ValueError(f"from_hf: unsupported model {type(hf_model).__name__} "
                         f"(model_type {model_type!r}); supported: GPT2LMHeadModel, "
                         f"MarianMTModel, {', '.join(LLAMA_CLASSES.values())} and "
                         f"{', '.join(BERT_FAMILY)} encoders")
    return model.train(hf_model.training)


def _llama_family(hf, *, release: bool = False) -> nn.Module:
    from .llama import causal_lm_of

    return causal_lm_of(hf, release=release)


# ---- GPT-2 ----------------------------------------------------------------------------------
def _gpt2_to_causal_lm(hf, *, release: bool = False) -> nn.Module:
    """The ``CausalLM`` of a ``GPT2LMHeadModel``, built on the meta device and given untouched
    memory that ``hf``'s tensors fill; ``release``: as ``llama.causal_lm_of``'s, each of
    ``hf``'s parameters is given up once read (a GGUF file's model, read only to be converted),
    so the two models are not both whole in memory."""
    from ..models.causal_lm import CausalLM, CausalLMConfig
    from .direct_read import check_tied_head
    from .weights import materialize, parameters_on_meta, reader

    c = hf.config
    if not getattr(c, "scale_attn_weights", True) or getattr(c, "scale_attn_by_inverse_layer_idx", False):
        raise ValueError("GPT-2 with scale_attn_weights=False or scale_attn_by_inverse_layer_idx=True "
                         "uses a different attention scale than softmax(QKᵀ/√d_k)")
    D = c.n_embd
    with parameters_on_meta():  # every parameter is read from hf below
        model = CausalLM(CausalLMConfig(
            vocab_size=c.vocab_size, model_dim=D, num_heads=c.n_head, num_layers=c.n_layer,
            dim_feedforward=c.n_inner or 4 * D, max_len=c.n_positions, dropout=c.resid_pdrop,
            attention_dropout=c.attn_pdrop, ff_dropout=0.0, norm_first=True,
            tie_weights=bool(getattr(c, "tie_word_embeddings", True)), positional="learned",
            activation=_activation(c.activation_function, "gpt2"),
            layer_norm_eps=c.layer_norm_epsilon))
    if model.config["tie_weights"]:  # transformers unties a head the checkpoint holds apart
        check_tied_head(hf.get_output_embeddings().weight, hf.get_input_embeddings().weight,
                        "transformer.wte.weight")
    materialize(model, torch.get_default_dtype())  # (float64 under set_default_dtype)
    take = reader(hf, release=release)
    take("transformer.wte.weight", model.token_embedding.weight)
    take("transformer.wpe.weight", model.positional_encoding.embedding.weight)
    for i, ours in enumerate(model.decoder.layers):
        h = f"transformer.h.{i}."
        # Conv1D (D, 3D) -> 3 × (D, D)
        wq, wk, wv = take(h + "attn.c_attn.weight", transposed=True).split(D, dim=0)
        bq, bk, bv = take(h + "attn.c_attn.bias").split(D)
        ours.self_attn.set_qkv(wq, wk, wv, bq, bk, bv)
        for linear, name in ((ours.self_attn.o_proj, "attn.c_proj"),
                             (ours.linear_net[0], "mlp.c_fc"), (ours.linear_net[3], "mlp.c_proj")):
            take(h + name + ".weight", linear.weight, transposed=True)  # Conv1D (in, out)
            take(h + name + ".bias", linear.bias)
        for norm, name in ((ours.norm1, "ln_1"), (ours.norm2, "ln_2")):
            take(h + name + ".weight", norm.weight)
            take(h + name + ".bias", norm.bias)
    take("transformer.ln_f.weight", model.decoder.norm.weight)
    take("transformer.ln_f.bias", model.decoder.norm.bias)
    if not model.config["tie_weights"]:
        take("lm_head.weight", model.lm_head.weight)
    return model


def to_hf(model: nn.Module, *, bos_token_id: int | None = None,
          eos_token_id: int | None = None, pad_token_id: int | None = None,
          qkv_bias_as: str | None = None):
    """Export an attnlab model to the equivalent Hugging Face model, weights copied.

    Supported:
        - ``CausalLM`` -> ``GPT2LMHeadModel``: the same logits for ``hf(input_ids)``. GPT-2 is
          a pre-LN stack with learned positions, biases and a final LayerNorm, so the CausalLM
          must have ``norm_first=True``, ``positional="learned"``, ``bias=True``, a GPT-2
          activation (gelu, gelu_tanh, relu, silu) and no Llama-family part (``norm`` ...).
        - ``CausalLM`` with RoPE and RMSNorm or a gated network -> the ``*ForCausalLM`` of
          the Llama family holding its parts (``llama_config.llama_family_config``).
        - ``Seq2SeqTransformer`` -> ``MarianMTModel`` (the inverse of ``from_hf``'s Marian
          import, residual features permuted back to Marian's sin-halves / cos-halves order):
          ``hf(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt).logits`` equals
          ``model(src, tgt, src_mask=src_mask)`` and ``hf.generate(src,
          attention_mask=src_mask, max_new_tokens=N)`` the greedy ``model.generate(src, N,
          src_mask=src_mask)``. Marian masks no source token by its id: pass the
          ``attention_mask`` (attnlab's default is ``src != pad_id``). The config takes the
          sizes (encoder and decoder layer counts may differ), the activation (relu, gelu,
          gelu_tanh -> gelu_new, silu), ``max_len``, ``scale_embedding=True``,
          ``pad_token_id = pad_id``, ``decoder_start_token_id = sos_id``, ``eos_token_id =
          eos_id`` and ``forced_eos_token_id=None``. The source and target embeddings become
          one shared matrix when the head is tied and they are equal with one vocabulary size,
          else separate (``share_encoder_decoder_embeddings=False``, ``decoder_vocab_size``);
          an untied head gives ``tie_word_embeddings=False``. Needs ``norm_first=False`` (Marian
          is post-LN) and ``positional="sinusoidal"``.

    Args:
        model: the ``CausalLM`` or ``Seq2SeqTransformer`` to export.
        bos_token_id: CausalLM only: written to the exported config (and its generation
            config); attnlab tokenizers use sos 1. A Seq2SeqTransformer carries its own
            ``sos_id``, ``eos_id`` and ``pad_id``.
        eos_token_id: CausalLM only, likewise (attnlab tokenizers: 2).
        pad_token_id: CausalLM only, likewise (attnlab tokenizers: 0).
        qkv_bias_as: CausalLM only: ``None``, q/k/v biases alone as Llama's unless only Qwen2
            holds them (beside a window); ``"qwen2"`` for Qwen2's own tokenizer (``llama_config``).

    Returns:
        The ``transformers`` model (above) with the same logits, in the same train/eval mode.

    Raises:
        ValueError: naming the setting the Hugging Face model cannot represent, for another
            model type, or for a model with int8 layers (``attnlab.nn.quantize``).

    Examples:
        >>> from attnlab.models import CausalLM, Seq2SeqTransformer
        >>> hf = to_hf(CausalLM(100, model_dim=32, num_heads=4, num_layers=2))
        >>> mt = to_hf(Seq2SeqTransformer(40, 50, model_dim=16, num_heads=2))
        >>> type(hf).__name__, type(mt).__name__
        ('GPT2LMHeadModel', 'MarianMTModel')
    """
    from ..models import Seq2SeqTransformer

    _refuse_int8(model)
    ids = dict(bos_token_id=bos_token_id, eos_token_id=eos_token_id, pad_token_id=pad_token_id)
    if isinstance(model, Seq2SeqTransformer):
        _refuse_gpt2_ids(**ids)
        return seq2seq_to_marian(model)
    return _causal_lm_to_hf(model, qkv_bias_as=qkv_bias_as, **ids)


def _refuse_int8(model: nn.Module) -> None:
    """A ValueError for a model with int8 layers (``attnlab.nn.quantize``): their weights are
    packed int8, not the float tensors a Hugging Face checkpoint holds."""
    from ..nn.quantize import int8_layers

    int8 = int8_layers(model)
    if int8:
        raise ValueError(f"to_hf: {len(int8)} linear layers of this model hold int8 weights "
                         f"(attnlab.nn.quantize; {int8[0]}, ...): export the float model "
                         f"it was made from")


def _causal_lm_to_hf(model: nn.Module, *, qkv_bias_as: str | None, **ids: int | None):
    """A Llama-family block (RoPE with RMSNorm or a gated network) to its family, else GPT-2."""
    from ..models import CausalLM

    if not isinstance(model, CausalLM):
        raise ValueError(f"to_hf exports a CausalLM or a Seq2SeqTransformer, "
                         f"got {type(model).__name__}")
    c = model.config
    if c.positional == "rope" and (c.norm == "rms" or c.ff != "mlp"):
        from .llama import llama_family_of

        return llama_family_of(model, qkv_bias_as=qkv_bias_as, **ids).train(model.training)
    return _causal_lm_to_gpt2(model, **ids)


def _refuse_gpt2_ids(**ids: int | None) -> None:
    """A Seq2SeqTransformer exports its own ids: refuse the CausalLM-only arguments by name."""
    given = [f"{k}={v!r}" for k, v in ids.items() if v is not None]
    if given:
        raise ValueError(f"to_hf: {', '.join(given)} is for a CausalLM; a "
                         f"Seq2SeqTransformer exports its own pad_id, sos_id and eos_id")


def _causal_lm_to_gpt2(model: nn.Module, **ids: int | None):
    """The ``GPT2LMHeadModel`` equivalent to a ``CausalLM`` (see ``to_hf``)."""
    _check_gpt2_exportable(model.config)  # before the import: a refusal needs no transformers
    from transformers import GPT2LMHeadModel

    hf = GPT2LMHeadModel(_gpt2_config(model.config, **ids))
    _copy_to_gpt2(model, hf)
    return hf.train(model.training)


def _check_gpt2_exportable(cfg: CausalLMConfig) -> None:
    """ValueError naming the first CausalLM setting GPT-2 cannot represent."""
    needs = {"norm_first": True, "positional": "learned", "bias": True,
             # GPT-2's block has none of the Llama family's parts (those export as that family)
             "norm": "layer", "ff": "mlp", "num_kv_heads": (None, cfg.num_heads),
             "qkv_bias": (None, cfg.bias), "qk_norm": False, "sliding_window": None,
             "head_dim": (None, cfg.model_dim // cfg.num_heads)}
    for key, value in needs.items():
        allowed = value if isinstance(value, tuple) else (value,)
        if getattr(cfg, key) not in allowed:
            raise ValueError(f"to_hf: GPT-2 needs {key}={allowed[-1]!r}, this CausalLM has "
                             f"{key}={getattr(cfg, key)!r}")
    if cfg.activation not in _ACT_TO_HF:
        raise ValueError(f"to_hf: activation {cfg.activation!r} has no GPT-2 equivalent; "
                         f"supported: {', '.join(_ACT_TO_HF)}")


def _gpt2_config(cfg: CausalLMConfig, *, bos_token_id: int | None, eos_token_id: int | None,
                 pad_token_id: int | None):
    """The ``GPT2Config`` of a CausalLM's settings."""
    from transformers import GPT2Config

    return GPT2Config(
        vocab_size=cfg.vocab_size, n_positions=cfg.max_len, n_embd=cfg.model_dim,
        n_layer=cfg.num_layers, n_head=cfg.num_heads, n_inner=cfg.dim_feedforward,
        activation_function=_ACT_TO_HF[cfg.activation], resid_pdrop=cfg.dropout,
        embd_pdrop=cfg.dropout, attn_pdrop=cfg.attention_dropout,
        layer_norm_epsilon=cfg.layer_norm_eps, tie_word_embeddings=cfg.tie_weights,
        bos_token_id=bos_token_id, eos_token_id=eos_token_id, pad_token_id=pad_token_id)


@torch.no_grad()
def _copy_to_gpt2(model: nn.Module, hf) -> None:
    """Copy a CausalLM's weights into a GPT2LMHeadModel of the same sizes (the inverse of
    ``_gpt2_to_causal_lm``'s walk: Conv1D weights are (in, out), Q/K/V stacked in ``c_attn``)."""
    t = hf.transformer
    _copy(t.wte.weight, model.token_embedding.weight)
    _copy(t.wpe.weight, model.positional_encoding.embedding.weight)
    for ours, theirs in zip(model.decoder.layers, t.h):
        wq, wk, wv, bq, bk, bv = ours.self_attn.get_qkv()
        _copy(theirs.attn.c_attn.weight, torch.cat([wq, wk, wv], 0).T)  # (D, 3D)
        _copy(theirs.attn.c_attn.bias, torch.cat([bq, bk, bv]))
        _copy(theirs.attn.c_proj.weight, ours.self_attn.o_proj.weight.T)
        _copy(theirs.attn.c_proj.bias, ours.self_attn.o_proj.bias)
        _copy(theirs.mlp.c_fc.weight, ours.linear_net[0].weight.T)
        _copy(theirs.mlp.c_fc.bias, ours.linear_net[0].bias)
        _copy(theirs.mlp.c_proj.weight, ours.linear_net[3].weight.T)
        _copy(theirs.mlp.c_proj.bias, ours.linear_net[3].bias)
        _copy_norm(theirs.ln_1, ours.norm1)
        _copy_norm(theirs.ln_2, ours.norm2)
    _copy_norm(t.ln_f, model.decoder.norm)
    if not model.config["tie_weights"]:
        _copy(hf.lm_head.weight, model.lm_head.weight)


# ---- BERT family ----------------------------------------------------------------------------
def _bert_family(hf, model_type: str) -> nn.Module:
    """The ``BertEncoder`` of a loaded BERT-family model: its tensors by name and its config,
    read as a checkpoint file's are (``bert_weights.bert_encoder_of``: one set of checks)."""
    from .bert_weights import bert_encoder_of

    model, missing, mismatched, unexpected = bert_encoder_of(hf.state_dict(), model_type,
                                                             hf.config.to_dict())
    if model is None:
        wrong = missing + [f"{name} {theirs} (expected {ours})" for name, theirs, ours in mismatched]
        wrong += [f"{name} (not in its config)" for name in unexpected]
        raise ValueError(f"{model_type}: {type(hf).__name__} lacks, reshapes or adds "
                         f"{', '.join(wrong[:3])}")
    return model


# model_type -> (the class from_hf converts, its converter) for models with an LM head
_WITH_HEAD = {"gpt2": ("GPT2LMHeadModel", _gpt2_to_causal_lm),
              "marian": ("MarianMTModel", marian_to_seq2seq),
              **{t: (cls, _llama_family) for t, cls in LLAMA_CLASSES.items()}}
_RELEASED = ("gpt2", *LLAMA_CLASSES)  # the converters that take ``release``
