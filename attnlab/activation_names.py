"""The names of the feed-forward activations, kept apart from
``attnlab.nn.feedforward.make_activation``, which builds each of them.

It imports nothing (no torch), so that typed model configs (``attnlab.models.configs``) and the
CLI's parsers offer the choices without importing torch (as ``attnlab.positional_names`` does
for the positional kinds). A new activation is one name here and its line in
``make_activation``.

Examples:
    >>> ACTIVATIONS
    ('relu', 'gelu', 'gelu_tanh', 'silu')
"""
from __future__ import annotations

__all__ = ["ACTIVATIONS", "ACT_FROM_HF", "ACT_TO_HF", "hf_activation", "FEED_FORWARDS", "GATED",
           "NORMS", "LORA_TARGETS"]

# relu: the paper's; gelu: BERT's and GPT-2's (exact erf); gelu_tanh: GPT-2's "gelu_new"
# (tanh approximation); silu: the gate of LLaMA's feed-forward, here without the gate
ACTIVATIONS: tuple[str, ...] = ("relu", "gelu", "gelu_tanh", "silu")

# the feed-forward networks of a block: "mlp" (two layers, ``FeedForward``) or a gated one
# (``GatedFeedForward``), whose gate's activation GATED names: SwiGLU (Llama, Qwen, Mistral),
# GeGLU (Shazeer, 2020)
GATED: dict[str, str] = {"swiglu": "silu", "geglu": "gelu"}
FEED_FORWARDS: tuple[str, ...] = ("mlp", *GATED)
# the norms of a block (``attnlab.nn.norms.make_norm``): LayerNorm, or RMSNorm (Llama's)
NORMS: tuple[str, ...] = ("layer", "rms")
# the linear layers --lora-targets adapts (``attnlab.nn.lora.add_lora``): the attention
# projections, the feed-forward network's layers, or both (peft's "all-linear")
# each as the messages name its layers
LORA_LAYERS: dict[str, str] = {"attention": "attention projections", "mlp": "feed-forward layers",
                               "all-linear": "attention and feed-forward layers"}
LORA_TARGETS: tuple[str, ...] = tuple(LORA_LAYERS)

# Hugging Face activation names -> attnlab.nn activation names, and back (``attnlab.interop``
# converts weights with them; ``attnlab train --init`` reads a config.json with them, torch-free)
ACT_FROM_HF = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
               "gelu_fast": "gelu_tanh", "relu": "relu", "silu": "silu", "swish": "silu"}
ACT_TO_HF = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "silu": "silu"}


def hf_activation(name: str, model_type: str) -> str:
    """attnlab's name for a Hugging Face activation; ValueError naming an unsupported one.

    Examples:
        >>> hf_activation("gelu_new", "gpt2")
        'gelu_tanh'
    """
    if name not in ACT_FROM_HF:
        raise ValueError(f"{model_type}: activation {name!r} has no attnlab equivalent; "
                         f"supported: {', '.join(sorted(ACT_FROM_HF))}")
    return ACT_FROM_HF[name]
