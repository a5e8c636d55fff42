"""The dtype ``attnlab export --hf`` writes a run's weights in.

A run's ``model.safetensors`` is float32 whatever ``--precision`` trained it. A
``--precision bf16-true`` run's weights are bfloat16 values all the same (the optimiser
stepped them in bfloat16), and written as float32 its export was twice the size of the
bfloat16 checkpoint it started from, saying nothing, for no extra precision. So such a run is
written in bfloat16, and config.json says ``bfloat16``, as ``save_pretrained`` records the
model's dtype. A run of ``32``, ``64`` or a mixed precision trains float32 (or float64) master
weights, which bfloat16 would round: those are written in float32, as before.
"""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["written_dtype", "in_written_dtype"]


def written_dtype(model: nn.Module, precision: str) -> torch.dtype:
    """``torch.bfloat16`` for a run of ``--precision bf16-true`` whose every floating tensor
    of ``model``'s state dict is a bfloat16 value (exactly, so nothing is rounded), else
    ``torch.float32``. Tensors ``save_pretrained`` does not write (``_keys_to_ignore_on_save``)
    are not weighed.

    Examples:
        >>> lin = nn.Linear(2, 2).to(torch.bfloat16).float()
        >>> written_dtype(lin, "bf16-true"), written_dtype(lin, "32")
        (torch.bfloat16, torch.float32)
        >>> written_dtype(nn.Linear(2, 2), "bf16-true")  # float32 values: not rounded
        torch.float32
    """
    if str(precision) != "bf16-true":
        return torch.float32
    # what save_pretrained leaves out (Marian's sinusoidal position tables, float32 and
    # rebuilt on load) is never written, so it cannot round: its names match as
    # save_pretrained matches them, exactly
    unsaved = set(getattr(model, "_keys_to_ignore_on_save", None) or ())
    floats = [t for k, t in model.state_dict().items()
              if t.is_floating_point() and k not in unsaved]
    exact = all(torch.equal(t, t.to(torch.bfloat16).to(t.dtype)) for t in floats)
    return torch.bfloat16 if exact else torch.float32


def in_written_dtype(model: nn.Module, precision: str) -> tuple[nn.Module, str]:
    """``model`` in ``written_dtype`` (cast in place), and that dtype's name as config.json
    spells it (``"bfloat16"``, ``"float32"``)."""
    dtype = written_dtype(model, precision)
    return model.to(dtype), str(dtype).removeprefix("torch.")
