"""The names of the feed-forward activations: the light half of
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

__all__ = ["ACTIVATIONS", "ACT_FROM_HF", "ACT_TO_HF"]

# relu: the paper's; gelu: BERT's and GPT-2's (exact erf); gelu_tanh: GPT-2's "gelu_new"
# (tanh approximation); silu: the gate of LLaMA's feed-forward, here without the gate
ACTIVATIONS: tuple[str, ...] = ("relu", "gelu", "gelu_tanh", "silu")

# Hugging Face's names (a checkpoint's hidden_act / activation_function) -> attnlab's, and back
ACT_FROM_HF = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
               "gelu_fast": "gelu_tanh", "relu": "relu", "silu": "silu", "swish": "silu"}
ACT_TO_HF = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "silu": "silu"}
