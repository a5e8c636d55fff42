"""A Hugging Face directory holding its weights twice: ``model.safetensors`` (or its shards)
beside a ``pytorch_model.bin``.

Hub downloads often hold both, the same weights in two formats. ``transformers`` (and
attnlab, ``source.WEIGHTS_FILES``) reads the safetensors and never opens the other, so a
directory where the two differ (a fine-tuned ``pytorch_model.bin`` copied over a download of
the base model; a conversion gone wrong) trains or generates from weights other than those
its user may mean, in silence. ``check_twin_weights`` refuses such a directory in one line
naming both files and the first tensor that differs.

What is compared: every tensor both hold, by value (in the dtype of fewer bytes where a
conversion changed it), by name or, where no name is common, by name without the base
model's prefix (``transformer.``, ``bert.``: one model saved with and without its head); where
still none is common, nothing. A tensor that only one holds is left out: files saved by an older
``transformers`` keep buffers a newer one drops (``position_ids``, GPT-2's ``attn.bias``) and
a tied head that safetensors cannot store twice (``lm_head.weight``).
"""
from __future__ import annotations

from pathlib import Path

import torch

from ..errors import UsageError
from .source import settled_stat, weight_files
from .weights import SafetensorsTensors

__all__ = ["check_twin_weights", "first_difference", "TWIN"]

TWIN = "pytorch_model.bin"  # the file the safetensors are read instead of
# (safetensors files' stats, the twin's stat) -> checked already: a run reads the directory
# in its checks and again as it starts, and each comparison reads both files whole
_CHECKED: set[tuple] = set()


def check_twin_weights(weights: Path) -> None:
    """A UsageError when the directory of ``weights`` (the file that is read:
    ``source.weights_file``) also holds a ``pytorch_model.bin`` of other weights.

    Raises:
        UsageError: one line naming both files and the first tensor that differs, or the
            twin that cannot be read.
    """
    twin = weights.parent / TWIN
    if weights.name == TWIN or not twin.is_file():
        return
    files = weight_files(weights)
    key = tuple(settled_stat(p) for p in (*files, twin))
    if None not in key and key in _CHECKED:
        return
    found = first_difference(files, twin)
    if found is not None:
        raise UsageError(f"{weights.parent} holds {weights.name} and {TWIN} of different "
                         f"weights ({found}); transformers reads {weights.name}, and so does "
                         f"attnlab: move the file that is not the model you mean out of the "
                         f"directory")
    if None not in key:
        _CHECKED.add(key)


@torch.no_grad()
def first_difference(files: list[Path], twin: Path) -> str | None:
    """What first differs between the safetensors ``files`` and the ``pytorch_model.bin``
    ``twin`` (see the module doc), in words; None when every tensor both hold is equal."""
    try:
        theirs = _bin(twin)
    except Exception as e:  # a damaged or not-a-checkpoint twin
        return f"{TWIN} cannot be read: {' '.join(str(e).split())[:120]}"
    with SafetensorsTensors(files) as tensors:
        for name, their_name in _pairs(list(tensors.names()), list(theirs)):
            ours, other = tensors.read(name), theirs[their_name]
            if tuple(ours.shape) != tuple(other.shape):
                return f"{name} is {tuple(ours.shape)} in one, {tuple(other.shape)} in the other"
            if ours.dtype != other.dtype:  # compared in the narrower of the two
                narrow = min(ours.dtype, other.dtype, key=lambda d: torch.empty((), dtype=d)
                             .element_size())
                ours, other = ours.to(narrow), other.to(narrow)
            if not torch.equal(ours, other):
                return f"{name} differs"
    return None


def _pairs(ours: list[str], theirs: list[str]) -> list[tuple[str, str]]:
    """(our name, their name) of each tensor both hold: by name; where no name is common, with
    the base model's prefix taken off the names of the file that has one (``GPT2Model`` saved
    ``h.0.attn.c_attn.weight``, ``GPT2LMHeadModel`` ``transformer.h.0.attn.c_attn.weight``,
    which transformers loads as the same tensor). Nothing common: nothing to compare."""
    named = set(theirs)
    if common := [(n, n) for n in ours if n in named]:
        return common

    def base(n: str) -> str:
        return n.split(".", 1)[-1]

    ours_off = [(n, base(n)) for n in ours if base(n) in named]
    theirs_off = {base(n): n for n in theirs}
    theirs_on = [(n, theirs_off[n]) for n in ours if n in theirs_off]
    return max(ours_off, theirs_on, key=len)


def _bin(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a ``pytorch_model.bin``, mapped where it is a zip (only what is compared
    is read), else read whole (a legacy pickle)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError:  # not a zip: cannot be mapped
        return torch.load(path, map_location="cpu", weights_only=True)
