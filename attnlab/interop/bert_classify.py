"""A ``BertClassifier`` as Hugging Face's ``*ForSequenceClassification`` (``classifier_to_hf``).

Shapes: D model width, C classes.

The head maps one to one where the classifier pools with BERT's pooler (``pooling="cls"``):

    attnlab                      BertForSequenceClassification    RobertaForSequenceClassification
    bert.pooler (D x D, tanh)    bert.pooler.dense                classifier.dense
    classifier (D x C)           classifier                       classifier.out_proj

(RoBERTa's head applies dropout before its dense layer too: the same function in eval mode.
XLM-R and CamemBERT are RoBERTa's classes under their own names.) Every Hugging Face head reads
the first token's state, so a classifier pooled by the mean of its tokens (``pooling="mean"``,
every DistilBERT one) has no Hugging Face class: ``classifier_to_hf`` refuses it in one line.

The encoder is the inverse of ``bert_weights``' reading: attnlab's stacked Q/K/V become the
three projections again, ``norm1`` the attention's LayerNorm and ``norm2`` the block's.
"""
from __future__ import annotations

import torch
from torch import nn

from .weights import ACT_TO_HF
from .weights import copy as _copy
from .weights import copy_linear as _copy_linear
from .weights import copy_norm as _copy_norm

__all__ = ["classifier_to_hf", "EXPORTED_TYPES"]

EXPORTED_TYPES = ("bert", "roberta", "xlm-roberta", "camembert")  # those with a pooled head


def classifier_to_hf(model: nn.Module, *, model_type: str, labels: list[str],
                     specials: dict[str, int] | None = None):
    """The ``transformers`` ``*ForSequenceClassification`` equivalent to ``model``.

    Args:
        model: a ``BertClassifier`` pooled by BERT's pooler (``pooling="cls"``).
        model_type: the Hugging Face family to write: ``bert``, ``roberta``, ``xlm-roberta``
            or ``camembert`` (a run records its source's).
        labels: the class names, in the order of the logits: ``id2label`` and ``label2id``.
        specials: role -> id of the tokeniser's special tokens (``pad``, ``bos``, ``eos``),
            written to the config; ``pad`` defaults to the model's ``pad_id``.

    Returns:
        The Hugging Face model (``hf(input_ids, attention_mask=..., token_type_ids=...).logits``
        equals ``model(input_ids, attention_mask, token_type_ids)`` for right-padded batches),
        in ``model``'s train/eval mode.

    Raises:
        ValueError: a classifier pooled by the mean, a ``model_type`` not in
            ``EXPORTED_TYPES``, a position style or activation that family does not have, or
            as many labels as the model has no classes.

    Examples:
        >>> from attnlab.models import BertClassifier
        >>> ours = BertClassifier(2, vocab_size=40, model_dim=16, num_heads=2, num_layers=1,
        ...                       dim_feedforward=32)
        >>> type(classifier_to_hf(ours, model_type="bert", labels=["neg", "pos"])).__name__
        'BertForSequenceClassification'
    """
    c = model.config
    _check_exportable(c, model_type, labels)
    from transformers import AutoConfig, AutoModelForSequenceClassification

    specials = specials or {}
    roberta = model_type != "bert"
    hf_config = AutoConfig.for_model(
        model_type, vocab_size=c.vocab_size, hidden_size=c.model_dim,
        num_hidden_layers=c.num_layers, num_attention_heads=c.num_heads,
        intermediate_size=c.dim_feedforward, hidden_act=ACT_TO_HF[c.activation],
        hidden_dropout_prob=c.dropout, attention_probs_dropout_prob=c.attention_dropout,
        max_position_embeddings=c.max_positions, type_vocab_size=max(c.type_vocab_size, 1),
        layer_norm_eps=c.layer_norm_eps, pad_token_id=specials.get("pad", c.pad_id),
        bos_token_id=specials.get("bos"), eos_token_id=specials.get("eos"),
        num_labels=len(labels), id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)})
    hf = AutoModelForSequenceClassification.from_config(hf_config)
    with torch.no_grad():
        _copy_encoder(model.bert, hf.base_model)
        if roberta:
            _copy_linear(hf.classifier.dense, model.pooler.weight, model.pooler.bias)
            _copy_linear(hf.classifier.out_proj, model.classifier.weight, model.classifier.bias)
        else:
            _copy_linear(hf.bert.pooler.dense, model.pooler.weight, model.pooler.bias)
            _copy_linear(hf.classifier, model.classifier.weight, model.classifier.bias)
    return hf.train(model.training)


def _check_exportable(c, model_type: str, labels: list[str]) -> None:
    """ValueError naming the first thing a Hugging Face classification class cannot hold."""
    if c.pooling != "cls":
        raise ValueError("to_hf: this classifier pools the mean of its tokens (its encoder had "
                         "no pooler); Hugging Face's *ForSequenceClassification heads read the "
                         "first token only, so no class gives its logits")
    if model_type not in EXPORTED_TYPES:
        raise ValueError(f"to_hf: model_type {model_type!r} has no pooled classification "
                         f"class; exported: {', '.join(EXPORTED_TYPES)}")
    style = "absolute" if model_type == "bert" else "roberta"
    if c.position_style != style:
        raise ValueError(f"to_hf: {model_type} counts positions {style!r}, this classifier "
                         f"{c.position_style!r}")
    if c.activation not in ACT_TO_HF:
        raise ValueError(f"to_hf: activation {c.activation!r} has no Hugging Face name")
    if len(labels) != c.num_classes:
        raise ValueError(f"to_hf: {len(labels)} labels for {c.num_classes} classes")


def _copy_encoder(ours: nn.Module, hf) -> None:
    """``BertEncoder`` -> a Hugging Face BERT or RoBERTa base model of the same sizes."""
    emb = hf.embeddings
    _copy(emb.word_embeddings.weight, ours.word_embeddings.weight)
    _copy(emb.position_embeddings.weight, ours.position_embeddings.weight)
    if ours.token_type_embeddings is not None:
        _copy(emb.token_type_embeddings.weight, ours.token_type_embeddings.weight)
    else:  # no token types: one type whose embedding adds nothing
        emb.token_type_embeddings.weight.zero_()
    _copy_norm(emb.LayerNorm, ours.embed_norm)
    for block, layer in zip(ours.encoder.layers, hf.encoder.layer):
        wq, wk, wv, bq, bk, bv = block.self_attn.get_qkv()
        s = layer.attention.self
        for linear, w, b in ((s.query, wq, bq), (s.key, wk, bk), (s.value, wv, bv)):
            _copy_linear(linear, w, b)
        o = block.self_attn.o_proj
        _copy_linear(layer.attention.output.dense, o.weight, o.bias)
        ff1, ff2 = block.linear_net[0], block.linear_net[3]
        _copy_linear(layer.intermediate.dense, ff1.weight, ff1.bias)
        _copy_linear(layer.output.dense, ff2.weight, ff2.bias)
        _copy_norm(layer.attention.output.LayerNorm, block.norm1)
        _copy_norm(layer.output.LayerNorm, block.norm2)
