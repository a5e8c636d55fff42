"""What a Hugging Face BERT-family directory fixes of ``attnlab train classify --init DIR``:
the encoder's shape and architecture, read from its ``config.json`` and the names in its
weights file (light: no torch, so a disagreeing flag is refused before torch loads).

    config.json (BERT, RoBERTa, XLM-R, CamemBERT)   (DistilBERT)      -> classify setting
    vocab_size                                      (the same)        vocab_size (unrecorded)
    hidden_size                                     dim               model_dim
    num_attention_heads                             n_heads           num_heads
    num_hidden_layers                               n_layers          num_layers
    intermediate_size                               hidden_dim        dim_feedforward
    max_position_embeddings                         (the same)        max_positions
    type_vocab_size                                 (none: 0)         type_vocab_size
    hidden_act                                      activation        activation
    layer_norm_eps                                  (1e-12)           layer_norm_eps
    pad_token_id                                    (the same)        pad_id
    model_type                                      (the same)        arch
    (post-LN blocks: every family)                                    norm_first False

RoBERTa's family counts positions from ``pad_token_id + 1`` (``position_style="roberta"``).
``pooling`` is ``"cls"`` (BERT's pooler) when the weights hold a pooler. Where they hold none
(DistilBERT, RoBERTa's ``*ForSequenceClassification``, a sentence encoder) it is ``"mean"``
unless ``--pooling cls`` asks for a new head on the first token, the head of the family's
``*ForSequenceClassification``: a D x D layer and ``pooler_activation(arch)`` (DistilBERT's
pre_classifier and ReLU; BERT's and RoBERTa's dense layer and tanh), so that the run exports
to that class. What
``config.json`` says that attnlab cannot build (a decoder, relative positions, an activation
it lacks) is refused when the checkpoint is read (``attnlab.interop.checkpoint``), still before
the run directory is written.

Examples:
    >>> settings_of_config("bert", {"vocab_size": 90, "hidden_size": 32, "num_attention_heads": 4,
    ...     "num_hidden_layers": 2, "intermediate_size": 48, "max_position_embeddings": 64,
    ...     "type_vocab_size": 2, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
    ...     "pad_token_id": 0})["position_style"]
    'absolute'
"""
from __future__ import annotations

import json
import zipfile
from dataclasses import fields
from pathlib import Path
from typing import Any

from ...activation_names import ACT_FROM_HF
from ...errors import UsageError
from ...interop.config_rules import heads_divide_width
from ...interop.source import BERT_FAMILY
from ...models.configs import BertClassifierConfig, PretrainedEncoderFields
from ...settings import setting

__all__ = ["init_settings", "init_defaults", "settings_of_config", "has_pooler",
           "check_pretrained", "max_tokens", "read_init", "pooler_activation", "ARCHS",
           "ROBERTA_STYLE", "arch_setting", "ENCODER_OVERRIDES", "OWN_MAX_LEN", "resolve_max_len",
           "check_room"]

ROBERTA_STYLE = ("roberta", "xlm-roberta", "camembert")  # positions from pad_token_id + 1
ARCHS = ("transformer", *BERT_FAMILY)  # classify's arch: its own encoder, or a checkpoint's

# The defaults of the encoder tasks (classify, tag) that differ from the shared ones; --max-len
# is left None until ``resolve_max_len`` knows whether a pretrained encoder sets it.
ENCODER_OVERRIDES = {"max_len": None, "dim_feedforward": 128, "batch_size": 32, "dropout": 0.1,
                     "threads": 1}
OWN_MAX_LEN = 256  # tokens (tag: words) kept per input by attnlab's own encoder

_POOLER = "pooler.dense.weight"  # the pooler's weight, under any prefix (bert., roberta.)
_HF_HEADS = {"bert": "Bert", "roberta": "Roberta", "xlm-roberta": "XLMRoberta",
             "camembert": "Camembert", "distilbert": "DistilBert"}


def arch_setting() -> Any:
    """The ``arch`` setting of a task that fine-tunes a pretrained encoder (classify, tag): no
    flag; ``--init DIR`` sets it to the checkpoint's model_type, and it picks the model the
    run builds and loads."""
    return setting("transformer", choices=ARCHS, flag=False, absent="transformer",
                   help="the model: attnlab's own encoder ('transformer'), or the model_type "
                        "of the pretrained encoder --init read")


def init_settings(source) -> dict[str, Any]:
    """The classify settings a Hugging Face checkpoint (an ``InitSource`` of kind "hf") fixes.

    Raises:
        UsageError: naming the file when config.json lacks a size or the weights file cannot
            be read.
    """
    if source.kind == "run":
        return run_settings(source.config, source.path)
    settings = settings_of_config(source.model_type, source.config, where=source.path)
    if has_pooler(source.weights):  # a pretrained pooler: pooled by it (init_defaults else)
        settings["pooling"] = "cls"
    return settings


def init_defaults(source) -> dict[str, tuple[Any, str]]:
    """What a Hugging Face checkpoint without a pooler sets unless the user names it: mean
    pooling (``--pooling cls`` gives a new head on the first token instead)."""
    if source.kind != "hf" or has_pooler(source.weights):
        return {}
    head = f"{_HF_HEADS[source.model_type]}ForSequenceClassification"
    return {"pooling": ("mean", f"{source.weights.name} (no pooler: --pooling cls adds a new "
                                f"head on the first token, {head}'s)")}


def pooler_activation(arch: str) -> str:
    """The activation after the pooler of a classifier of ``arch``: the one its family's
    ``*ForSequenceClassification`` head has (DistilBERT's ReLU; BERT's and RoBERTa's tanh)."""
    return "relu" if arch == "distilbert" else "tanh"


def run_settings(config: dict[str, Any], where: str | Path) -> dict[str, Any]:
    """What an attnlab classify run (its config.yaml's ``config``) fixes beyond the settings
    every task's run fixes: a pretrained encoder's architecture and fields (``arch``,
    ``PretrainedEncoderFields``, activation, pad id), so that a run from it is one too.

    Raises:
        UsageError: for a ``--set-column`` run (a set classifier reads no text).
    """
    if config.get("set_column"):
        raise UsageError(f"--init {where} is a --set-column run; --init takes a classify run "
                         f"of texts")
    if config.get("arch", "transformer") == "transformer":
        return {}
    names = ("arch", "activation", "pad_id", *(f.name for f in fields(PretrainedEncoderFields)))
    return {k: config[k] for k in names if k in config}


def settings_of_config(model_type: str, config: dict[str, Any], *,
                       where: str | Path = "config.json") -> dict[str, Any]:
    """The settings of a BERT-family ``config.json`` (``config``) of ``model_type``, but for
    ``pooling``, which the weights say (see the module doc)."""
    distil = model_type == "distilbert"
    names = (("dim", "n_heads", "n_layers", "hidden_dim", "activation") if distil else
             ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
              "hidden_act"))

    def need(key: str, default: Any = None) -> Any:
        value = config.get(key, default)
        if value is None:
            raise UsageError(f"{Path(where) / 'config.json'} has no {key!r}")
        return value

    dim, heads, layers, ff, act = (need(k) for k in names)
    try:
        heads_divide_width(config, names[0], names[1])
    except ValueError as e:
        raise UsageError(f"{Path(where) / 'config.json'}: {e}: is it the config.json saved "
                         f"with these weights?") from None
    pad = config.get("pad_token_id")
    # vocab_size: the embedding's rows, for the memory estimate (--vocab-size is refused)
    return {"arch": model_type, "vocab_size": need("vocab_size"), "model_dim": dim, "num_heads": heads, "num_layers": layers,
            "dim_feedforward": ff, "max_positions": need("max_position_embeddings"),
            "type_vocab_size": 0 if distil else need("type_vocab_size", 2),
            "activation": ACT_FROM_HF.get(act, act),  # an unknown one: refused when read
            "layer_norm_eps": 1e-12 if distil else need("layer_norm_eps", 1e-12),
            "pad_id": 0 if pad is None else pad,
            "position_style": "roberta" if model_type in ROBERTA_STYLE else "absolute",
            # every BERT-family block is post-LN (``attnlab.models.bert``): a --norm-first
            # given would be recorded in config.yaml but train the checkpoint's post-LN blocks
            "positional": "learned", "norm_first": False}


def has_pooler(weights: Path) -> bool:
    """Whether ``weights`` holds BERT's pooler, read without torch: the tensor names of a
    safetensors file's JSON header (of each shard a ``model.safetensors.index.json`` names),
    or the pickled state dict's keys of a PyTorch zip file.

    Raises:
        UsageError: naming the file when it is neither.
    """
    if weights.name.endswith(".index.json"):
        from ...interop.source import weight_files

        return any(has_pooler(shard) for shard in weight_files(weights))
    try:
        if weights.suffix == ".safetensors":
            with open(weights, "rb") as f:
                size = int.from_bytes(f.read(8), "little")
                names = json.loads(f.read(size))
            return any(name.endswith(_POOLER) for name in names)
        with zipfile.ZipFile(weights) as z:  # torch.save's format: <name>/data.pkl
            pickled = next(n for n in z.namelist() if n.endswith("data.pkl"))
            return _POOLER.encode() in z.read(pickled)
    except (OSError, ValueError, StopIteration, zipfile.BadZipFile) as e:
        kind = "safetensors" if weights.suffix == ".safetensors" else "PyTorch weights"
        raise UsageError(f"{weights} is not a readable {kind} file "
                         f"({' '.join(str(e).split()) or type(e).__name__})") from None


def max_tokens(cfg: dict[str, Any]) -> int:
    """The longest text (in tokens, special ones included) the pretrained encoder of ``cfg``
    holds: its position table, less what RoBERTa's counting skips."""
    return BertClassifierConfig.from_dict(cfg).max_tokens


def resolve_max_len(cfg: dict[str, Any]) -> None:
    """--max-len not given (None in ``cfg``): ``OWN_MAX_LEN`` for attnlab's own encoder, or all
    that the pretrained encoder holds (``max_tokens``)."""
    if cfg.get("max_len") is None:
        cfg["max_len"] = (OWN_MAX_LEN if cfg.get("arch", "transformer") == "transformer"
                          else max_tokens(cfg))


def check_pretrained(cfg: dict[str, Any]) -> None:
    """A pretrained encoder comes with ``--init``, and reads at most ``max_tokens`` tokens.

    Raises:
        UsageError: naming the setting.
    """
    if not cfg.get("init"):
        raise UsageError(f"arch {cfg['arch']!r} is a pretrained encoder's: it comes from "
                         f"--init DIR (a Hugging Face directory), never set alone")
    most = max_tokens(cfg)
    if cfg["max_len"] > most:
        raise UsageError(f"--max-len {cfg['max_len']}: --init {cfg['init']}'s model holds at "
                         f"most {most} tokens ({cfg['max_positions']} position embeddings); "
                         f"give --max-len {most} or less")


def read_init(init: str, sha256: str, pooling: str | None = None, *, task: str = "classify",
              max_len: int | None = None):
    """The ``attnlab.interop.checkpoint.Checkpoint`` of a Hugging Face ``--init`` directory
    ``init`` (None for an attnlab run: the runtime loads it), its weights the ones configured
    (``sha256``, config.yaml's ``init_sha256``), its pooler the one ``pooling`` reads (None:
    a model that reads no pooler, tag's). ``task``: the task that reads it (classify, tag),
    whose ``--init`` model types ``read_checkpoint`` takes. ``max_len`` (``validate``'s
    --max-len): checked to leave room for a token of text (``check_room``).

    Raises:
        UsageError: whatever ``read_checkpoint`` refuses, weights that changed since the run
            was configured, and a --max-len that holds only the special tokens.
    """
    if (Path(init) / "config.yaml").is_file():
        if max_len is not None:  # a run of a pretrained encoder adds its special tokens too
            from ...interop.saved import load_any_tokenizer

            check_room(max_len, init, load_any_tokenizer(Path(init) / "tokenizer.json"))
        return None
    from ...interop.checkpoint import read_checkpoint  # torch and transformers

    checkpoint = read_checkpoint(init, task=task)
    if checkpoint.sha256 != sha256:
        raise UsageError(f"--init {init}: {checkpoint.weights.name} changed since the "
                         f"run was configured; start the run again")
    assert pooling in (None, "cls") or not checkpoint.config.pooler, "has_pooler disagrees"
    if max_len is not None:
        check_room(max_len, init, checkpoint.tokenizer)
    return checkpoint


def check_room(max_len: int, init: str, tokenizer) -> None:
    """--max-len must hold a token of text beside the special tokens the checkpoint's
    tokenizer adds to every input ([CLS] and [SEP]). With no room, a classifier's tokenizer
    stopped the run with a traceback, and a tagger trained on no labelled token at all, which
    ended as "the training loss became nan", blaming --lr.

    Raises:
        UsageError: naming --max-len, the special tokens and the least value that works.
    """
    fast = getattr(tokenizer, "tokenizer", None)  # an HFTokenizer's; attnlab's own add none
    added = (fast.num_special_tokens_to_add(False)
             if hasattr(fast, "num_special_tokens_to_add") else 0)
    if max_len <= added:
        raise UsageError(f"--max-len {max_len}: --init {init}'s tokenizer adds {added} special "
                         f"tokens to every input, so no token of the text would be read; give "
                         f"--max-len {added + 1} or more")
