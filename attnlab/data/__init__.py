"""Built-in data: the synthetic per-element tasks (reverse, copy, sort) and batch loaders."""
from .resumable import ResumableBatches, numbered_batches, shard
from .sequences import (SEQUENCE_TASKS, BatchLoader, ReverseDataset, SequenceDataset, batch_loader,
                        make_labels, pad_to_length, split_seed)

__all__ = ["SEQUENCE_TASKS", "BatchLoader", "ReverseDataset", "ResumableBatches",
           "SequenceDataset", "batch_loader", "make_labels", "numbered_batches", "pad_to_length", "shard",
           "split_seed"]
