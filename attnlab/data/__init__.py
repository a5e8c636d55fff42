"""Built-in data: the synthetic per-element tasks (reverse, copy, sort) and batch loaders.

The names from ``sequences`` (torch) load on first use, so that importing a light module of
this package (``corpus_meta``, which ``attnlab train lm`` checks --data with) imports no torch.
"""
from .resumable import ResumableBatches, numbered_batches, shard

_SEQUENCES = ("SEQUENCE_TASKS", "BatchLoader", "ReverseDataset", "SequenceDataset",
              "batch_loader", "make_labels", "pad_to_length", "split_seed")

__all__ = ["SEQUENCE_TASKS", "BatchLoader", "ReverseDataset", "ResumableBatches",
           "SequenceDataset", "batch_loader", "make_labels", "numbered_batches", "pad_to_length", "shard",
           "split_seed"]


def __getattr__(name):
    if name in _SEQUENCES:
        from . import sequences

        return getattr(sequences, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
