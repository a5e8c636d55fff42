"""``attnlab train lm --data PATH``: a decoder-only language model on the user's own text.

PATH is a directory written by ``attnlab prepare`` (memory-mapped token files, streamed from
disk), or a text file, prepared on the fly into ``RUN_DIR/data``. Training draws random windows
of ``--block-size`` + 1 tokens from train.bin; ``val_loss`` (mean next-token cross-entropy in
nats) and ``val_perplexity`` = exp(val_loss) are measured on non-overlapping windows of val.bin.

This module is the task's spec (``attnlab.tasks.base``): its settings, defaults and checks, with
no torch, so that ``attnlab train lm`` refuses a bad flag or corpus before torch is loaded. The
heavy half (corpus, model, ``lm_metrics``, training, generation) is ``attnlab.tasks.lm.runtime``.

Examples:
    >>> TASKS["lm"].defaults["block_size"], TASKS["lm"].defaults["tokenizer"]
    (128, 'char')
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ...models.configs import CausalLMConfig
from ...runs import check_data_files
from ...settings import AdaptSettings, setting
from ...settings import defaults as defaults_of
from ...tokenizers import TOKENIZER_KINDS
from ..base import Runtime, Task, config_from_run, model_defaults

__all__ = ["LMTask", "LMSettings", "TASKS", "model_config_of", "check_corpus"]


@dataclass
class LMSettings(AdaptSettings):
    """The lm task's own settings (its model's are ``CausalLMConfig``'s)."""

    data: str = setting(None, help="a directory from `attnlab prepare`, or a UTF-8 text file",
                        metavar="PATH", optional=True)  # required: validate says how to get one
    tokenizer: str = setting("char", help="for a text file: char, word or bpe",
                             choices=tuple(TOKENIZER_KINDS))
    vocab_size: int = setting(None, help="for a text file: vocabulary cap (char/word) or size "
                                         "(bpe)", low=5, optional=True)
    block_size: int = setting(128, help="context length in tokens, the model's max_len", low=2)
    val_batches: int = setting(20, help="validation batches for val_loss", low=1)
    # no flag: set in a --config file (the length of `attnlab predict`'s continuation)
    predict_tokens: int = setting(100, help="tokens `attnlab predict` continues its input by",
                                  low=1, flag=False)


def model_config_of(cfg: dict[str, Any]) -> CausalLMConfig:
    """The ``CausalLMConfig`` of a run's configuration: its fields by name, the context length
    ``block_size`` as ``max_len`` (``vocab_size`` is the prepared corpus' once ``run`` set it).

    Examples:
        >>> from attnlab.tasks import SHARED_DEFAULTS
        >>> model_config_of({**SHARED_DEFAULTS, "vocab_size": 70, "block_size": 32}).max_len
        32
    """
    return config_from_run(CausalLMConfig, cfg, max_len=cfg["block_size"])



def check_corpus(cfg: dict[str, Any], data_dir: str | Path, purpose: str) -> None:
    """``attnlab.runs.check_data_files`` on each file of the corpus identity a run recorded
    (``cfg["corpus_sha256"]``: meta.json and tokenizer.json), named as --data's file; ``purpose``
    is "resume" or "evaluate" (it words the message)."""
    for name, digest in cfg["corpus_sha256"].items():
        check_data_files({"data": str(Path(data_dir) / name), "data_sha256": {"data": digest}},
                         purpose=purpose)


class LMTask(Task):
    """``attnlab train lm``: a ``CausalLM`` trained on --data; its heavy half is
    ``attnlab.tasks.lm.runtime``."""

    name = "lm"
    help = "train a decoder-only (GPT-style) language model on your text (--data FILE or DIR)"
    has_tokenizer = True
    model_config = CausalLMConfig  # its flags: every exposed field (--positional, ...)
    settings = LMSettings
    defaults: dict[str, Any] = {
        **model_defaults(CausalLMConfig), **defaults_of(LMSettings),
        "activation": "gelu", "model_dim": 128, "num_heads": 4, "num_layers": 4,
        "dim_feedforward": 512, "dropout": 0.1, "norm_first": True, "batch_size": 32,
        "max_steps": 2000, "lr": 1e-3, "warmup": 100,
        "precision": "auto",  # bf16-mixed where it pays: 1.33x per step, same loss (scale.md)
        # The GPT recipe (nanoGPT's): decay on matrices, beta2 0.99 for small batches of
        # tokens, and dropout on the attention weights as well (None: --dropout's value)
        "weight_decay": 0.1, "beta2": 0.99, "attention_dropout": None,
    }
    default_notes = {"attention_dropout": "as --dropout"}

    def runtime_module(self) -> Runtime:
        """``runtime.py`` of this package (torch, the model, training), imported on first use."""
        from . import runtime

        return runtime

    def check_settings(self, cfg: dict[str, Any]) -> None:
        """--attention-dropout not given: the same as --dropout (recorded in config.yaml)."""
        if cfg.get("attention_dropout") is None:
            cfg["attention_dropout"] = cfg["dropout"]
        super().check_settings(cfg)

    def unused_settings(self, cfg: dict[str, Any]) -> list[tuple[list[str], str]]:
        """A prepared corpus has its tokeniser already."""
        if cfg.get("data") and Path(cfg["data"]).is_dir():
            return [(["tokenizer", "vocab_size"],
                     f"for a text file only; --data {cfg['data']} is a prepared corpus, whose "
                     f"tokeniser is its tokenizer.json (prepare another with `attnlab prepare`)")]
        return []

    def unrecorded_settings(self, cfg: dict[str, Any]) -> list[str]:
        """None: a prepared corpus's tokeniser and vocabulary size are the run's, recorded."""
        return []

    def validate(self, cfg: dict[str, Any]) -> None:
        """--data: a prepared corpus whose splits each hold a window of --block-size + 1 tokens,
        or a non-empty text file; on --resume, the one the run started with. Everything here is
        refused before the run directory is created (issue #8)."""
        if not cfg.get("data"):
            raise UsageError("--data is required: a directory from `attnlab prepare` or a text file")
        data = Path(cfg["data"])
        if data.is_dir():
            self._check_corpus_dir(cfg, data)
            _record_tokenizer(cfg, data)
        elif not data.is_file():
            raise UsageError(f"--data: not found: {data}")
        elif data.stat().st_size == 0:
            raise UsageError(f"--data {data}: the file is empty")
        elif not cfg.get("resume") and data.stat().st_size + 1 < 10 * cfg["block_size"]:
            # The validation split is a tenth of the tokens, and needs one window of
            # --block-size + 1; no tokeniser makes more tokens than bytes (+1 for the EOS), so
            # a file this small is refused now rather than after the run directory is made.
            raise UsageError(f"--data {data}: {data.stat().st_size} bytes are too few for "
                             f"--block-size {cfg['block_size']} (its validation tenth must hold "
                             f"one window of --block-size + 1 tokens); give at least "
                             f"{10 * cfg['block_size']} bytes of text or lower --block-size")
        elif cfg.get("resume") and cfg.get("data_sha256"):
            check_data_files(cfg, purpose="resume")
        if cfg.get("resume") and cfg.get("out") and (Path(cfg["out"]) / "data").is_dir():
            _record_tokenizer(cfg, Path(cfg["out"]) / "data")  # what a text file became

    @staticmethod
    def _check_corpus_dir(cfg: dict[str, Any], data: Path) -> None:
        from ...data.corpus_meta import SPLITS, read_meta  # a light reader: no numpy, no torch

        meta = read_meta(data)
        if cfg.get("resume") and cfg.get("corpus_sha256"):
            check_corpus(cfg, data, "resume")
        for split in SPLITS:
            if meta[f"{split}_tokens"] < cfg["block_size"] + 1:
                raise UsageError(f"--block-size {cfg['block_size']}: {data}/{split}.bin holds "
                                 f"{meta[f'{split}_tokens']} tokens, fewer than one window of "
                                 f"--block-size + 1; lower --block-size")

    def memory_estimate(self, cfg: dict[str, Any]) -> list[tuple[str, float]]:
        """The default's weights, plus the learned position table (--positional learned):
        --block-size x --model-dim numbers, with their gradient and AdamW's two moments."""
        found = super().memory_estimate(cfg)
        if cfg.get("positional") == "learned":
            T, D = cfg.get("block_size") or 0, cfg.get("model_dim") or 0
            found.append((f"the learned position table ({T:,} x {D:,})", 16 * T * D))
        return found

    # ---- attnlab generate (the heavy half: runtime.encode_prompt) ------------------------
    def encode_prompt(self, tokenizer, text: str, *, what: str = "--prompt") -> list[int]:
        """The token ids of a prompt; ``UsageError`` naming ``what`` if it encodes to none."""
        from . import runtime

        return runtime.encode_prompt(self, tokenizer, text, what=what)


TASKS = {"lm": LMTask()}


def _record_tokenizer(cfg: dict[str, Any], data: Path) -> None:
    """config.yaml says the tokeniser the prepared corpus ``data`` was made with: a new run
    records it (a prepared --data brings its own); a resumed run's config.yaml must still say
    it (an edited ``tokenizer:`` would describe a run that was not trained)."""
    from ...data.corpus_meta import read_meta

    kind = read_meta(data).get("tokenizer")
    if kind is None or kind == cfg.get("tokenizer"):
        return
    if cfg.get("resume"):
        raise UsageError(f"--resume: {cfg['out']}/config.yaml says tokenizer: "
                         f"{cfg.get('tokenizer')}, but the run's corpus {data} was prepared with "
                         f"the {kind} tokeniser; put tokenizer: {kind} back, or start a new run")
    cfg["tokenizer"] = kind
