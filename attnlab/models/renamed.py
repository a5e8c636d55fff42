"""Reading weights saved under a submodule's old name.

Each concept has one name across models (``docs/architecture.md``, "Names"). Weights stored
under a submodule's old name load under its new one (``CausalLM.encoder`` -> ``decoder``,
``CausalLM.pos_encoding`` and ``Seq2SeqTransformer.positional`` -> ``positional_encoding``;
docs/compatibility.md), whether into the model itself (``model.safetensors``: ``attnlab.load``,
``runs.load_weights``) or into a module that holds it (a checkpoint's ``model.encoder....``
keys, ``--resume``).
"""
from __future__ import annotations

from functools import partial
from typing import Mapping

from torch import nn

__all__ = ["accept_old_names"]


def accept_old_names(module: nn.Module, renames: Mapping[str, str]) -> None:
    """Let ``module`` load state dicts that use its submodules' old names.

    A load-state-dict pre-hook runs before ``module`` reads its part of the state dict (also when
    a parent module is loading, with the parent's prefix in front): each key
    ``<prefix><old>.<rest>`` becomes ``<prefix><new>.<rest>`` unless that key is there already,
    so ``strict=True`` still reports anything truly missing or unexpected.

    Args:
        module: the model whose submodules were renamed.
        renames: old submodule name -> new name (top-level names of ``module``).

    Examples:
        >>> lin = nn.Sequential(); lin.out = nn.Linear(2, 1)
        >>> accept_old_names(lin, {"head": "out"})
        >>> lin.load_state_dict({"head.weight": lin.out.weight, "head.bias": lin.out.bias})
        <All keys matched successfully>
    """
    # a partial of a module-level function, not a closure: the model stays picklable
    # (``torch.save(model)``, spawn-based multiprocessing)
    module.register_load_state_dict_pre_hook(partial(_rename_keys, old_prefixes={
        f"{old}.": f"{new}." for old, new in renames.items()}))


def _rename_keys(module: nn.Module, state_dict: dict, prefix: str, *_,
                 old_prefixes: Mapping[str, str]) -> None:
    for key in [k for k in state_dict if k.startswith(prefix)]:
        rest = key[len(prefix):]
        old = next((o for o in old_prefixes if rest.startswith(o)), None)
        if old is not None:
            new_key = prefix + old_prefixes[old] + rest[len(old):]
            if new_key not in state_dict:
                state_dict[new_key] = state_dict.pop(key)
