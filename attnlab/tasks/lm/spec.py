"""``attnlab train lm --data PATH``: a decoder-only language model on the user's own text.

PATH is a directory written by ``attnlab prepare`` (memory-mapped token files, streamed from
disk), or a text file, prepared on the fly into ``RUN_DIR/data``. Training draws random windows
of ``--block-size`` + 1 tokens from train.bin; ``val_loss`` (mean next-token cross-entropy in
nats) and ``val_perplexity`` = exp(val_loss) are measured on non-overlapping windows of val.bin.

This module is the task's spec (``attnlab.tasks.base``): its settings, defaults and checks, with
no torch, so that ``attnlab train lm`` refuses a bad flag or corpus before torch is loaded. The
runtime module, the part that imports torch (corpus, model, ``lm_metrics``, training,
generation), is ``attnlab.tasks.lm.runtime``.

Examples:
    >>> TASKS["lm"].defaults["block_size"], TASKS["lm"].defaults["tokenizer"]
    (128, 'char')
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ...activation_names import hf_activation
from ...errors import UsageError
from ...interop.gguf import is_gguf
from ...interop.config_rules import heads_divide_width
from ...interop.llama_config import llama_family_settings
from ...interop.source import (ATTENTION_DROPOUT_KEYS, INIT_MODEL_TYPES, LLAMA_TYPES,
                                checkpoint_dropout, weights_file)
from ...models.configs import ARCH_PARTS, CausalLMConfig, lm_parts_broken
from ...settings import (AdaptSettings, absent_values, as_typed, flag, label_smoothing_setting,
                         setting)
from ...tokenizers import TOKENIZER_KINDS
from ...run_config import RunSettings
from ...runs import read_json
from ...tokenizers import vocab_too_small
from ..base import Capabilities, Runtime, Task
from ..memory import activations_in_host_memory, step_activations, weight_bytes, weights
from ...data.chat_rows import is_rows_file
from .checks import (check_data, check_init_corpus, check_init_vocabulary, check_rows,
                     init_is_run, init_tokenizer, is_prepared)
from .recipes import RECIPES, recipe_text

__all__ = ["LMTask", "LMSettings", "TASKS", "gpt2_settings", "llama_settings", "INIT_TOKENIZER"]

INIT_TOKENIZER = "hf"  # --tokenizer of a run whose tokenizer is a checkpoint's own

# config.json's GPT2Config values where the file leaves them out (transformers' defaults)
_GPT2_DEFAULTS = {"n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024,
                  "n_inner": None, "activation_function": "gelu_new",
                  "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True, "vocab_size": 50257}


@dataclass
class LMSettings(AdaptSettings):
    """The lm task's own settings (its model's are ``CausalLMConfig``'s)."""

    data: str = setting(None, help="a directory from `attnlab prepare`, or a UTF-8 text file",
                        metavar="PATH", optional=True)  # required: validate says how to get one
    tokenizer: str = setting("char", help="for a text file: char, word or bpe (hf: an --init "
                                          "checkpoint's own, set by --init)",
                             choices=(*TOKENIZER_KINDS, INIT_TOKENIZER))
    block_size: int = setting(128, help="context length in tokens, the model's max_len (with "
                                        "--init: the training window, at most DIR's positions)",
                              low=2)
    val_batches: int = setting(20, help="validation batches for val_loss", low=1)
    label_smoothing: float = label_smoothing_setting(0.0, absent=0.0)
    recipe: str = setting(None, help="a named set of settings, under --config and the flags "
                                     "(which win): " + "; ".join(
                                         f"{k}: {recipe_text(k)}" for k in RECIPES),
                          choices=tuple(RECIPES), optional=True, absent=None)
    # no flag of train's: set in a --config file; `attnlab predict --max-new-tokens`
    # chooses the length at prediction time, this run's value its default
    predict_tokens: int = setting(100, help="the default of `attnlab predict "
                                            "--max-new-tokens` for this run",
                                  low=1, flag=False, absent=100)


@dataclass
class LMDerived:
    """What an lm run derives from its prepared corpus (``runtime._corpus_of_run``): where it
    is, its token type, the digests that identify it; and it resolves --data (made absolute
    when it is a text file) and the vocabulary size (the corpus's)."""

    resolves: ClassVar[tuple[str, ...]] = ("data", "vocab_size")

    data_dir: str | None = None
    dtype: str | None = None
    # None: no corpus identity recorded (evaluate then checks nothing; docs/compatibility.md),
    # as for a new run until ``pin_corpus`` derives it
    corpus_sha256: dict[str, str] | None = field(default=None, metadata={"absent": None})
    # --data FILE.jsonl (instruction rows): "chat" (rendered by the --init checkpoint's chat
    # template) or "plain" (prompt + response + eos); None: a text corpus
    instruction: str | None = field(default=None, metadata={"absent": None})


class LMRunConfig(RunSettings[LMSettings, CausalLMConfig, LMDerived]):
    """The settings of an lm run: ``cfg.model`` is the ``CausalLM``'s config."""


class LMTask(Task):
    """``attnlab train lm``: a ``CausalLM`` trained on --data; its runtime module (the part
    that imports torch) is ``attnlab.tasks.lm.runtime``."""

    name = "lm"
    help = "train a decoder-only (GPT-style) language model on your text (--data FILE or DIR)"
    run_config = LMRunConfig  # its model flags: every field with a flag (--positional, ...)
    overrides: dict[str, Any] = {
        "model_dim": 128, "dim_feedforward": 512, "dropout": 0.1, "batch_size": 32,
        "max_steps": 2000,
        "precision": "auto",  # bf16-mixed where it pays: faster steps, same loss (scale.md)
        # The GPT recipe (nanoGPT's): decay on matrices, beta2 0.99 for small batches of
        # tokens, and dropout on the attention weights as well (None: --dropout's value)
        "weight_decay": 0.1, "beta2": 0.99, "attention_dropout": None,
        # and none inside the feed-forward network (GPT-2's block); a run without the key in
        # config.yaml reads --dropout's value there (CausalLMConfig's None)
        "ff_dropout": 0.0,
    }
    default_notes = {"attention_dropout": "as --dropout"}
    init_model_types = INIT_MODEL_TYPES["lm"]
    recipes = RECIPES  # --recipe NAME (attnlab.tasks.lm.recipes)
    # int8 decoding was faster from 256 wide (benchmarks/RESULTS.md, "quantize_where");
    # predict continues its input token by token, as generate does with a prompt
    capabilities = Capabilities(quantizable=True, int8_faster_from=256, generates=True,
                                hf_auto_class="AutoModelForCausalLM", encode_prompt=True,
                                attention_kind="causal")

    def val_metrics_off(self, cfg: dict[str, Any]) -> dict[str, str]:
        """Without --val-every an lm run validates once, at its end (its batches are drawn
        from the whole corpus: there are no epochs to validate after): none during training."""
        if cfg.get("val_every"):
            return {}
        return dict.fromkeys(self.val_metrics, "lm validates at the end of the run only; give "
                                               "--val-every N")

    def runtime(self) -> Runtime:
        """``runtime.py`` of this package (torch, the model, training), imported on first use."""
        from . import runtime

        return runtime

    def init_settings(self, source) -> dict[str, Any]:
        """What --init fixes: a Llama-family directory's settings (``llama_settings``); a
        GPT-2 directory's sizes, activation, LayerNorm epsilon, tied
        head, vocabulary (its embedding rows, which may be more than its tokenizer's ids) and
        context length (``max_len``: --block-size may be shorter), with its tokenizer; an lm
        run's model settings, tokenizer and context length (``gpt2_settings``)."""
        if source.kind == "hf" and source.model_type in LLAMA_TYPES:
            return llama_settings(source.config, source.path)
        if source.kind == "hf":
            return gpt2_settings(source.config, source.path)
        found = super().init_settings(source)
        run = source.config  # (what a finished lm run records; a key it lacks is left free,
        # but for the parts a run made before they existed trained with: GPT-2's block)
        found.update({k: v for k, v in absent_values(CausalLMConfig).items()
                      if k not in run and k in self.model_settings() and "dropout" not in k})
        max_len = run.get("max_len") or run.get("block_size")  # its model's positions
        found.update({k: v for k, v in (("tokenizer", run.get("tokenizer")),
                                        ("vocab_size", run.get("vocab_size")),
                                        ("max_len", max_len)) if v is not None})
        return found

    def init_defaults(self, source) -> dict[str, tuple[Any, str]]:
        """A Llama-family checkpoint's dropout, which a fine-tune keeps unless told otherwise
        (as a GPT-2 run keeps its ``resid_pdrop``): none on the embeddings and the residual
        stream (Llama, Qwen and Mistral have none there), and config.json's
        ``attention_dropout`` (0.0 in every published one) on the attention weights, not lm's
        default 0.1 for both. A GPT-2 directory's ``attn_pdrop`` likewise on the attention
        weights where it differs from ``Task.init_defaults``' ``resid_pdrop`` (else, and for a
        GPT-2 GGUF file, which records neither: --dropout's value); other checkpoints:
        ``Task.init_defaults``."""
        if source.kind != "hf" or source.model_type not in LLAMA_TYPES:
            found = super().init_defaults(source)
            attention = checkpoint_dropout(source, ATTENTION_DROPOUT_KEYS)
            residual = found.get("dropout", (None,))[0]
            # equal to resid_pdrop (0.1 in every published GPT-2): --dropout's value, as
            # before, which a --dropout given moves too; a GGUF file records neither
            if attention is not None and attention[0] != residual and not is_gguf(source.path):
                found["attention_dropout"] = (attention[0], f"config.json's {attention[1]}")
            return found
        attention = source.config.get("attention_dropout") or 0.0
        where = ("config.json's attention_dropout" if not is_gguf(source.path) else
                 f"{source.model_type} family's attention_dropout (a GGUF file records none)")
        return {"dropout": (0.0, f"{source.model_type} block, which has no dropout outside "
                                 f"attention"),
                "attention_dropout": (float(attention), where)}

    def heads_split_width(self, cfg: dict[str, Any]) -> bool:
        """Whether --model-dim is split among --num-heads: not when --head-dim gives the
        heads a width of their own (the queries are then --num-heads x --head-dim wide)."""
        return cfg.get("head_dim") is None

    def init_fits(self, cfg: dict[str, Any]) -> dict[str, tuple[Any, str]]:
        """--block-size at most the positions the --init model reads (its ``max_len``)."""
        if cfg["block_size"] <= cfg.get("max_len", cfg["block_size"]):
            return {}
        what = ("--block-size" if init_is_run(cfg["init"])
                else "the file's context_length" if str(cfg["init"]).endswith(".gguf")
                else "n_positions" if cfg.get("positional") == "learned"  # GPT-2's table
                else "max_position_embeddings")
        return {"block_size": (cfg["max_len"], f"--init {cfg['init']}'s model reads at most "
                                               f"{cfg['max_len']} positions ({what})")}

    def check_settings(self, cfg: dict[str, Any], *, typed_only: bool = False) -> Any:
        """--attention-dropout not given: the same as --dropout (recorded in config.yaml);
        --arch sets its parts (a part flag that disagrees was refused by ``unused_settings``)."""
        if cfg.get("attention_dropout") is None:
            cfg["attention_dropout"] = cfg["dropout"]
        cfg.update(ARCH_PARTS.get(cfg.get("arch"), {}))
        return super().check_settings(cfg, typed_only=typed_only)  # instruction rows, for ``run``'s ``checked``

    def unused_settings(self, cfg: dict[str, Any]) -> list[tuple[list[str], str]]:
        """A prepared corpus has its tokeniser already (and --init's must be it); instruction
        rows are validated whole, so --val-batches caps nothing there; a gated
        feed-forward network has its own activation (SwiGLU's SiLU, GeGLU's GELU); --arch
        sets its parts, so a part flag that disagrees is refused."""
        unused = []
        if cfg.get("data") and is_prepared(cfg["data"]):
            unused.append((["tokenizer", "vocab_size"],
                           f"for a text file only; --data {cfg['data']} is a prepared corpus, "
                           f"whose tokeniser is its tokenizer.json (prepare another with "
                           f"`attnlab prepare`)"))
        elif cfg.get("data") and is_rows_file(cfg["data"]):
            unused.append((["val_batches"],
                           f"for a text corpus only; --data {cfg['data']} holds instruction "
                           f"rows, whose every held-out row is validated (docs/finetuning.md)"))
        parts = ARCH_PARTS.get(cfg.get("arch"), {})
        if differ := [k for k, v in parts.items() if cfg.get(k) != v]:
            sets = ", ".join(as_typed(k, v) for k, v in parts.items())
            unused.append((differ, f"--arch {cfg['arch']} sets {sets}; drop it, or leave --arch "
                                   f"out and give the parts"))
        if (ff := parts.get("ff", cfg.get("ff", "mlp"))) != "mlp":
            unused.append((["activation"], f"for --ff mlp; --ff {ff} gates with its own "
                                           f"activation"))
        return unused

    def unrecorded_settings(self, cfg: dict[str, Any]) -> list[str]:
        """None: a prepared corpus's tokeniser and vocabulary size are the run's, recorded
        (and --activation stays recorded beside a gated --ff, which does not read it)."""
        return []

    def validate(self, cfg: dict[str, Any]) -> Any:
        """--data: a prepared corpus whose splits each hold a window of --block-size + 1 tokens,
        a non-empty text file, or instruction rows (a .jsonl file, with --init: returns its
        rows, ``checks.check_rows``); on --resume, the one the run started with. Everything here is
        refused before the run directory is created (``checks.check_data``). First the model's
        settings against each other (``lm_parts_broken``: the rules ``CausalLMConfig``, and so
        ``attnlab.load``, checks too), each already in its own range."""
        if broken := lm_parts_broken(cfg, flag):
            raise UsageError(broken)
        if not cfg.get("data"):
            raise UsageError("--data is required: a directory from `attnlab prepare` or a text file")
        if is_rows_file(cfg["data"]) and not is_prepared(cfg["data"]):
            rows = check_rows(cfg, _check_init)  # instruction rows (``checks.check_rows``)
            if cfg.get("resume"):
                return rows
            _check_files(cfg)
            return _encoded(cfg, rows)
        if cfg.get("init") and not cfg.get("resume"):
            _check_init(cfg)
        elif (cfg.get("tokenizer") == INIT_TOKENIZER and not is_prepared(cfg["data"])
              and not cfg.get("resume")):
            raise UsageError(f"--tokenizer {INIT_TOKENIZER} is a pretrained checkpoint's own "
                             f"tokenizer: give --init DIR, or tokenise the text with `attnlab "
                             f"prepare FILE... --tokenizer DIR --out CORPUS`")
        if not is_prepared(cfg["data"]) and (small := vocab_too_small(cfg["tokenizer"],
                                                                       cfg.get("vocab_size"))):
            raise UsageError(small)
        check_data(cfg)
        if cfg.get("init") and not cfg.get("resume"):  # last: they load torch, transformers
            _check_files(cfg)
            init_tokenizer(cfg["init"])

    def memory_estimate(self, cfg: dict[str, Any]) -> list[tuple[str, float]]:
        """The ``CausalLM``'s matrices (``memory.weights``: trained ones with their gradient
        and AdamW's two moments): per block the attention's projections (queries and output
        --num-heads x --head-dim wide, keys and values --num-kv-heads x --head-dim) and the
        feed-forward network's two matrices (three when gated); the token embedding (and a
        separate output matrix, --no-tie-weights); the learned position table (--positional
        learned); one training step's activations over --batch-size windows of --block-size
        tokens (``step_activations``; of one token each for instruction rows, which are
        padded to the longest row of their batch), with the scores over the vocabulary where
        its size is known before the run (a prepared corpus's, from its meta.json; --init's;
        a tokeniser fitted to a text file may make fewer than --vocab-size).

        Examples:
            >>> parts = LMTask().memory_estimate({"model_dim": 64, "num_heads": 4,
            ...     "num_layers": 2, "vocab_size": 100, "positional": "rope", "ff": "swiglu",
            ...     "dim_feedforward": 128, "num_kv_heads": 2, "head_dim": 32,
            ...     "accelerator": "cpu"})
            >>> parts[0][0]
            "the model's weights, gradients and optimiser state (~104,704 parameters)"
        """
        d, layers = cfg.get("model_dim") or 0, cfg.get("num_layers") or 0
        heads = cfg.get("num_heads") or 1
        width = cfg.get("head_dim") or d // heads
        kv_heads = cfg.get("num_kv_heads") or heads
        ff = cfg.get("dim_feedforward") or 4 * d
        attention = 2 * d * heads * width + 2 * d * kv_heads * width
        feed_forward = (2 if cfg.get("ff", "mlp") == "mlp" else 3) * d * ff
        tables = 1 if cfg.get("tie_weights", True) else 2
        prepared = bool(cfg.get("data") and is_prepared(cfg["data"]))
        # a prepared corpus's own vocabulary, not --vocab-size (unused there), unless --init's
        vocab = (_corpus_vocab(cfg["data"]) if prepared and not cfg.get("init")
                 else cfg.get("vocab_size") or 0)
        blocks = layers * (attention + feed_forward)
        found = weights(cfg, blocks + tables * vocab * d, in_blocks=blocks)
        if cfg.get("positional") == "learned" and activations_in_host_memory(cfg):
            T = cfg.get("max_len") or cfg.get("block_size") or 0
            found.append((f"the learned position table ({T:,} x {d:,})",
                          weight_bytes(cfg, T * d)))
        known = cfg.get("init") or prepared
        # instruction rows are padded to the batch's longest row, not to --block-size: count
        # one token a row, the least the data can hold
        rows = bool(cfg.get("data") and is_rows_file(cfg["data"]) and not prepared)
        length, length_flag = (1, "tokens a row, at least") if rows else (
            cfg.get("block_size") or 0, "--block-size")
        return [*found, *step_activations(
            cfg, batch=cfg.get("batch_size") or 0, length=length, length_flag=length_flag,
            ff=ff, outputs=vocab if known else 0,
            outputs_flag="--vocab-size" if not prepared or cfg.get("init")
            else f"the vocabulary of --data {cfg['data']}")]


def _corpus_vocab(data: str) -> int:
    """The vocabulary size a prepared corpus's meta.json states (read without checking the
    token files: ``corpus_meta.read_meta`` does, later); 0 where it says none, which the
    corpus's own check names."""
    try:
        return max(int(read_json(Path(data) / "meta.json")["vocab_size"]), 0)
    except (UsageError, OSError, KeyError, TypeError, ValueError):
        return 0


def _check_init(cfg: dict[str, Any]) -> None:
    """A Hugging Face directory whose tokenizer's ids all have an embedding row; a prepared
    --data made with its tokenizer (``checks``). (--block-size within the model's positions
    is ``LMTask.init_fits``, which ``attnlab train`` applies where it knows whether the value
    was given.)"""
    if not init_is_run(cfg["init"]):
        check_init_vocabulary(cfg["init"], cfg["vocab_size"])
    if is_prepared(cfg["data"]):
        check_init_corpus(cfg["init"], Path(cfg["data"]))


def _encoded(cfg: dict[str, Any], rows) -> Any:
    """The rows of a new run encoded as it will train on them, through --init's tokenizer
    and chat template (``instruct.encode_splits``): a row the template refuses, or whose
    system message it leaves out (``instruct.check_system_rows``), is refused now, in one
    line, before the run directory is written. It imports torch and
    transformers, as the run does next (a rows file always comes with --init)."""
    from types import SimpleNamespace

    from .instruct import check_system_rows, encode_splits

    names = ("instruction", "init", "out", "seed", "block_size")
    settings = SimpleNamespace(**{k: cfg.get(k) for k in names})
    tokenizer = init_tokenizer(cfg["init"])
    check_system_rows(settings, tokenizer, rows)
    return encode_splits(settings, tokenizer, rows)


def gpt2_settings(config: dict[str, Any], path: Path | str = "DIR") -> dict[str, Any]:
    """The lm settings of a GPT-2 ``config.json`` (its dict), by setting name: everything that
    shapes the ``CausalLM`` ``read_checkpoint`` builds from it, so that config.yaml rebuilds
    it. ``UsageError`` naming ``path`` for an activation attnlab does not have.

    Examples:
        >>> s = gpt2_settings({"n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 300})
        >>> s["model_dim"], s["dim_feedforward"], s["activation"], s["max_len"]
        (64, 256, 'gelu_tanh', 1024)
    """
    c = {**_GPT2_DEFAULTS, **{k: v for k, v in config.items() if v is not None}}
    try:
        activation = hf_activation(c["activation_function"], "gpt2")
    except ValueError as e:
        raise UsageError(f"--init {path}: {e}") from None
    try:
        heads_divide_width(c, "n_embd", "n_head")
    except ValueError as e:
        raise UsageError(f"--init {path}: config.json: {e}") from None
    return {"model_dim": c["n_embd"], "num_layers": c["n_layer"], "num_heads": c["n_head"],
            "dim_feedforward": c["n_inner"] or 4 * c["n_embd"],
            "max_len": c["n_positions"],
            "vocab_size": c["vocab_size"], "activation": activation,
            "layer_norm_eps": c["layer_norm_epsilon"], "tie_weights": bool(c["tie_word_embeddings"]),
            # GPT-2's fixed architecture: pre-LN, learned positions, biases everywhere, its
            # block's parts
            "norm_first": True, "positional": "learned", "bias": True, "norm": "layer",
            "arch": "gpt2",
            "ff": "mlp", "qk_norm": False, "num_kv_heads": None, "qkv_bias": None, "head_dim": None,
            "sliding_window": None,
            "tokenizer": INIT_TOKENIZER}


def llama_settings(config: dict[str, Any], path: Path | str = "DIR") -> dict[str, Any]:
    """The lm settings of a Llama, Qwen2, Qwen3 or Mistral ``config.json`` (its dict): the
    ``CausalLM`` ``read_checkpoint`` builds from it (``interop.llama_config``, the one mapping
    ``from_hf`` reads too), with its tokenizer. ``UsageError`` naming ``path`` and the key
    attnlab cannot represent (a rope scaling kind, a head_dim, ...).

    Examples:
        >>> s = llama_settings({"model_type": "llama", "hidden_size": 64, "vocab_size": 300,
        ...     "num_attention_heads": 4, "num_key_value_heads": 2, "rope_theta": 5e5})
        >>> s["num_kv_heads"], s["rope_theta"], s["norm"], s["ff"], s["max_len"]
        (2, 500000.0, 'rms', 'swiglu', 2048)
    """
    try:
        found = llama_family_settings(config)
    except ValueError as e:
        raise UsageError(f"--init {path}: {e}") from None
    return {**found, "tokenizer": INIT_TOKENIZER}


def _check_files(cfg: dict[str, Any]) -> None:
    """A Hugging Face directory whose files hold other tensors than its config.json describes
    or tensors it does not describe (``interop.direct_read``'s ``files_disagree`` where the
    direct reader reads the files, a Llama family's safetensors; ``transformers_files_disagree``
    where transformers does, GPT-2 and ``pytorch_model.bin``: from the files' headers, no
    weight read), or a tied Llama-family one whose files hold a head of other values than its
    embedding (``check_tied_files``), or a ``pytorch_model.bin`` beside its safetensors of other
    weights (``check_twin_weights``): a one-line ``UsageError`` naming it, before the run directory
    exists, not once the run reads the weights. (A GGUF file's tensors: ``gguf_source``.)"""
    if not cfg.get("init") or init_is_run(cfg["init"]) or is_gguf(cfg["init"]):
        return
    from ...interop import direct_read
    from ...interop.checkpoint import reads_directly, refuse_incomplete
    from ...interop.twin_weights import check_twin_weights

    source = Path(cfg["init"])
    config, weights = read_json(source / "config.json"), weights_file(source)
    llama = config.get("model_type") in LLAMA_TYPES
    direct = reads_directly("lm", config.get("model_type"), weights)
    compare = direct_read.files_disagree if direct else direct_read.transformers_files_disagree
    try:
        check_twin_weights(weights)
        refuse_incomplete(source, weights, *compare(config, weights))
        if cfg.get("tie_weights"):
            direct_read.check_tied_files(
                weights, "model.embed_tokens.weight" if llama else "transformer.wte.weight")
    except (UsageError, ValueError) as e:
        raise UsageError(f"--init {source}: {e}") from None


TASKS = {"lm": LMTask()}

