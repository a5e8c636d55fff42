"""A ``BertClassifier`` as Hugging Face's ``*ForSequenceClassification`` (``classifier_to_hf``),
and a ``BertTagger`` as its ``*ForTokenClassification`` (``tagger_to_hf``: the encoder, then
one linear layer per token called ``classifier`` in every family).

Shapes: D model width, C classes.

The head maps one to one where the classifier pools the first token through a D x D layer
(``pooling="cls"``: BERT's pooler, or a new layer where the checkpoint had none), the
activation after it being the family's (``pooler_activation``):

    attnlab                  BertFor...          RobertaFor... (XLM-R,      DistilBertFor...
                                                 CamemBERT: the same)
    bert.pooler (D x D)      bert.pooler.dense   classifier.dense           pre_classifier
      then                   tanh                tanh                       ReLU
    classifier (D x C)       classifier          classifier.out_proj        classifier

(RoBERTa's head applies dropout before its dense layer too: the same function in eval mode.)
Every Hugging Face head reads the first token's state, so a classifier pooled by the mean of
its tokens (``pooling="mean"``) has no Hugging Face class: ``classifier_to_hf`` refuses it in
one line, as it refuses a head whose activation is not its family's.

The encoder's tensors are named by ``bert_weights``' table, read backwards
(``hf_tensors_of``): attnlab's stacked Q/K/V become the three projections again, ``norm1`` the
attention's LayerNorm and ``norm2`` the block's.
"""
from __future__ import annotations

import torch
from torch import nn

from .bert_weights import hf_tensors_of
from .weights import ACT_TO_HF
from .weights import copy_linear as _copy_linear

__all__ = ["classifier_to_hf", "tagger_to_hf", "check_exportable", "EXPORTED_TYPES"]

EXPORTED_TYPES = ("bert", "roberta", "xlm-roberta", "camembert", "distilbert")
# model_type -> the activation its *ForSequenceClassification head applies after its dense layer
_HEAD_ACTIVATION = {**dict.fromkeys(EXPORTED_TYPES, "tanh"), "distilbert": "relu"}
_DISTILBERT_EPS = 1e-12  # DistilBERT's LayerNorms: fixed, not in its config


def classifier_to_hf(model: nn.Module, *, model_type: str, labels: list[str],
                     specials: dict[str, int] | None = None):
    """The ``transformers`` ``*ForSequenceClassification`` equivalent to ``model``.

    Args:
        model: a ``BertClassifier`` pooled by its first token (``pooling="cls"``).
        model_type: the Hugging Face family to write: ``bert``, ``roberta``, ``xlm-roberta``,
            ``camembert`` or ``distilbert`` (a run records its source's).
        labels: the class names, in the order of the logits: ``id2label`` and ``label2id``.
        specials: role -> id of the tokeniser's special tokens (``pad``, ``bos``, ``eos``),
            written to the config; ``pad`` defaults to the model's ``pad_id``.

    Returns:
        The Hugging Face model (``hf(input_ids, attention_mask=..., token_type_ids=...).logits``
        equals ``model(input_ids, attention_mask, token_type_ids)`` for right-padded batches),
        in ``model``'s train/eval mode.

    Raises:
        ValueError: a classifier pooled by the mean, a ``model_type`` not in
            ``EXPORTED_TYPES``, a position style, token types, LayerNorm epsilon, activation
            or head activation that family does not have, or as many labels as the model has
            no classes.

    Examples:
        >>> from attnlab.models import BertClassifier
        >>> ours = BertClassifier(2, vocab_size=40, model_dim=16, num_heads=2, num_layers=1,
        ...                       dim_feedforward=32)
        >>> type(classifier_to_hf(ours, model_type="bert", labels=["neg", "pos"])).__name__
        'BertForSequenceClassification'
    """
    check_exportable(model.config, model_type, labels)
    hf = _with_encoder(model, "AutoModelForSequenceClassification", model_type, labels, specials)
    with torch.no_grad():
        dense, out = _head_layers(hf, model_type)
        _copy_linear(dense, model.pooler.weight, model.pooler.bias)
        _copy_linear(out, model.classifier.weight, model.classifier.bias)
    return hf.train(model.training)


def tagger_to_hf(model: nn.Module, *, model_type: str, labels: list[str],
                 specials: dict[str, int] | None = None):
    """The ``transformers`` ``*ForTokenClassification`` equivalent to a ``BertTagger``: the
    encoder as ``classifier_to_hf`` writes it, and the per-token layer as ``classifier`` (its
    name in every family). Args, Returns and Raises as ``classifier_to_hf``'s, but that a
    tagger has no pooling and no head activation to refuse; the logits are (B, T, C).

    Examples:
        >>> from attnlab.models import BertTagger
        >>> from attnlab.models.configs import BertClassifierConfig
        >>> ours = BertTagger(BertClassifierConfig(num_classes=2, vocab_size=40, model_dim=16,
        ...                   num_heads=2, num_layers=1, dim_feedforward=32))
        >>> type(tagger_to_hf(ours, model_type="bert", labels=["B-X", "O"])).__name__
        'BertForTokenClassification'
    """
    check_exportable(model.config, model_type, labels, tokens=True)
    hf = _with_encoder(model, "AutoModelForTokenClassification", model_type, labels, specials)
    with torch.no_grad():
        _copy_linear(hf.classifier, model.classifier.weight, model.classifier.bias)
    return hf.train(model.training)


def _with_encoder(model: nn.Module, auto_class: str, model_type: str, labels: list[str],
                  specials: dict[str, int] | None):
    """A new ``transformers`` model of ``auto_class`` (a task class of the family) of
    ``model``'s shape and labels, holding ``model``'s encoder; its head is left to the
    caller."""
    import transformers
    from transformers import AutoConfig

    c, specials = model.config, specials or {}
    hf = getattr(transformers, auto_class).from_config(AutoConfig.for_model(
        model_type, **_family_config(c, model_type), pad_token_id=specials.get("pad", c.pad_id),
        bos_token_id=specials.get("bos"), eos_token_id=specials.get("eos"),
        num_labels=len(labels), id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)}))
    with torch.no_grad():
        tensors = hf_tensors_of(model.bert, model_type)
        missing, unexpected = hf.base_model.load_state_dict(tensors, strict=False)
        assert not unexpected, unexpected
        for name in missing:  # what the table has not: BERT's pooler (the caller's: a head's),
            # the index buffers transformers makes, token types where attnlab's encoder has none
            assert name.startswith(("embeddings.token_type", "pooler.", "embeddings.position_ids")), name
            if name == "embeddings.token_type_embeddings.weight":  # one type that adds nothing
                hf.base_model.get_parameter(name).zero_()
    return hf


def _head_layers(hf, model_type: str) -> tuple[nn.Linear, nn.Linear]:
    """(the dense layer on the first token, the layer of the logits) of ``hf``'s head."""
    if model_type == "bert":
        return hf.bert.pooler.dense, hf.classifier
    if model_type == "distilbert":
        return hf.pre_classifier, hf.classifier
    return hf.classifier.dense, hf.classifier.out_proj  # RoBERTa's head, XLM-R's, CamemBERT's


def _family_config(c, model_type: str) -> dict:
    """The ``config.json`` sizes of a ``model_type`` encoder of ``BertClassifierConfig`` c."""
    if model_type == "distilbert":
        return dict(vocab_size=c.vocab_size, dim=c.model_dim, n_layers=c.num_layers,
                    n_heads=c.num_heads, hidden_dim=c.dim_feedforward,
                    activation=ACT_TO_HF[c.activation], dropout=c.dropout,
                    attention_dropout=c.attention_dropout, seq_classif_dropout=c.dropout,
                    max_position_embeddings=c.max_positions, sinusoidal_pos_embds=False)
    return dict(vocab_size=c.vocab_size, hidden_size=c.model_dim,
                num_hidden_layers=c.num_layers, num_attention_heads=c.num_heads,
                intermediate_size=c.dim_feedforward, hidden_act=ACT_TO_HF[c.activation],
                hidden_dropout_prob=c.dropout, attention_probs_dropout_prob=c.attention_dropout,
                max_position_embeddings=c.max_positions,
                type_vocab_size=max(c.type_vocab_size, 1), layer_norm_eps=c.layer_norm_eps)


def check_exportable(c, model_type: str, labels: list[str], *, tokens: bool = False) -> None:
    """ValueError naming the first thing a Hugging Face classification class cannot hold
    (``tokens``: a token classification class, which reads every token: no pooling)."""
    if not tokens and c.pooling != "cls":
        raise ValueError("to_hf: this classifier pools the mean of its tokens (--pooling "
                         "mean); Hugging Face's *ForSequenceClassification heads read the first "
                         "token only, so no class gives its logits (a run with --pooling cls "
                         "exports)")
    if model_type not in EXPORTED_TYPES:
        kind = "token" if tokens else "pooled"
        raise ValueError(f"to_hf: model_type {model_type!r} has no {kind} classification "
                         f"class; exported: {', '.join(EXPORTED_TYPES)}")
    style = "roberta" if model_type in ("roberta", "xlm-roberta", "camembert") else "absolute"
    if c.position_style != style:
        raise ValueError(f"to_hf: {model_type} counts positions {style!r}, this classifier "
                         f"{c.position_style!r}")
    if not tokens and c.pooler_activation != _HEAD_ACTIVATION[model_type]:
        raise ValueError(f"to_hf: {model_type}'s classification head applies "
                         f"{_HEAD_ACTIVATION[model_type]} after its dense layer, this "
                         f"classifier {c.pooler_activation}; no class gives its logits")
    if model_type == "distilbert" and (c.type_vocab_size or c.layer_norm_eps != _DISTILBERT_EPS):
        raise ValueError(f"to_hf: distilbert has no token types and LayerNorm epsilon "
                         f"{_DISTILBERT_EPS:g}; this classifier has {c.type_vocab_size} types "
                         f"and epsilon {c.layer_norm_eps:g}")
    if c.activation not in ACT_TO_HF:
        raise ValueError(f"to_hf: activation {c.activation!r} has no Hugging Face name")
    if len(labels) != c.num_classes:
        raise ValueError(f"to_hf: {len(labels)} labels for {c.num_classes} classes")
