"""``attnlab train tag``: token classification (named entities, chunks) on the user's file.

    attnlab train tag --data train.conll [--val FILE] [--test FILE] [--tag-column N]
        [--tokens-column tokens] [--tags-column tags] [--init DIR]
        [--freeze none|encoder|all-but-last-N] [--lora-rank R [--lora-alpha A]
         [--lora-targets attention|mlp|all-linear]]

The file is CoNLL (a word and its fields per line, the tag last; a blank line between
sentences), or JSON Lines, Parquet or a datasets directory with lists of words and tags
(``data.py``); tags are BIO. Without
``--test`` (or ``--val``) the sentences are split with ``--seed``. From scratch the model is
attnlab's encoder with a class per token (``SequenceClassifier(head="token")``) over a word
vocabulary of the training split (an unseen word reads as unknown). With ``--init DIR`` (a
Hugging Face BERT-family directory, or a tag run) it fine-tunes the pretrained encoder under a
new per-token layer (``BertTagger``), reading the words with the checkpoint's tokenizer: the
first subword of each word carries the word's label, the others none (-100), and a word's
prediction is read at its first subword. ``--freeze`` and ``--lora-rank`` are classify's
(``attnlab.training.adapt``): the head is the per-token layer; a LoRA run from a Hugging Face
directory writes a peft adapter (``TOKEN_CLS``, the head in ``modules_to_save``).

Metrics on the test split (``scoring.py``, as seqeval counts them): ``test_f1``,
``test_precision``, ``test_recall`` (entity level), ``test_accuracy`` (words), and
``test_per_type`` (each entity type's precision, recall, F1 and support); each validation
logs ``val_f1``, ``val_precision``, ``val_recall``, ``val_acc`` and ``val_loss``.

Data problems stop the command before a run directory is written (exit 2, one line naming the
file and line): a CoNLL line with another number of fields, a tag not in BIO form, a JSON Lines
row whose words and tags differ in length, an empty file, a --data file whose every tag is
``O``, a tag of a held-out file never seen in training.

Examples:
    >>> from attnlab.tasks import SHARED_DEFAULTS
    >>> task = TASKS["tag"]
    >>> cfg = {**SHARED_DEFAULTS, **task.defaults, "tag_column": 0}
    >>> task.check_settings(cfg)
    Traceback (most recent call last):
    ...
    attnlab.errors.UsageError: --tag-column must be a positive integer, got 0
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from ...errors import UsageError
from ...interop.source import INIT_MODEL_TYPES
from ...models.configs import PretrainedEncoderFields, SequenceClassifierConfig
from ...run_config import RunSettings
from ...settings import AdaptSettings, file_setting, flag, held_out_setting, setting
from ...tokenizers import normalize_setting, vocab_too_small
from ..base import Capabilities, Runtime, Task
from ..classify import pretrained
from ..classify.checkpoint_notes import init_notes
from .data import (check_entities, check_tags, file_kind, known_tags, read_and_pin,
                   held_out_notes)

__all__ = ["TagTask", "TagSettings", "TASKS"]

_MODEL_FLAGS = ("model_dim", "num_heads", "num_layers", "dim_feedforward", "dropout",
                "norm_first", "positional", "max_len")


@dataclass
class TagSettings(AdaptSettings, PretrainedEncoderFields):
    """The flags of ``attnlab train tag`` besides the shared and the model ones; and, without
    a flag, what ``--init DIR`` reads from a pretrained encoder (``arch``, its fields)."""

    data: str = file_setting("training data: CoNLL (a word and its tag per line), .jsonl, "
                             ".parquet or a datasets directory")
    test: str = file_setting("test data (default: --test-fraction of --data's sentences)")
    val: str = file_setting("validation data (default: --val-fraction of --data's sentences)")
    tag_column: int = setting(None, help="CoNLL: the field of the tag, counting the word as 0 "
                                         "(default: the last)", low=1, optional=True)
    tokens_column: str = setting("tokens", help="JSON Lines, Parquet, datasets: the field of "
                                                "the words", metavar="NAME")
    tags_column: str = setting("tags", help="JSON Lines, Parquet, datasets: the field of the "
                                            "tags", metavar="NAME")
    vocab_size: int = setting(20000, help="largest word vocabulary (from scratch)", low=5)
    normalize: str = normalize_setting()
    val_fraction: float = held_out_setting("val")
    test_fraction: float = held_out_setting("test")
    init: str = setting(None, optional=True, metavar="DIR", absent=None,
                        blank_why="give DIR (leave --init out to start from random weights)",
                        help="start from the weights and tokenizer of DIR, a Hugging Face "
                             "BERT-family directory on disk or an attnlab tag run (nothing is "
                             "downloaded); the model's shape comes from DIR")
    arch: str = pretrained.arch_setting()


@dataclass
class TagDerived:
    """What a tag run derives from its training split: the tags (sorted; ``O`` among them),
    and the word vocabulary's size (from scratch) or the checkpoint's (``--init``)."""

    resolves: ClassVar[tuple[str, ...]] = ("model_vocab_size",)

    tags: list[str] | None = None
    # a byte-level BPE (RoBERTa's) reads each word after a space, the first one too, as
    # transformers' is_split_into_words=True with add_prefix_space=True does; a run made
    # before read the first word without: it keeps reading so (predict, evaluate, export)
    words_spaced: bool = field(default=True, metadata={"absent": False})


class TagRunConfig(RunSettings[TagSettings, SequenceClassifierConfig, TagDerived]):
    """The settings of a tag run: ``cfg.model`` is attnlab's own encoder's config (a run from a
    pretrained encoder builds its ``BertClassifierConfig`` from the same settings)."""

    model_keys = {"vocab_size": "model_vocab_size"}


class TagTask(Task):
    """``attnlab train tag``: a BIO tag for every word of the user's sentences."""

    name = "tag"
    help = "token classification (BIO tags: named entities, chunks) on your own file"
    run_config = TagRunConfig
    # the entity scores over the whole split (seqeval's), the words' accuracy
    val_metrics = ("val_loss", "val_acc", "val_f1", "val_precision", "val_recall")
    model_flags = _MODEL_FLAGS
    overrides = dict(pretrained.ENCODER_OVERRIDES)  # a copy: a task may change its own
    default_notes = {"max_len": f"{pretrained.OWN_MAX_LEN} words; with --init, the subwords the model holds"}
    init_model_types = INIT_MODEL_TYPES["tag"]
    # `export --hf` writes a run from --init of a BERT-family checkpoint (runtime.export_hf)
    capabilities = Capabilities(holds_out_fractions=True,
                                hf_auto_class="AutoModelForTokenClassification")

    def runtime(self) -> Runtime:
        """``runtime.py`` of this package (torch, the model, training), imported on first use."""
        from . import runtime

        return runtime

    def adapt_layout(self, cfg: dict[str, Any]) -> dict[str, Any]:
        """The encoder is everything before the per-token head (classify's cut)."""
        return {"blocks": cfg["num_layers"], "encoder": True, "attention": True}

    def init_settings(self, source) -> dict[str, Any]:
        """What ``--init DIR`` fixes: a Hugging Face BERT-family encoder's shape and
        architecture; an attnlab tag run's, as for any task, and its architecture."""
        if source.kind == "run":
            own = super().init_settings(source)
            return {**own, **pretrained.run_settings(source.config, source.path)}
        return pretrained.settings_of_config(source.model_type, source.config,
                                             where=source.path)

    def check_settings(self, cfg: dict[str, Any], *, typed_only: bool = False) -> Any:
        """--max-len not given: 256 words, or with a pretrained encoder all it holds."""
        pretrained.resolve_max_len(cfg)
        return super().check_settings(cfg, typed_only=typed_only)

    def unused_settings(self, cfg: dict[str, Any]) -> list[tuple[list[str], str]]:
        """A pretrained encoder's fields only with --init; the word vocabulary only without;
        each format's columns only where a file is in that format."""
        out = []
        if cfg.get("arch", "transformer") == "transformer":
            out.append(([f.name for f in fields(PretrainedEncoderFields)],
                        "only with --init of a pretrained encoder (read from its checkpoint)"))
        if cfg.get("init"):
            out.append((["vocab_size"], "not with --init: the checkpoint's own tokenizer is "
                                        "used"))
        files = [cfg.get(k) for k in ("data", "val", "test") if cfg.get(k)]
        named = [file_kind(f) != "conll" for f in files]  # JSON Lines or columnar: named fields
        if files and all(named):
            out.append((["tag_column"], "only for CoNLL files (these are JSON Lines, Parquet "
                                        "or datasets directories)"))
        if files and not any(named):
            out.append((["tokens_column", "tags_column"], "only for JSON Lines, Parquet and "
                                                          "datasets files (these are CoNLL)"))
        return out

    def unrecorded_settings(self, cfg: dict[str, Any]) -> list[str]:
        """What ``unused_settings`` names, but the format's columns: ``evaluate --data`` may
        read a file of the other format, with the columns the run was given."""
        kept = {"tag_column", "tokens_column", "tags_column"}
        return [name for name in super().unrecorded_settings(cfg) if name not in kept]

    def check_columns(self, cfg: dict[str, Any]) -> None:
        """The words' and the tags' fields: names, and two different ones (``validate``, and
        ``attnlab evaluate --data FILE`` given the same flags)."""
        for key in ("tokens_column", "tags_column"):
            if not isinstance(cfg[key], str) or not cfg[key].strip():
                raise UsageError(f"{flag(key)} must be a field name, got {cfg[key]!r}")
        if cfg["tokens_column"] == cfg["tags_column"]:
            raise UsageError(f"--tokens-column and --tags-column are both "
                             f"{cfg['tokens_column']!r}; they must name two different fields")

    def validate(self, cfg: dict[str, Any]) -> dict[str, Any]:
        """The vocabulary or the pretrained encoder's length, the columns; then the files,
        read now so that a data error comes before the run directory is written, and pinned
        in ``data_sha256``. Returns the splits and, under ``"init"``, the Hugging Face
        checkpoint ``--init`` names (None for a run), read now so that a corrupt one is
        refused before the run directory exists."""
        if cfg.get("arch", "transformer") != "transformer":
            pretrained.check_pretrained(cfg)
        elif small := vocab_too_small("word", cfg["vocab_size"]):
            raise UsageError(small)
        self.check_columns(cfg)
        splits: dict[str, Any] = read_and_pin(cfg, self.config_class().from_values)
        check_entities(splits["train"], resume=bool(cfg.get("resume")))
        seen = known_tags(splits["train"])
        for key in ("val", "test"):
            check_tags(splits[key], seen, key)
        said = held_out_notes(cfg, splits)  # printed once every check here passed
        if not cfg.get("resume"):  # a run resumed keeps its reading (``TagDerived``)
            cfg["words_spaced"] = True
        if cfg.get("init") and not cfg.get("resume"):
            splits["init"] = pretrained.read_init(cfg["init"], cfg["init_sha256"], task="tag",
                                                  max_len=cfg["max_len"])
            said += init_notes(
                splits["init"], [" ".join(words) for words in splits["train"].words],
                "the training sentences")
        for note in said:
            print(note, file=sys.stderr, flush=True)
        return splits

TASKS = {"tag": TagTask()}
