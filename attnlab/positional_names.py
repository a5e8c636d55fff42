"""The names of the positional kinds and where each acts, kept apart from the registry
``attnlab.nn.positional.POSITIONAL_KINDS``, which builds its kinds from this table.

It imports nothing (no torch), so that typed model configs (``attnlab.models.configs``) and the
CLI's parsers offer the choices without importing torch. A new kind is its module in
``attnlab/nn/positional.py`` plus one line here.

Where a kind acts, and how ``attnlab.nn.positional`` builds its module (the class named here):
    "inputs": added to the inputs, ``Cls(d_model, max_len)``;
    "qk":     applied to queries and keys inside attention, ``Cls(head_dim, max_len)``;
    "scores": a bias on the attention scores, ``Cls(num_heads)``;
    None:     no module at all.

Examples:
    >>> positional_names(inputs_only=True)
    ('sinusoidal', 'learned', 'none')
"""
from __future__ import annotations

__all__ = ["POSITIONAL_NAMES", "positional_names", "ROPE_SCALINGS"]

# name: (where it acts, its class in attnlab.nn.positional, one line of help)
POSITIONAL_NAMES: dict[str, tuple[str | None, str | None, str]] = {
    "sinusoidal": ("inputs", "PositionalEncoding",
                   "fixed sines and cosines (Vaswani et al., 2017)"),
    "learned": ("inputs", "LearnedPositionalEncoding",
                "a trained embedding per position (GPT-2, BERT)"),
    "rope": ("qk", "RotaryEmbedding",
             "rotary: queries and keys rotated by position (Su et al., 2021)"),
    "alibi": ("scores", "ALiBi", "linear distance penalty on the scores (Press et al., 2022)"),
    "none": (None, None, "no positional information (sets; a causal mask still orders)"),
}

# how rotary frequencies are stretched for contexts longer than training's
# (``attnlab.nn.positional.rope_frequencies``): not at all, all by one factor (linear), or the
# low frequencies only, with a smooth band between (llama3: Llama 3.1's)
ROPE_SCALINGS: tuple[str, ...] = ("none", "linear", "llama3")


def positional_names(*, inputs_only: bool = False, with_none: bool = True) -> tuple[str, ...]:
    """The registered kind names, in registry order.

    Args:
        inputs_only: only the kinds that act on the inputs alone (no attention part): what a
            model whose attention takes no positional part can use.
        with_none: include "none" (no positional information).

    Examples:
        >>> positional_names(inputs_only=True, with_none=False)
        ('sinusoidal', 'learned')
    """
    return tuple(name for name, (where, _, _) in POSITIONAL_NAMES.items()
                 if (where is not None or with_none)
                 and (not inputs_only or where in ("inputs", None)))
