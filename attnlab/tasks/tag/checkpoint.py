"""The Hugging Face checkpoint ``attnlab train tag --init DIR`` starts from, read by the spec's
``validate`` (so that a corrupt one is refused before the run directory exists) and, where
validate did not, by the runtime. Light at import: torch and transformers load inside
``read_init``."""
from __future__ import annotations

from pathlib import Path

from ...errors import UsageError

__all__ = ["read_init"]


def read_init(init: str, sha256: str):
    """The checkpoint of a Hugging Face ``--init`` directory (None for an attnlab run), its
    weights the ones configured."""
    if (Path(init) / "config.yaml").is_file():
        return None
    from ...interop.checkpoint import read_checkpoint  # torch and transformers

    checkpoint = read_checkpoint(init, task="tag")
    if checkpoint.sha256 != sha256:
        raise UsageError(f"--init {init}: {checkpoint.weights.name} changed since the run was "
                         f"configured; start the run again")
    return checkpoint
