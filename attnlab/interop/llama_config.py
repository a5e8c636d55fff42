"""The Llama family's ``config.json`` <-> ``CausalLMConfig`` settings, without torch.

Llama, Qwen2, Qwen3 and Mistral checkpoints are one block with a few switches; this module
reads those switches from a ``config.json`` mapping (or ``PretrainedConfig.to_dict()``) as
attnlab's lm settings, and writes them back, so that ``--init`` (``tasks.lm.spec``), ``from_hf``
and ``to_hf`` (``llama.py``) share one declaration of the mapping:

    config.json                      attnlab setting
    hidden_size, num_hidden_layers,  model_dim, num_layers, num_heads, num_kv_heads,
    num_attention_heads,             dim_feedforward, max_len, vocab_size
    num_key_value_heads,
    intermediate_size,
    max_position_embeddings
    head_dim                         head_dim (None where it is hidden_size / heads)
    rms_norm_eps                     layer_norm_eps (RMSNorm's epsilon, also QK-norm's)
    rope_theta / rope_parameters /   rope_theta, rope_scaling (none, linear, llama3),
    rope_scaling                     rope_factor, rope_*_freq_factor, rope_original_max_len
    attention_bias, mlp_bias         bias (both equal; Qwen3 reads attention_bias alone,
                                     Mistral and Qwen2 neither, as transformers),
                                     qkv_bias (Qwen2: q/k/v only, always; Llama's
                                     attention_bias alone, its o_proj biases zero)
    (qwen3)                          qk_norm=True
    sliding_window, layer_types,     sliding_window (on every layer or none)
    use_sliding_window,
    max_window_layers (qwen)
    hidden_act silu (swish) / gelu   ff swiglu / geglu
    tie_word_embeddings              tie_weights

What attnlab cannot represent is a ``ValueError`` of one line naming the key and value: a
RoPE kind other than none, linear and llama3 (yarn, dynamic, longrope), a scaled RoPE on part
of each head (``partial_rotary_factor``, which transformers' plain RoPE ignores), a scaling without
its factors (transformers refuses it too; llama3's missing ``original_max_position_embeddings``
is ``max_position_embeddings``, as transformers 5 reads it), a sliding window on some layers
only (Ministral's ``layer_types``, Qwen's ``max_window_layers``), attention biases
without the feed-forward's in Qwen3 (``attention_bias``). Llama's ``attention_bias`` without
``mlp_bias`` is read as q/k/v biases alone (``export --hf`` writes them so) when its o_proj
biases are zero: ``zero_biases`` names those tensors, which the reader checks.
"""
from __future__ import annotations

from typing import Any

from .config_rules import heads_divide_width

__all__ = ["LLAMA_FAMILY", "LLAMA_CLASSES", "llama_family_settings", "llama_family_config",
           "zero_biases", "lacking"]

# model_type -> its transformers causal-LM class
LLAMA_CLASSES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                 "qwen3": "Qwen3ForCausalLM", "mistral": "MistralForCausalLM"}
LLAMA_FAMILY = tuple(LLAMA_CLASSES)

# transformers' defaults for keys a config.json may leave out (5.x configuration classes)
_COMMON = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": None, "hidden_act": "silu", "rms_norm_eps": 1e-6,
           "tie_word_embeddings": False, "rope_theta": 10000.0, "attention_dropout": 0.0,
           "attention_bias": False, "mlp_bias": False, "head_dim": None, "rope_scaling": None,
           "sliding_window": None, "use_sliding_window": False}
_DEFAULTS = {
    "llama": {**_COMMON, "vocab_size": 32000, "intermediate_size": 11008,
              "max_position_embeddings": 2048},
    "mistral": {**_COMMON, "vocab_size": 32000, "intermediate_size": 14336,
                "max_position_embeddings": 4096 * 32, "num_key_value_heads": 8,
                "sliding_window": 4096},
    "qwen2": {**_COMMON, "vocab_size": 151936, "intermediate_size": 22016,
              "max_position_embeddings": 32768, "num_key_value_heads": 32, "max_window_layers": 28,
              "sliding_window": 4096},
    "qwen3": {**_COMMON, "vocab_size": 151936, "intermediate_size": 22016,
              "max_position_embeddings": 32768, "head_dim": 128, "num_key_value_heads": 32,
              "max_window_layers": 28, "sliding_window": 4096},
}
_NULL_IS_NONE = ("sliding_window", "num_key_value_heads")
_GATES = {"silu": "swiglu", "gelu": "geglu"}
_ROPE_KINDS = {"default": "none", "linear": "linear", "llama3": "llama3"}


def llama_family_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The ``CausalLMConfig`` settings of a Llama-family ``config.json`` mapping (see the module
    doc); ``ValueError`` naming the key and value attnlab cannot represent.

    Examples:
        >>> s = llama_family_settings({"model_type": "qwen2", "hidden_size": 32,
        ...     "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
        ...     "intermediate_size": 64, "vocab_size": 100})
        >>> s["num_kv_heads"], s["qkv_bias"], s["bias"], s["ff"]
        (2, True, False, 'swiglu')
    """
    model_type = config.get("model_type")
    if model_type not in _DEFAULTS:
        raise ValueError(f"model_type {model_type!r} is not of the Llama family; supported: "
                         f"{', '.join(LLAMA_FAMILY)}")
    # a key set to null takes transformers' default, but for the window (null: none) and the
    # key/value heads (null: one per query head, where a key left out is the family's default)
    c = {**_DEFAULTS[model_type], **{k: v for k, v in config.items()
                                     if v is not None or k in _NULL_IS_NONE}}
    D, H = c["hidden_size"], c["num_attention_heads"]
    # a head width of its own (Qwen3's 128 whatever the width), recorded only where it is not
    # D / H, so that a checkpoint without one reads as before
    head_dim = None if c["head_dim"] == D // H and not D % H else c["head_dim"]
    if head_dim is None:  # a head_dim of its own needs no equal share of the width
        heads_divide_width(c, "hidden_size", "num_attention_heads")
    kv_heads = c["num_key_value_heads"] or H
    if H % kv_heads:  # said here, in config.json's names, not as flags the user never gave
        raise ValueError(f"num_attention_heads {H} is not divisible by num_key_value_heads "
                         f"{kv_heads}")
    act = "silu" if c["hidden_act"] == "swish" else c["hidden_act"]  # (transformers' alias)
    if act not in _GATES:
        raise ValueError(f"hidden_act {c['hidden_act']!r} has no gated feed-forward in "
                         f"attnlab; supported: {', '.join(_GATES)}, swish")
    bias, qkv_bias = _bias(model_type, c)
    window = _window(model_type, c)
    settings = {
        "model_dim": D, "num_layers": c["num_hidden_layers"], "num_heads": H,
        "num_kv_heads": kv_heads, "head_dim": head_dim,
        "dim_feedforward": c["intermediate_size"], "max_len": c["max_position_embeddings"],
        "vocab_size": c["vocab_size"], "layer_norm_eps": c["rms_norm_eps"],
        "tie_weights": bool(c["tie_word_embeddings"]), "norm_first": True,
        "positional": "rope", "norm": "rms", "ff": _GATES[act], "bias": bias,
        "qkv_bias": qkv_bias, "qk_norm": model_type == "qwen3",
        "sliding_window": window, "arch": "llama" if not bias and act == "silu"
        else None, **_rope(c)}
    return settings


def _bias(model_type: str, c: dict[str, Any]) -> tuple[bool, bool | None]:
    """(bias, qkv_bias): biases on every projection, on q/k/v alone, or none, from the keys
    the family's transformers class reads: Llama's ``attention_bias`` (q, k, v, o) and
    ``mlp_bias``, Qwen3's ``attention_bias`` (it has no feed-forward biases); Mistral has none
    and Qwen2 q/k/v biases whatever either key says, as transformers reads them. Llama's
    ``attention_bias`` alone is q/k/v biases, its o_proj biases zero (``zero_biases``, checked
    where the weights are read); Qwen3's is refused."""
    attention = bool(c["attention_bias"]) if model_type in ("llama", "qwen3") else False
    mlp = bool(c["mlp_bias"]) if model_type == "llama" else False
    if model_type == "qwen2":
        return False, True
    if attention == mlp:
        return attention, None
    if model_type == "llama" and attention:
        return False, True
    said = (f"with mlp_bias {c['mlp_bias']}" if model_type == "llama" else
            f"({model_type} has no feed-forward biases)")
    raise ValueError(f"attention_bias {c['attention_bias']} {said}: attnlab's --bias sets "
                     f"both")


def zero_biases(config: dict[str, Any]) -> list[str]:
    """The Hugging Face names of the tensors a Llama-family ``config.json`` mapping's weights
    must hold as zeros for attnlab to read them: Llama's o_proj biases where
    ``attention_bias`` comes without ``mlp_bias`` (attnlab's q/k/v biases alone have no output
    bias; ``export --hf`` writes them zero), else none.

    Examples:
        >>> zero_biases({"model_type": "llama", "attention_bias": True, "num_hidden_layers": 2})
        ['model.layers.0.self_attn.o_proj.bias', 'model.layers.1.self_attn.o_proj.bias']
        >>> zero_biases({"model_type": "llama", "attention_bias": True, "mlp_bias": True})
        []
    """
    if config.get("model_type") != "llama":
        return []
    c = {**_DEFAULTS["llama"], **{k: v for k, v in config.items() if v is not None}}
    if not c["attention_bias"] or c["mlp_bias"]:
        return []
    return [f"model.layers.{i}.self_attn.o_proj.bias" for i in range(c["num_hidden_layers"])]


def lacking(config: dict[str, Any], missing: list[str]) -> list[str]:
    """``missing``, the tensors a directory's files lack, less ``zero_biases(config)``: an
    o_proj bias that must be zero may be absent, read as zero, as ``transformers``'
    ``from_pretrained`` starts it (its ``_init_weights`` zeroes a missing Linear bias); a
    missing q, k or v bias (which it would zero too) holds values attnlab cannot know, and stays
    missing.

    Examples:
        >>> lacking({"model_type": "llama", "attention_bias": True, "num_hidden_layers": 1},
        ...         ["model.layers.0.self_attn.o_proj.bias", "model.layers.0.self_attn.q_proj.bias"])
        ['model.layers.0.self_attn.q_proj.bias']
    """
    zeros = set(zero_biases(config))
    return [name for name in missing if name not in zeros]


def _window(model_type: str, c: dict[str, Any]) -> int | None:
    """The sliding window, on every layer, or none; ``layer_types`` names the layers a window
    is on. Mistral's window is on every layer unless ``layer_types`` says otherwise (Ministral's
    config.json, which transformers reads as ``ministral``); Qwen's is there only with
    ``use_sliding_window``, on the layers from ``max_window_layers`` on, as transformers reads
    it. All layers or none is attnlab's window or none; a mix is refused."""
    if model_type == "mistral":
        window, kinds = c["sliding_window"], c.get("layer_types") or ["sliding_attention"]
    elif model_type == "llama" or not c["use_sliding_window"]:
        return None
    else:
        window = c["sliding_window"]
        first = c["max_window_layers"]
        kinds = c.get("layer_types") or [
            "sliding_attention" if i >= first else "full_attention"
            for i in range(c["num_hidden_layers"])]
    kinds = set(kinds)
    if window is None or kinds == {"sliding_attention"}:
        return window
    if kinds == {"full_attention"}:
        return None
    why = ("layer_types" if c.get("layer_types") else
           f"max_window_layers {c['max_window_layers']} of "
           f"{c['num_hidden_layers']} layers")
    raise ValueError(f"{why} with sliding_window {window}: a window on some layers only "
                     f"has no attnlab equivalent")


def _rope(c: dict[str, Any]) -> dict[str, Any]:
    """The rope_* settings of ``rope_parameters`` (transformers 5) or ``rope_theta`` and
    ``rope_scaling`` (earlier), in transformers 5's order (``convert_rope_params_to_dict``):
    a ``rope_scaling`` given wins over ``rope_parameters``, and the θ inside the one read
    over the top-level ``rope_theta``."""
    params = {"rope_theta": c["rope_theta"],
              **(c["rope_scaling"] or c.get("rope_parameters") or {})}
    kind = params.get("rope_type", params.get("type", "default"))
    if kind not in _ROPE_KINDS:
        raise ValueError(f"rope scaling {kind!r} is not supported; supported: "
                         f"{', '.join(_ROPE_KINDS)}")
    # (read by transformers' scaled frequencies, not by its plain RoPE)
    partial = params.get("partial_rotary_factor", c.get("partial_rotary_factor"))
    if kind != "default" and partial not in (None, 1):
        raise ValueError(f"partial_rotary_factor {partial} with rope scaling {kind!r}: RoPE on "
                         f"part of each head has no attnlab equivalent")
    found = {"rope_theta": float(params["rope_theta"] or c["rope_theta"]),
             "rope_scaling": _ROPE_KINDS[kind]}
    if kind != "default":
        if params.get("factor") is None:
            raise ValueError(f"rope scaling {kind!r} has no factor")
        found["rope_factor"] = float(params["factor"])
    if kind == "llama3":
        for key in ("low_freq_factor", "high_freq_factor"):  # transformers requires both
            if params.get(key) is None:
                raise ValueError(f"rope scaling 'llama3' has no {key}")
        found.update(rope_low_freq_factor=float(params["low_freq_factor"]),
                     rope_high_freq_factor=float(params["high_freq_factor"]),
                     rope_original_max_len=_original_context(c, params))
    return found


def _original_context(c: dict[str, Any], params: dict[str, Any]) -> int:
    """The context llama3 scaling was trained at, as transformers 5 reads it
    (``standardize_rope_params``): a top-level ``original_max_position_embeddings`` wins, then
    the scaling's own, then ``max_position_embeddings`` (not Llama 3.1's 8192: a config.json
    without the key runs at its own length in transformers)."""
    for value in (c.get("original_max_position_embeddings"),
                  params.get("original_max_position_embeddings")):
        if value is not None:
            return int(value)
    return int(c["max_position_embeddings"])


def _rope_parameters(cfg: Any) -> dict[str, Any]:
    """A ``CausalLMConfig``'s RoPE as transformers' ``rope_parameters``."""
    rope: dict[str, Any] = {"rope_theta": cfg.rope_theta, "rope_type": {
        v: k for k, v in _ROPE_KINDS.items()}[cfg.rope_scaling]}
    if cfg.rope_scaling != "none":
        rope["factor"] = cfg.rope_factor
    if cfg.rope_scaling == "llama3":
        rope.update(low_freq_factor=cfg.rope_low_freq_factor,
                    high_freq_factor=cfg.rope_high_freq_factor,
                    original_max_position_embeddings=cfg.rope_original_max_len)
    return rope


def _qkv_only(cfg: Any) -> bool:
    """Whether a ``CausalLMConfig``'s q/k/v biases differ from its other layers'."""
    return cfg.qkv_bias is not None and cfg.qkv_bias != cfg.bias


def qkv_bias_beside_window(cfg: Any) -> bool:
    """Whether a ``CausalLMConfig`` has q/k/v biases alone beside a sliding window: of the
    Llama family only Qwen2 holds both."""
    return _qkv_only(cfg) and bool(cfg.qkv_bias) and cfg.sliding_window is not None


def _bias_family(cfg: Any, qkv_bias_as: str | None) -> str:
    """The family ``llama_family_config`` writes q/k/v biases alone as: ``qkv_bias_as``, or
    for ``None`` Llama's unless only Qwen2 holds the parts."""
    if qkv_bias_as is None:
        return "qwen2" if qkv_bias_beside_window(cfg) else "llama"
    if qkv_bias_as not in ("qwen2", "llama"):
        raise ValueError(f"to_hf: qkv_bias_as {qkv_bias_as!r}; expected None, 'qwen2' or "
                         f"'llama'")
    if qkv_bias_as == "llama" and qkv_bias_beside_window(cfg):
        raise ValueError(f"to_hf: qkv_bias_as='llama' with q/k/v biases alone (qkv_bias=True) "
                         f"and sliding_window={cfg.sliding_window}: no family reads both (Llama "
                         f"has no window, Mistral no biases); qkv_bias_as='qwen2' (or None) "
                         f"writes Qwen2's, whose directory transformers reads with Qwen2's own "
                         f"tokenizer")
    return qkv_bias_as


def llama_family_config(cfg: Any, *, qkv_bias_as: str | None = None
                        ) -> tuple[str, dict[str, Any]]:
    """(model_type, the transformers config's keyword arguments) of a ``CausalLMConfig``
    built from the Llama family's parts: the inverse of ``llama_family_settings``. The family
    is the one that holds the parts: QK-norm -> qwen3, q/k/v biases alone -> ``qkv_bias_as``
    (a sliding window with either: Qwen's, on every layer), a sliding window alone ->
    mistral, else llama. ``ValueError`` naming the first setting none holds.

    ``qkv_bias_as="llama"`` writes q/k/v biases alone as Llama's ``attention_bias`` (the
    caller sets the o_proj biases it adds to zero), right for any tokenizer: transformers
    reads the tokenizer of every ``qwen2`` directory as its own ``Qwen2Tokenizer``, whatever
    the directory holds, and a Llama directory's as written, so ``"qwen2"`` is for a model
    with Qwen2's own tokenizer: pass it for one (a Llama export's zero o_proj biases train in
    Hugging Face, and ``from_hf`` then refuses "o_proj.bias is not zero"). With ``"llama"`` no
    family holds a sliding window beside the biases (Mistral has none): refused. ``None``
    (the default): ``"llama"``, unless only Qwen2 holds the parts (biases beside a window),
    then ``"qwen2"``."""
    needs = {"norm_first": (True,), "positional": ("rope",), "norm": ("rms",),
             "ff": tuple(_GATES.values())}
    for key, allowed in needs.items():
        if getattr(cfg, key) not in allowed:
            raise ValueError(f"to_hf: the Llama family needs {key}={allowed[0]!r}, this "
                             f"CausalLM has {key}={getattr(cfg, key)!r}")
    qkv_only = _qkv_only(cfg)
    if qkv_only and not cfg.qkv_bias:
        raise ValueError("to_hf: qkv_bias=False with bias=True (biases everywhere but q/k/v) "
                         "has no Hugging Face family")
    parts = [name for name, on in (("qwen3", cfg.qk_norm),
                                   (_bias_family(cfg, qkv_bias_as), qkv_only)) if on]
    if len(parts) > 1:
        raise ValueError(f"to_hf: qk_norm and qkv_bias alone belong to different families "
                         f"({', '.join(parts)}); this CausalLM has both")
    # a window on every layer: Mistral's, or Qwen's from layer 0 (max_window_layers 0)
    model_type = parts[0] if parts else "mistral" if cfg.sliding_window is not None else "llama"
    if model_type == "qwen2" and cfg.bias:
        raise ValueError("to_hf: Qwen2 has q/k/v biases only; this CausalLM has bias=True")
    kwargs = {"vocab_size": cfg.vocab_size, "hidden_size": cfg.model_dim,
              "intermediate_size": cfg.dim_feedforward, "num_hidden_layers": cfg.num_layers,
              "num_attention_heads": cfg.num_heads,
              "num_key_value_heads": cfg.num_kv_heads or cfg.num_heads,
              "head_dim": cfg.head_dim or cfg.model_dim // cfg.num_heads,
              "hidden_act": {v: k for k, v in _GATES.items()}[cfg.ff],
              "max_position_embeddings": cfg.max_len, "rms_norm_eps": cfg.layer_norm_eps,
              "tie_word_embeddings": cfg.tie_weights, "rope_parameters": _rope_parameters(cfg),
              "attention_dropout": cfg.attention_dropout}
    if model_type in ("llama", "qwen3"):
        kwargs["attention_bias"] = cfg.bias or qkv_only
    if model_type == "llama":
        kwargs["mlp_bias"] = cfg.bias
    elif cfg.bias:
        raise ValueError(f"to_hf: {model_type} has no feed-forward biases; this CausalLM has "
                         f"bias=True")
    if model_type == "mistral":
        kwargs["sliding_window"] = cfg.sliding_window
    elif model_type != "llama" and cfg.sliding_window is not None:
        kwargs.update(use_sliding_window=True, sliding_window=cfg.sliding_window,
                      max_window_layers=0)
    return model_type, kwargs
