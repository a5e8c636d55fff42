"""What a run trains of its model: ``--freeze`` and ``--lora-rank`` applied before training,
and LoRA merged back after it (``attnlab.settings.AdaptSettings`` declares the flags and
``check_adapt`` their rules).

Each model the three tasks build is cut the same way:

    embeddings → blocks[0] … blocks[L-1] → what follows (final norm, head)

- ``--freeze all-but-last-N`` trains blocks[L-N:] and what follows them; the embeddings and
  the first blocks keep their weights bit for bit. A head tied to the token embedding (the
  language model's, by default) is the embedding: it trains with the head.
- ``--freeze encoder`` trains the classifier's (or the tagger's) head, or the translator's
  decoder side (target embedding, positional table, decoder, output); the source embedding
  and the encoder stay.
- ``--lora-rank R`` freezes every weight and trains a rank-R update of each layer
  ``--lora-targets`` names: the attention projections (the default), the feed-forward
  network's layers (``mlp``) or both (``all-linear``); and a classifier's head, which a
  pretrained encoder does not have. The run saves the merged model, and, when it started
  from a Hugging Face directory, the update alone as a peft adapter (``save_adapter``).

The blocks are the language model's decoder, the classifier's encoder, the translator's
decoder.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from torch import Tensor, nn

from ..activation_names import LORA_LAYERS
from ..models.bert_classifier import BertClassifier
from ..models.bert_tagger import BertTagger
from ..models.causal_lm import CausalLM
from ..models.classifier import SequenceClassifier
from ..models.seq2seq import Seq2SeqTransformer
from ..nn.lora import add_lora, merge_lora
from ..settings import freeze_blocks

if TYPE_CHECKING:
    from ..run_config import RunSettings

__all__ = ["adapt", "merge_lora", "parameter_share", "lora_targets", "save_adapter", "init_kind"]



def _parts(model: nn.Module) -> tuple[list[nn.Module], list[nn.Module], list[nn.Module]]:
    """(blocks in order, what follows them, what trains under --freeze encoder)."""
    if isinstance(model, CausalLM):
        stack = model.decoder
        return list(stack.layers), [stack.norm, model.lm_head], []
    if isinstance(model, SequenceClassifier):
        stack = model.encoder
        return list(stack.layers), [stack.norm, model.output_net], [model.output_net]
    if isinstance(model, BertClassifier):  # post-LN: no final norm; the pooler is the head's
        head = [model.pooler, model.classifier]
        return list(model.bert.encoder.layers), head, head
    if isinstance(model, BertTagger):  # tag's: the per-token layer is the head
        return list(model.bert.encoder.layers), [model.classifier], [model.classifier]
    if isinstance(model, Seq2SeqTransformer):
        stack = model.transformer.decoder
        return (list(stack.layers), [stack.norm, model.output],
                [model.tgt_embedding, model.positional_encoding, stack, model.output])
    raise ValueError(f"--freeze and --lora-rank know no {type(model).__name__}")


def _train_only(model: nn.Module, modules: list[nn.Module | None]) -> None:
    model.requires_grad_(False)
    for module in modules:
        if module is not None:
            module.requires_grad_(True)


def adapt(model: nn.Module, cfg: RunSettings) -> str | None:
    """Apply the run's --freeze or --lora-rank to ``model`` in place; the line that says what
    trains, or None when everything does."""
    if not cfg.declares("freeze"):  # a task without --freeze / --lora-rank trains it all
        return None
    freeze, rank = cfg.freeze, cfg.lora_rank
    if freeze == "none" and rank is None:
        return None
    blocks, after, decoder_side = _parts(model)
    total = parameter_share(model)[1]  # before LoRA adds its own
    if rank is not None:
        targets = lora_targets(cfg)
        wrapped = add_lora(model, rank, cfg.lora_alpha, targets=targets)
        if isinstance(model, (SequenceClassifier, BertClassifier, BertTagger)):
            # a classifier's head, as --freeze encoder trains it: a new one has nothing to
            # keep, and a pretrained encoder's is its pooler (new too where the checkpoint
            # had none: DistilBERT's pre_classifier) and the new classifier layer
            for module in decoder_side:
                if module is not None:
                    module.requires_grad_(True)
        what = (f"--lora-rank {rank} (alpha {cfg.lora_alpha:g}) on {len(wrapped)} "
                f"{LORA_LAYERS[targets]}")
    elif freeze == "encoder":
        _train_only(model, decoder_side)
        what = "--freeze encoder"
    else:
        n = freeze_blocks(freeze)
        _train_only(model, [*blocks[len(blocks) - n:], *after] if n else after)
        what = f"--freeze {freeze}"
    return f"{what}: training {parameter_share(model)[0]:,} parameters; the model has {total:,}"


def lora_targets(cfg: RunSettings) -> str:
    """The run's --lora-targets; "attention" for a run of a task that does not declare it."""
    return cfg.lora_targets if cfg.declares("lora_targets") else "attention"


def parameter_share(model: nn.Module) -> tuple[int, int]:
    """(trainable, all) parameters of ``model``, a shared (tied) one counted once."""
    unique = {id(p): p for p in model.parameters()}.values()
    return sum(p.numel() for p in unique if p.requires_grad), sum(p.numel() for p in unique)


def save_adapter(run_dir: Path, cfg: RunSettings, model: nn.Module,
                 factors: dict[str, tuple[Tensor, Tensor]],
                 started: tuple[str | None, str | None] | None = None) -> Path | None:
    """Write ``run_dir/adapter/`` (``attnlab.interop.peft_adapter``) from a LoRA run's
    ``factors``, taken before they were merged into ``model``; a run peft cannot load over a
    Hugging Face base (one started from random weights, an attnlab run or a GGUF file; a
    classifier whose head no Hugging Face class has) gets a note on stderr instead.
    ``started`` is ``init_kind`` as the run found it when it started (a resumed run's
    checkpoint keeps it: DIR may be gone by now); None reads --init now. Returns the
    directory written, or None."""
    from ..interop.peft_adapter import ADAPTER_DIR, adapter_refusal, write_adapter

    kind, model_type = started or init_kind(cfg)
    why = adapter_refusal(cfg.task, kind, model_type, model)
    if why:
        print(f"note: no {ADAPTER_DIR}/ for this --lora-rank run: {why}", file=sys.stderr,
              flush=True)
        return None
    return write_adapter(run_dir, model, factors, task=cfg.task, model_type=model_type,
                         init=cfg.init, rank=cfg.lora_rank, alpha=cfg.lora_alpha)


def init_kind(cfg: RunSettings) -> tuple[str | None, str | None]:
    """(what --init names: "hf", "run", "gguf" or None, config.json's model_type), read from
    DIR: a run takes it when it starts, and its checkpoints keep it for ``save_adapter``."""
    from ..runs import read_json

    init = cfg.init if cfg.declares("init") else None
    if not init:
        return None, None
    path = Path(init)
    if not path.exists():  # moved or deleted since the run started (see save_adapter)
        return "gone", None
    if path.is_file():
        return "gguf", None
    if (path / "config.json").is_file():
        return "hf", read_json(path / "config.json").get("model_type")
    return "run", None
