"""Rules a Hugging Face ``config.json`` must keep for attnlab to build its model, said once
for every family in the file's own keys (``n_embd``/``n_head``, ``d_model``/
``encoder_attention_heads``, ``hidden_size``/``num_attention_heads``), not as the
``--model-dim``/``--num-heads`` flags a user of ``--init`` never gave. No torch.
"""
from __future__ import annotations

__all__ = ["heads_divide_width"]


def heads_divide_width(config: dict, width_key: str, heads_key: str) -> None:
    """Refuse a ``config`` whose width ``config[width_key]`` does not divide by its heads
    ``config[heads_key]`` (each attention head takes an equal share of the width); a key
    missing or not a positive int is left to the caller's own check.

    Raises:
        ValueError: naming both keys and their values.

    Examples:
        >>> heads_divide_width({"n_embd": 32, "n_head": 4}, "n_embd", "n_head")
        >>> heads_divide_width({"n_embd": 32, "n_head": 5}, "n_embd", "n_head")
        Traceback (most recent call last):
        ...
        ValueError: n_embd 32 is not divisible by n_head 5 (each attention head takes an equal share of the width)
    """
    width, heads = config.get(width_key), config.get(heads_key)
    if isinstance(width, int) and isinstance(heads, int) and heads > 0 and width % heads:
        raise ValueError(f"{width_key} {width} is not divisible by {heads_key} {heads} (each "
                         f"attention head takes an equal share of the width)")
