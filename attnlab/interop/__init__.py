"""Weight conversion from and to Hugging Face ``transformers`` (imported lazily: the ``hf`` extra).

    from_hf(hf_model)   GPT2LMHeadModel -> CausalLM; BertModel & BERT-family -> BertEncoder
                        MarianMTModel -> Seq2SeqTransformer
    to_hf(model)        CausalLM -> GPT2LMHeadModel (pre-LN, learned positions, biases)
                        Seq2SeqTransformer -> MarianMTModel (post-LN, sinusoidal positions)
    checkpoint.read_checkpoint(path, task=...)
                        a Hugging Face directory on disk -> attnlab model + its own tokenizer
    source.read_init_source(path, task=..., model_types=...)
                        what ``--init DIR`` names, checked without torch

Importing the package imports nothing heavy: ``from_hf`` and ``to_hf`` load ``hf.py`` (and
torch) on first use, so the command line's checks can read ``source`` before torch is loaded.
"""
from __future__ import annotations

from typing import Any

__all__ = ["from_hf", "to_hf"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import hf

        return getattr(hf, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
