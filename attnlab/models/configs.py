"""Typed configs: one dataclass per model, the one declaration of its hyper-parameters.

Each field is an ``attnlab.settings.setting``: its default, help, range and choices; a config
checks its fields against them when it is built (``ModelConfig.__post_init__``), so a config
that exists is in range. ``Model(cfg)`` builds the model from it, reading its fields,
``model.config`` is that object, the task's ``attnlab train`` flags, defaults, help and checks
are generated (``attnlab.settings``), and ``config.yaml`` stores it as plain keys (``as_dict``;
``from_dict`` reads them back; a missing key takes the field's default). A field with
``flag=False`` is derived or read from the data (vocabulary sizes, special ids) and has no
flag. Derived values are set in ``__post_init__`` (the feed-forward width, when not given).

This module imports no torch: the CLI builds every parser from these fields at start-up.

Examples:
    >>> cfg = CausalLMConfig(vocab_size=100, model_dim=32)
    >>> cfg.dim_feedforward, cfg["positional"]
    (128, 'learned')
    >>> CausalLMConfig.from_dict({"vocab_size": 100, "data": "notes.txt"}).as_dict()["model_dim"]
    256
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from ..activation_names import ACTIVATIONS, FEED_FORWARDS, NORMS
from ..positional_names import ROPE_SCALINGS, positional_names
from ..settings import check_argument, setting

__all__ = ["ModelConfig", "CausalLMConfig", "lm_parts_broken", "SequenceClassifierConfig",
           "Seq2SeqConfig",
           "ElementPredictorConfig", "BertEncoderConfig", "BertClassifierConfig", "PretrainedEncoderFields",
           "GraphNetConfig",
           "ARCH_PARTS", "POOLINGS", "POOLER_ACTIVATIONS", "HEADS", "POSITION_STYLES", "GRAPH_MODELS"]

POOLINGS = ("cls", "mean")
POOLER_ACTIVATIONS = ("tanh", "relu")  # BertClassifier's, after its pooler
# a class per sequence, a score per element, a class per token
HEADS = ("sequence", "element", "token")
POSITION_STYLES = ("absolute", "roberta")
GRAPH_MODELS = ("gat", "mean", "mlp")  # graph attention; mean over neighbours; edges ignored

C = TypeVar("C", bound="ModelConfig")

# CausalLMConfig's ``arch``: the parts each architecture sets (the other parts stay free:
# --num-kv-heads, --rope-theta, --qk-norm, ... combine with either)
ARCH_PARTS: dict[str, dict[str, Any]] = {
    "gpt2": {"positional": "learned", "norm": "layer", "ff": "mlp", "bias": True},
    "llama": {"positional": "rope", "norm": "rms", "ff": "swiglu", "bias": False},
}


class ModelConfig:
    """What every model config shares: its fields checked against their declarations when it
    is built (so a config that exists is in range), read like a mapping (``cfg["model_dim"]``,
    ``dict(cfg)``, as ``model.config`` was read when it was a dict), and to and from plain
    keys.

    Examples:
        >>> CausalLMConfig(vocab_size=100, model_dim=0)
        Traceback (most recent call last):
        ...
        ValueError: model_dim must be a positive integer, got 0
    """

    def __post_init__(self) -> None:
        """Each field against its ``setting`` declaration (range, type, choices): a
        ``ValueError`` names the field, as the flag's check names the flag."""
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            setattr(self, f.name, check_argument(type(self), f.name, getattr(self, f.name)))

    @classmethod
    def of_arguments(cls: type[C], model: str, args: tuple, fields: Mapping[str, Any],
                     positional: tuple[str, ...]) -> C:
        """The config a model's constructor was handed: ``Model(config)`` gives ``config``
        itself; the keyword form ``Model(*args, **fields)`` (``args`` the fields named in
        ``positional``, in order) builds the config once from them. A name that is no field
        is a ``TypeError``, as a wrong keyword argument is.

        Examples:
            >>> cfg = CausalLMConfig(vocab_size=50)
            >>> CausalLMConfig.of_arguments("CausalLM", (cfg,), {}, ("vocab_size",)) is cfg
            True
            >>> CausalLMConfig.of_arguments("CausalLM", (50,), {"width": 8}, ("vocab_size",))
            Traceback (most recent call last):
            ...
            TypeError: CausalLM() got an unexpected keyword argument 'width'
        """
        if len(args) == 1 and isinstance(args[0], cls) and not fields:
            return args[0]
        if any(isinstance(a, ModelConfig) for a in args) or len(args) > len(positional):
            raise TypeError(f"{model}() takes a {cls.__name__} alone, or up to "
                            f"{len(positional)} positional arguments ({', '.join(positional)}) "
                            f"and keyword arguments, got {len(args)} positional and "
                            f"{len(fields)} keyword")
        named = dict(zip(positional, args))
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        for name in fields:
            if name in named:
                raise TypeError(f"{model}() got multiple values for argument {name!r}")
            if name not in names:
                raise TypeError(f"{model}() got an unexpected keyword argument {name!r}")
        return cls(**named, **fields)

    def require(self, model: str, *names: str) -> None:
        """Refuse a config whose fields ``names``, optional in the config (a task sets them
        from its data), are unset: the model ``model`` cannot be built without them."""
        for name in names:
            if getattr(self, name) is None:
                raise ValueError(f"{name} must be set to build a {model}, got None")

    def keys(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self)]

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys():
            raise KeyError(key)
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return key in self.keys()

    def as_dict(self) -> dict[str, Any]:
        """The fields as plain keys and values (what ``config.yaml`` holds)."""
        return {name: getattr(self, name) for name in self.keys()}

    @classmethod
    def from_dict(cls: type[C], values: Mapping[str, Any], **overrides: Any) -> C:
        """The config whose fields are the keys of ``values`` that name one (other keys, a
        task's own, are ignored; missing ones take their defaults), then ``overrides``."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{**{k: v for k, v in values.items() if k in names}, **overrides})


@dataclass
class CausalLMConfig(ModelConfig):
    """``attnlab.models.CausalLM``: a GPT-style decoder-only language model."""

    vocab_size: int = setting(None, help="token ids V: for a text file, the vocabulary's cap "
                                         "(char, word) or size (bpe); else the corpus's",
                              low=1, optional=True, metavar="N")
    model_dim: int = setting(256, help="model width D", low=1)
    num_heads: int = setting(4, help="attention heads H (must divide D)", low=1)
    num_layers: int = setting(4, help="Transformer blocks L", low=1)
    # None (built from Python): 4·D, GPT-2's; each task's defaults give a fixed width (--help)
    dim_feedforward: int = setting(None, help="feed-forward width",
                                   low=1, optional=True)
    max_len: int = setting(1024, help="longest sequence (positions 0..max_len-1)", low=1,
                           flag=False)
    dropout: float = setting(0.0, help="dropout on the embeddings and in every block", low=0,
                             below=1)
    norm_first: bool = setting(True, help="pre-LN blocks and a final LayerNorm (GPT-2)")
    tie_weights: bool = setting(True, help="share the token embedding with the output layer "
                                           "(--no-tie-weights: a separate output matrix)")
    positional: str = setting("learned", help="position encoding",
                              choices=positional_names())
    activation: str = setting("gelu", help="feed-forward activation (gelu_tanh: GPT-2's)",
                              choices=ACTIVATIONS)
    layer_norm_eps: float = setting(1e-5, help="LayerNorm epsilon", low=0, above=True)
    bias: bool = setting(True, help="biases in the linear layers and LayerNorms "
                                    "(--no-bias: none, nanoGPT's recipe)")
    attention_dropout: float = setting(0.0, help="dropout on the attention weights", low=0, below=1,
                                       absent=0.0)
    # None: --dropout's value (the course's block; what a run without the key reads)
    ff_dropout: float = setting(None, help="dropout inside each feed-forward network, after its "
                                "first layer (GPT-2's block has none there; the course's has "
                                "--dropout's)", low=0, below=1, optional=True, absent=None)

    # The Llama family's parts (docs/language_model.md, "Llama-family parts"); each default is
    # GPT-2's block, what a run made before these settings existed trained with (``absent``)
    arch: str = setting(None, help="a block's parts at once: gpt2 (--positional learned, --norm "
                                    "layer, --ff mlp, biases) or llama (--positional rope, "
                                    "--norm rms, --ff swiglu, --no-bias); default: the part "
                                    "flags as given", choices=tuple(ARCH_PARTS), optional=True,
                        absent=None)
    norm: str = setting("layer", help="the blocks' norms: LayerNorm, or RMSNorm (Llama's)",
                        choices=NORMS, absent="layer")
    ff: str = setting("mlp", help="feed-forward network: two layers with --activation (GPT-2), "
                                  "or gated: swiglu (Llama's), geglu", choices=FEED_FORWARDS,
                      absent="mlp")
    num_kv_heads: int = setting(None, help="key/value heads (grouped-query attention; 1: "
                                           "multi-query; default --num-heads); must divide "
                                           "--num-heads", low=1, optional=True, absent=None)
    head_dim: int = setting(None, help="each attention head's width (default --model-dim / "
                                       "--num-heads; Qwen3 and Gemma declare their own); the "
                                       "queries are --num-heads x this wide", low=1,
                            optional=True, absent=None)
    qkv_bias: bool = setting(None, help="biases on the query/key/value projection (default: "
                                        "--bias's; --no-bias --qkv-bias is Qwen2's)",
                             optional=True, absent=None)
    qk_norm: bool = setting(False, help="RMSNorm of each head's queries and keys (Qwen3's)",
                            absent=False)
    sliding_window: int = setting(None, help="each token attends to the last W tokens only "
                                             "(Mistral's; default: all)", low=1,
                                  optional=True, metavar="W", absent=None)
    rope_theta: float = setting(10000.0, help="RoPE's frequency base θ (Llama 3: 500000; "
                                              "--positional rope)", low=0, above=True,
                                absent=10000.0)
    rope_scaling: str = setting("none", help="RoPE's frequency scaling (--positional rope)",
                                choices=ROPE_SCALINGS, absent="none")
    rope_factor: float = setting(1.0, help="--rope-scaling's factor (linear, llama3)", low=1,
                                 absent=1.0)
    rope_low_freq_factor: float = setting(1.0, help="llama3 scaling's low_freq_factor", low=0,
                                          above=True, absent=1.0)
    rope_high_freq_factor: float = setting(4.0, help="llama3 scaling's high_freq_factor",
                                           low=0, above=True, absent=4.0)
    rope_original_max_len: int = setting(8192, help="llama3 scaling's original context "
                                                    "(original_max_position_embeddings)",
                                         low=1, absent=8192)
    # the fields the caller named (``_noting_given``); not a field itself
    _given: ClassVar[frozenset[str]] = frozenset()

    def __post_init__(self) -> None:
        """``arch`` sets each of its parts that was not given (as ``--arch`` does); a part
        given with another value is refused by ``lm_parts_broken``.

        Examples:
            >>> cfg = CausalLMConfig(vocab_size=50, arch="llama", num_kv_heads=2)
            >>> cfg.positional, cfg.norm, cfg.ff, cfg.bias
            ('rope', 'rms', 'swiglu', False)
            >>> CausalLMConfig(vocab_size=50, arch="llama", norm="layer")
            Traceback (most recent call last):
            ...
            ValueError: norm layer disagrees with arch llama, which sets norm rms
        """
        for key, value in ARCH_PARTS.get(self.arch, {}).items():
            if key not in self._given:
                setattr(self, key, value)
        super().__post_init__()
        self.dim_feedforward = self.dim_feedforward or 4 * self.model_dim
        if broken := lm_parts_broken(dataclasses.asdict(self)):
            raise ValueError(broken)



def _noting_given(init):
    """``CausalLMConfig``'s generated ``__init__``, first noting which fields the caller gave
    (``_given``): a default and the same value given by hand differ for ``arch``, which fills
    only the parts left out."""
    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        self._given = frozenset(kwargs) | {f.name for f in dataclasses.fields(self)[:len(args)]}
        init(self, *args, **kwargs)
    return __init__


CausalLMConfig.__init__ = _noting_given(CausalLMConfig.__init__)  # type: ignore[method-assign]

# the rotary settings beside --positional, with the values that leave RoPE as it was
_ROPE_DEFAULTS = {"rope_theta": 10000.0, "rope_scaling": "none", "rope_factor": 1.0,
                  "rope_low_freq_factor": 1.0, "rope_high_freq_factor": 4.0,
                  "rope_original_max_len": 8192}
_LLAMA3_ONLY = ("rope_low_freq_factor", "rope_high_freq_factor", "rope_original_max_len")


def lm_parts_broken(values: Mapping[str, Any], name=lambda key: key) -> str | None:
    """The rules between a ``CausalLM``'s settings (``values``, by field name), the message
    saying the first one broken, each setting shown as ``name(key)`` (``settings.flag`` for
    ``attnlab train``'s flags; the field itself for a config), or None. ``CausalLMConfig``
    (and so ``attnlab.load``) and ``attnlab train lm`` check these one rules: the parts an
    ``arch`` sets are its own; the key/value heads divide the heads; RoPE's settings are for --positional rope, whose
    head width (``head_dim``, else model_dim / num_heads) is even; a scaling's factors are for
    that scaling.

    Examples:
        >>> lm_parts_broken({"num_heads": 4, "num_kv_heads": 3})
        'num_heads (4) must be divisible by num_kv_heads (3)'
        >>> from attnlab.settings import flag
        >>> lm_parts_broken({"positional": "learned", "rope_theta": 5e5}, flag)
        '--rope-theta is for --positional rope; this model has --positional learned'
    """
    parts = ARCH_PARTS.get(values.get("arch"), {})
    for key, value in parts.items():
        if key in values and values[key] != value:
            return (f"{name(key)} {values[key]} disagrees with {name('arch')} "
                    f"{values['arch']}, which sets {name(key)} {value}")
    heads, kv = values.get("num_heads"), values.get("num_kv_heads")
    if heads and kv and heads % kv:
        return f"{name('num_heads')} ({heads}) must be divisible by {name('num_kv_heads')} ({kv})"
    changed = [k for k, v in _ROPE_DEFAULTS.items() if k in values and values[k] != v]
    if values.get("positional", "rope") != "rope" and changed:
        return (f"{name(changed[0])} is for {name('positional')} rope; this model has "
                f"{name('positional')} {values['positional']}")
    if values.get("positional") == "rope" and values.get("head_dim"):
        if values["head_dim"] % 2:
            return (f"{name('positional')} rope rotates pairs of channels: "
                    f"{name('head_dim')} ({values['head_dim']}) must be even")
    elif values.get("positional") == "rope" and heads and values.get("model_dim"):
        width = values["model_dim"] // heads
        if width % 2:
            return (f"{name('positional')} rope rotates pairs of channels: the head width "
                    f"{name('model_dim')} / {name('num_heads')} = {width} must be even")
    scaling = values.get("rope_scaling", "none")
    if scaling == "none" and values.get("rope_factor", 1.0) != 1.0:
        return f"{name('rope_factor')} is for {name('rope_scaling')} linear or llama3"
    wrong = [k for k in _LLAMA3_ONLY if k in values and values[k] != _ROPE_DEFAULTS[k]]
    if scaling != "llama3" and wrong:
        return f"{name(wrong[0])} is for {name('rope_scaling')} llama3"
    low, high = values.get("rope_low_freq_factor", 1.0), values.get("rope_high_freq_factor", 4.0)
    if scaling == "llama3" and high <= low:
        return (f"{name('rope_high_freq_factor')} ({high}) must be above "
                f"{name('rope_low_freq_factor')} ({low})")
    return None


@dataclass
class SequenceClassifierConfig(ModelConfig):
    """``attnlab.models.SequenceClassifier``: an encoder with a per-sequence or per-element
    head, over tokens (``vocab_size``) or feature vectors (``input_dim``)."""

    num_classes: int = setting(None, help="classes C (None for the element head)", low=1,
                               optional=True, flag=False)
    vocab_size: int = setting(None, help="token inputs: vocabulary V", low=1, optional=True,
                              flag=False)
    input_dim: int = setting(None, help="feature inputs: features per element", low=1,
                             optional=True, flag=False)
    model_dim: int = setting(64, help="model width D", low=1)
    num_heads: int = setting(4, help="attention heads H (must divide D)", low=1)
    num_layers: int = setting(2, help="Transformer blocks L", low=1)
    # None (built from Python): 2·D; each task's defaults give a fixed width (--help)
    dim_feedforward: int = setting(None, help="feed-forward width", low=1,
                                   optional=True)
    dropout: float = setting(0.0, help="dropout in the blocks and the output net", low=0, below=1)
    input_dropout: float = setting(0.0, help="dropout on the input features (feature inputs)",
                                   low=0, below=1)
    norm_first: bool = setting(False, help="pre-LN blocks")
    activation: str = setting("relu", help="feed-forward activation", flag=False)
    pooling: str = setting("cls", help="sequence head: the [CLS] state or the mean of the "
                                       "real elements", choices=POOLINGS)
    positional: str = setting("sinusoidal", help="positional encoding",
                              choices=positional_names(inputs_only=True))
    head: str = setting("sequence", help="a class per sequence, a score per element, or a "
                                         "class per token",
                        choices=HEADS, flag=False)
    max_len: int = setting(512, help="tokens kept per sequence", low=1)
    pad_id: int = setting(0, help="the padding id of token inputs", low=0, flag=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.dim_feedforward = self.dim_feedforward or 2 * self.model_dim


@dataclass
class Seq2SeqConfig(ModelConfig):
    """``attnlab.models.Seq2SeqTransformer``: the paper's encoder–decoder."""

    src_vocab_size: int = setting(None, help="source vocabulary", low=1, optional=True,
                                  flag=False)
    tgt_vocab_size: int = setting(None, help="target vocabulary", low=1, optional=True,
                                  flag=False)
    model_dim: int = setting(64, help="model width D", low=1)
    num_heads: int = setting(4, help="attention heads H (must divide D)", low=1)
    num_layers: int = setting(2, help="encoder and decoder layers (each)", low=1)
    dim_feedforward: int = setting(128, help="feed-forward width", low=1)
    dropout: float = setting(0.0, help="dropout on embeddings and every sub-layer", low=0, below=1)
    num_encoder_layers: int = setting(None, help="encoder layers (default --num-layers)", low=1,
                                      optional=True)
    num_decoder_layers: int = setting(None, help="decoder layers (default --num-layers)", low=1,
                                      optional=True)
    norm_first: bool = setting(False, help="pre-LN blocks")
    activation: str = setting("relu", help="feed-forward activation", flag=False)
    max_len: int = setting(512, help="longest source or target", low=1, flag=False)
    positional: str = setting("sinusoidal", help="positional encoding of both halves",
                              choices=positional_names(inputs_only=True, with_none=False))
    tie_embeddings: bool = setting(True, help="share the target embedding with the output layer")
    final_logits_bias: bool = setting(False, help="a fixed (untrained) bias added to the logits "
                                      "(Marian's final_logits_bias)", flag=False)
    pad_id: int = setting(0, help="padding id", low=0, flag=False)
    sos_id: int = setting(1, help="start-of-sequence id", low=0, flag=False)
    eos_id: int = setting(2, help="end-of-sequence id", low=0, flag=False)


@dataclass
class ElementPredictorConfig(ModelConfig):
    """``attnlab.models.ElementPredictor``: the course's per-element predictor (and
    ``attnlab.training.TransformerPredictor``, which has its state dict)."""

    input_dim: int = setting(None, help="input features (symbols)", low=1, optional=True,
                             flag=False)
    model_dim: int = setting(32, help="model width D", low=1)
    num_classes: int = setting(None, help="classes per position", low=1, optional=True,
                               flag=False)
    num_heads: int = setting(1, help="attention heads H (must divide D)", low=1)
    num_layers: int = setting(1, help="encoder blocks L", low=1)
    dropout: float = setting(0.0, help="dropout in the blocks and the output net", low=0, below=1)
    input_dropout: float = setting(0.0, help="dropout on the one-hot inputs", low=0, below=1)
    # None (built from Python): 2·D; each task's defaults give a fixed width (--help)
    dim_feedforward: int = setting(None, help="feed-forward width", low=1,
                                   optional=True)
    norm_first: bool = setting(False, help="pre-LN blocks")
    max_len: int = setting(5000, help="longest sequence", low=1, flag=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.dim_feedforward = self.dim_feedforward or 2 * self.model_dim


@dataclass
class BertEncoderConfig(ModelConfig):
    """``attnlab.models.BertEncoder`` (BERT, RoBERTa, DistilBERT; built by interop)."""

    vocab_size: int = setting(None, help="token ids V", low=1, optional=True, flag=False)
    model_dim: int = setting(768, help="model width D (hidden_size)", low=1)
    num_heads: int = setting(12, help="attention heads", low=1)
    num_layers: int = setting(12, help="encoder blocks", low=1)
    dim_feedforward: int = setting(3072, help="feed-forward width (intermediate_size)", low=1)
    max_len: int = setting(512, help="position embeddings", low=1)
    type_vocab_size: int = setting(2, help="token types (0: none)", low=0)
    activation: str = setting("gelu", help="feed-forward activation")
    layer_norm_eps: float = setting(1e-12, help="LayerNorm epsilon", low=0, above=True)
    dropout: float = setting(0.0, help="dropout on embeddings and sub-layers", low=0, below=1)
    attention_dropout: float = setting(0.0, help="dropout on attention weights", low=0, below=1)
    pad_token_id: int = setting(0, help="padding id", low=0)
    position_style: str = setting("absolute", help="how positions count",
                                  choices=POSITION_STYLES)
    pooler: bool = setting(False, help="BERT's pooler")


@dataclass
class PretrainedEncoderFields:
    """The fields of a pretrained BERT-family encoder that attnlab's own encoders lack, read
    from its checkpoint (``flag=False``: ``attnlab train classify --init DIR`` sets them, and a
    run's config.yaml records them). ``BertClassifierConfig`` and classify's settings both
    have them."""

    max_positions: int = setting(512, help="position embeddings", low=1, flag=False)
    type_vocab_size: int = setting(2, help="token types (0: none)", low=0, flag=False)
    layer_norm_eps: float = setting(1e-12, help="LayerNorm epsilon", low=0, above=True,
                                    flag=False)
    position_style: str = setting("absolute", help="how positions count",
                                  choices=POSITION_STYLES, flag=False)


@dataclass
class BertClassifierConfig(ModelConfig, PretrainedEncoderFields):
    """``attnlab.models.BertClassifier``: a BERT-family encoder (``BertEncoderConfig``'s
    fields; its position table is ``max_positions``) and a new per-sequence head, pooled by
    BERT's pooler on the first real token (``pooling="cls"``) or by the mean of the real
    tokens (``"mean"``)."""

    num_classes: int = setting(None, help="classes C", low=1, optional=True, flag=False)
    vocab_size: int = setting(None, help="token ids V", low=1, optional=True, flag=False)
    model_dim: int = setting(768, help="model width D (hidden_size)", low=1)
    num_heads: int = setting(12, help="attention heads", low=1)
    num_layers: int = setting(12, help="encoder blocks", low=1)
    dim_feedforward: int = setting(3072, help="feed-forward width (intermediate_size)", low=1)
    activation: str = setting("gelu", help="feed-forward activation", choices=ACTIVATIONS)
    dropout: float = setting(0.1, help="dropout on embeddings, sub-layers and the head", low=0,
                             below=1)
    attention_dropout: float = setting(0.1, help="dropout on attention weights", low=0, below=1)
    pad_id: int = setting(0, help="padding id", low=0)
    pooling: str = setting("cls", help="BERT's pooler on [CLS], or the mean of the real tokens",
                           choices=POOLINGS)
    # DistilBERT's head has a D x D layer and ReLU where BERT's pooler has tanh
    pooler_activation: str = setting("tanh", help="after the pooler: tanh (BERT's pooler, "
                                     "RoBERTa's head) or relu (DistilBERT's pre_classifier)",
                                     choices=POOLER_ACTIVATIONS)

    @classmethod
    def of_encoder(cls, encoder: "BertEncoderConfig", *, num_classes: int,
                   dropout: float | None = None) -> "BertClassifierConfig":
        """The classifier over the encoder ``encoder`` describes: pooled by its pooler where
        it has one, else by the mean; ``dropout``, when given, on the hidden states and the
        attention weights both (default: the encoder's two).

        Examples:
            >>> enc = BertEncoderConfig(vocab_size=50, model_dim=16, num_heads=2, num_layers=1,
            ...                         dim_feedforward=32, max_len=40)
            >>> c = BertClassifierConfig.of_encoder(enc, num_classes=3)
            >>> c.max_positions, c.pooling
            (40, 'mean')
        """
        hidden = encoder.dropout if dropout is None else dropout
        attention = encoder.attention_dropout if dropout is None else dropout
        return cls(num_classes=num_classes, vocab_size=encoder.vocab_size,
                   model_dim=encoder.model_dim, num_heads=encoder.num_heads,
                   num_layers=encoder.num_layers, dim_feedforward=encoder.dim_feedforward,
                   max_positions=encoder.max_len, type_vocab_size=encoder.type_vocab_size,
                   activation=encoder.activation, layer_norm_eps=encoder.layer_norm_eps,
                   dropout=hidden, attention_dropout=attention, pad_id=encoder.pad_token_id,
                   position_style=encoder.position_style,
                   pooling="cls" if encoder.pooler else "mean")

    def encoder_config(self) -> "BertEncoderConfig":
        """The ``BertEncoderConfig`` of the encoder (with a pooler for ``pooling="cls"``)."""
        return BertEncoderConfig(
            vocab_size=self.vocab_size, model_dim=self.model_dim, num_heads=self.num_heads,
            num_layers=self.num_layers, dim_feedforward=self.dim_feedforward,
            max_len=self.max_positions, type_vocab_size=self.type_vocab_size,
            activation=self.activation, layer_norm_eps=self.layer_norm_eps,
            dropout=self.dropout, attention_dropout=self.attention_dropout,
            pad_token_id=self.pad_id, position_style=self.position_style,
            pooler=self.pooling == "cls")

    @property
    def max_tokens(self) -> int:
        """The longest sequence the position table holds: ``max_positions``, less the
        ``pad_id + 1`` positions RoBERTa's counting skips."""
        if self.position_style == "roberta":
            return self.max_positions - self.pad_id - 1
        return self.max_positions


@dataclass
class JetTaggerConfig(ModelConfig):
    """``attnlab.models.JetTagger``: a set Transformer over a jet's constituents:
    the course's "embed → MHA → FFN → MHA → FFN → mean pool", with ParT's pairwise bias on the
    attention logits (on by default: it is what beats the physics likelihood; ``pair_bias=False``
    is the course's model exactly) and ParT's class token (an option). Its
    input is the constituents' four-momenta; the 7 features per constituent are computed."""

    num_classes: int = setting(2, help="classes C (QCD, top)", low=2, flag=False)
    model_dim: int = setting(64, help="model width D", low=1)
    num_heads: int = setting(4, help="attention heads H (must divide D)", low=1)
    num_layers: int = setting(2, help="encoder blocks L over the constituents", low=1)
    # None (built from Python): 2·D; each task's defaults give a fixed width (--help)
    dim_feedforward: int = setting(None, help="feed-forward width", low=1,
                                   optional=True)
    dropout: float = setting(0.0, help="dropout in the blocks and the output net", low=0,
                             below=1)
    norm_first: bool = setting(False, help="pre-LN blocks")
    activation: str = setting("relu", help="feed-forward activation", flag=False)
    class_token: bool = setting(False, help="pool a learned class token that attends to the "
                                            "constituents in extra blocks (ParT), not the mean")
    class_layers: int = setting(2, help="class-attention blocks, with --class-token", low=1)
    pair_bias: bool = setting(True, help="add a bias from each constituent pair's (ln kT, "
                                         "ln z, ln ΔR, ln m²) to the attention logits (ParT); "
                                         "--no-pair-bias: the course's plain set classifier")
    pair_dim: int = setting(16, help="hidden width of the per-pair net, with --pair-bias",
                            low=1)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.dim_feedforward = self.dim_feedforward or 2 * self.model_dim


@dataclass
class GraphNetConfig(ModelConfig):
    """``attnlab.models.GraphNet``: a node classifier over one graph: graph
    attention layers, mean-neighbour layers (no attention) or an MLP that ignores the edges."""

    in_dim: int = setting(None, help="node features F", low=1, optional=True, flag=False)
    num_classes: int = setting(None, help="node classes C", low=2, optional=True, flag=False)
    kind: str = setting("gat", choices=GRAPH_MODELS,
                        help="gat: graph attention; mean: the mean of the neighbourhood (no "
                             "attention); mlp: each node alone (the edges ignored)")
    model_dim: int = setting(8, help="hidden features per head", low=1)
    num_heads: int = setting(8, help="attention heads of the hidden layers (gat)", low=1)
    num_layers: int = setting(2, help="layers, the output layer included", low=1)
    dropout: float = setting(0.6, help="dropout on the features and the attention weights",
                             low=0, below=1)
