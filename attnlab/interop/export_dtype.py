"""The dtype ``attnlab export --hf`` writes a run's weights in.

A run's ``model.safetensors`` is float32 whatever ``--precision`` trained it. A
``--precision bf16-true`` run's weights are bfloat16 values all the same (the optimiser
stepped them in bfloat16), and written as float32 its export was twice the size of the
bfloat16 checkpoint it started from, saying nothing, for no extra precision. So such a run is
written in bfloat16, and config.json says ``bfloat16``, as ``save_pretrained`` records the
model's dtype. A run of ``32``, ``64`` or a mixed precision trains float32 (or float64) master
weights, which bfloat16 would round: those are written in float32, as before; and so is a
bf16-true run whose merged ``--lora-rank`` update or float32 frozen weights (``--freeze``)
bfloat16 would round, the export's line saying why.
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
    return torch.float32 if _not_bfloat16(model) else torch.bfloat16


def _not_bfloat16(model: nn.Module) -> str | None:
    """The name of the first floating tensor ``save_pretrained`` writes of ``model`` that is
    not a bfloat16 value, or None."""
    # what save_pretrained leaves out (Marian's sinusoidal position tables, float32 and
    # rebuilt on load) is never written, so it cannot round: its names match as
    # save_pretrained matches them, exactly
    unsaved = set(getattr(model, "_keys_to_ignore_on_save", None) or ())
    return next((k for k, t in model.state_dict().items()
                 if t.is_floating_point() and k not in unsaved
                 and not torch.equal(t, t.to(torch.bfloat16).to(t.dtype))), None)


def in_written_dtype(model: nn.Module, cfg) -> tuple[nn.Module, str]:
    """``model`` in ``written_dtype`` for the run ``cfg`` (cast in place), and the words the
    export's "wrote" line says of its weights: the dtype as config.json spells it
    (``"bfloat16 weights"``), and, where a bf16-true run is written in float32, why.

    A bf16-true run's trained weights are bfloat16 values, but a merged ``--lora-rank``
    update (float32, added to them) and the weights ``--freeze`` kept from a float32
    ``--init`` are not: bfloat16 would round them, so such a run is written in float32.
    """
    dtype = written_dtype(model, cfg.precision)
    words = f"{str(dtype).removeprefix('torch.')} weights"
    if str(cfg.precision) == "bf16-true" and dtype == torch.float32:
        words += f" ({_why_float32(model, cfg)})"
    return model.to(dtype), words


def _why_float32(model: nn.Module, cfg) -> str:
    if cfg.declares("lora_rank") and cfg.lora_rank:
        return "the merged --lora-rank update is not a bfloat16 value"
    if cfg.declares("freeze") and cfg.freeze != "none":
        return "the weights --freeze froze are float32 values"
    return f"{_not_bfloat16(model)} is not a bfloat16 value"
