"""``attnlab train translate``: an encoder–decoder Transformer that translates (the task's spec:
its settings, defaults and checks).

Built-in data: numbers spelled out by num2words (``--src en --tgt de``: "three hundred and
forty-two" → "dreihundertzweiundvierzig"), tested on held-out numbers never seen in training;
``--dataset dates``: dates written by babel in two locales ("Friday, March 5, 2021" →
"Freitag, 5. März 2021"). Users' data: ``--data FILE`` with a source and a target column
(CSV, TSV, JSONL, Parquet or a Hugging Face datasets directory).

Why the defaults are fast: the source is tokenised into words (~12 per number) and the German
target into byte-level BPE pieces ("vierhundert", "sieben", "tausend", ...; ~5 per number)
instead of ~50 characters, so training steps and the decoding of the 2,000 test numbers are
short; the test set is decoded greedily in large batches with the KV cache.

The run directory holds ``tokenizer.json`` (the source tokeniser, which reads the user's text)
and ``target_tokenizer.json``; ``attnlab.load(DIR)`` returns ``(model, TranslationTokenizers)``.

The task is four modules of this package. This one imports neither torch nor Lightning
(``attnlab train --help`` and the flag checks run before torch loads); ``data.py`` holds the
text side (splits, language checks, tokenisers), ``scoring.py`` decoding and the metrics, and
``runtime.py`` the batches, the model, training, loading and the commands that use a trained
run.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ...errors import UsageError
from ...interop.config_rules import heads_divide_width
from ...interop.source import INIT_MODEL_TYPES
from ...models.configs import Seq2SeqConfig
from ...settings import (MAX_BEAM, AdaptSettings, beam_setting, label_smoothing_setting,
                         file_setting, length_penalty_setting, setting)
from ...tokenizers import TOKENIZER_KINDS, normalize_setting
from ...run_config import RunSettings
from ..base import Capabilities, Runtime, Task
from ..memory import step_activations

__all__ = ["TranslateSettings", "TranslateTask", "TASKS", "TOKENIZERS", "DATASETS",
           "BLEU_TOKENIZE", "ARCHS", "marian_settings"]

TOKENIZERS = ("auto", *TOKENIZER_KINDS)  # auto: chosen from the data (resolve_tokenizer)
DATASETS = ("numbers", "dates")
# transformer: Seq2SeqTransformer; rnn*: RNNSeq2Seq (a GRU encoder-decoder) with no, additive
# (Bahdanau) or bilinear (Luong) attention: docs/history.md
ARCHS = ("transformer", "rnn", "rnn-additive", "rnn-bilinear")
# the model settings a recurrent --arch has no use for (it reads model_dim, num_layers, dropout)
TRANSFORMER_ONLY = ("num_heads", "dim_feedforward", "num_encoder_layers", "num_decoder_layers",
                    "norm_first", "positional", "tie_embeddings")
BLEU_TOKENIZE = ("auto", "13a", "char", "intl", "none")  # sacrebleu's; auto: resolve_bleu_tokenize
# what fits the tokenisers of a run from scratch; --init DIR brings its own
TOKENIZER_SETTINGS = ("src_tokenizer", "tgt_tokenizer", "vocab_size")


@dataclass
class TranslateSettings(AdaptSettings):
    """The flags of ``attnlab train translate`` besides the shared and the model ones."""

    # absent: what a run lacking the setting reads (config.yaml may leave it out as unused: see
    # unrecorded_settings; docs/compatibility.md)
    arch: str = setting("transformer", choices=ARCHS, absent="transformer",
                        help="the model: the Transformer, or a GRU encoder-decoder without (rnn) "
                             "or with additive / bilinear attention; an rnn uses --model-dim, "
                             "--num-layers and --dropout of the model flags")
    src: str = setting("en", help="source language of the built-in data", metavar="LANG")
    tgt: str = setting("de", metavar="LANG",
                       help="target language (any num2words language; for dates a babel locale)")
    dataset: str = setting("numbers", choices=DATASETS, absent="numbers",
                           help="built-in data: numbers (num2words) or dates (babel locales)")
    data: str = file_setting("your parallel data (CSV/TSV/JSONL/Parquet or a datasets "
                             "directory)", absent=None)
    test: str = file_setting("test pairs (default: 10%% of --data)", absent=None)
    src_column: str = setting("source", help="source column of --data", metavar="NAME")
    tgt_column: str = setting("target", help="target column of --data", metavar="NAME")
    src_tokenizer: str = setting("auto", choices=TOKENIZERS,
                                 help="source tokeniser (auto: word for built-in data written "
                                      "as several words that held-out rows share, else bpe)")
    tgt_tokenizer: str = setting("auto", choices=TOKENIZERS,
                                 help="target tokeniser (auto, as --src-tokenizer)")
    # 260: the byte-level BPE's 256 bytes and the four special tokens come first
    vocab_size: int = setting(400, help="BPE vocabulary size", low=260)
    normalize: str = normalize_setting()
    max_number: int = setting(1_000_000, help="built-in numbers are below N", low=10)
    test_size: int = setting(2000, help="held-out test pairs of the built-in data", low=1)
    val_size: int = setting(200, help="validation pairs", low=1)
    label_smoothing: float = label_smoothing_setting(0.1)  # the paper's (§5.4)
    beam: int = beam_setting(1, help=f"beams when testing, 1 to {MAX_BEAM} (1: greedy)",
                             absent=1)
    length_penalty: float = length_penalty_setting(1.0, help="beam search length penalty",
                                                   absent=1.0)
    bleu_tokenize: str = setting("auto", choices=BLEU_TOKENIZE,
                                 help="sacrebleu tokenisation (auto: char for one-word targets)")
    val_bleu: int = setting(None, low=1, optional=True, absent=None, metavar="N",
                            help="at each validation, translate the first N validation pairs "
                                 "greedily for val_bleu and val_chrf (decoding costs time: off "
                                 "unless given)")


@dataclass
class TranslateDerived:
    """What a translate run derives when it fits its tokenisers (``runtime._fit_tokenizers``):
    the kinds ``auto`` chose, the vocabulary sizes, the longest source and target the model
    must hold; and, when it tests, the BLEU tokenisation ``auto`` chose."""

    # the kinds ``auto`` chose, the model's vocabulary sizes and length, and (--init) whether
    # the checkpoint's head has a final_logits_bias
    resolves: ClassVar[tuple[str, ...]] = ("src_tokenizer", "tgt_tokenizer", "bleu_tokenize",
                                           "src_vocab_size", "tgt_vocab_size", "max_len",
                                           "final_logits_bias")

    max_target_len: int | None = None
    # a source is read without the spaces around it (``data.as_source``); a run from before
    # trained on them as written: it keeps reading so (evaluate, predict, translate, resume)
    sources_stripped: bool = field(default=True, metadata={"absent": False})


class TranslateRunConfig(RunSettings[TranslateSettings, Seq2SeqConfig, TranslateDerived]):
    """The settings of a translate run: ``cfg.model`` is the ``Seq2SeqTransformer``'s config
    (a GRU run reads its sizes from it too)."""


class TranslateTask(Task):
    name = "translate"
    help = "encoder-decoder translation: spelled-out numbers (num2words) or --data FILE"
    run_config = TranslateRunConfig  # model flags: --num-encoder-layers, --positional, ...
    init_model_types = INIT_MODEL_TYPES["translate"]
    # val_bleu and val_chrf: with --val-bleu N only (greedy decoding of N validation pairs)
    val_metrics = ("val_loss", "val_token_accuracy", "val_bleu", "val_chrf")
    # `plot attention` draws the decoder's attention over the source only ("cross"); int8
    # decoding was faster from 384 wide (benchmarks/RESULTS.md, "quantize_where") but
    # translates the texts one at a time (it rounds by each call's range), where float32
    # batches them; evaluate decodes the test split greedily
    capabilities = Capabilities(
        attention_kind="cross", quantizable=True, int8_faster_from=384,
        int8_one_at_a_time=True, generates=True, evaluate_decodes=True,
        hf_auto_class="AutoModelForSeq2SeqLM", translate=True, attention_layers=True,
        evaluate_by_length=True)
    overrides = {
        "model_dim": 128, "dim_feedforward": 512, "batch_size": 128, "max_steps": 600,
        "warmup": 200, "threads": 1,
    }

    def val_metrics_off(self, cfg: dict[str, Any]) -> dict[str, str]:
        """val_bleu and val_chrf without --val-bleu N: decoding is off unless asked for."""
        if cfg.get("val_bleu"):
            return {}
        return dict.fromkeys(("val_bleu", "val_chrf"), "computed with --val-bleu N only (N "
                                                        "validation pairs decoded at each "
                                                        "validation)")

    def memory_estimate(self, cfg: dict[str, Any]) -> list[tuple[str, float]]:
        """The weights (default count), and for the built-in pairs, drawn --batch-size at a
        time whatever --test-size, one training step's activations through the encoder's and
        the decoder's blocks, counted at one token a sentence (their length is the data's).
        Batches of --data are its rows, however big --batch-size: not counted."""
        found = super().memory_estimate(cfg)
        if cfg.get("data") or cfg.get("arch", "transformer") != "transformer":
            return found
        # each stack's count: its own flag, else --num-layers
        stacks = [(side, f"--num-{side}-layers", cfg.get(f"num_{side}_layers"))
                  for side in ("encoder", "decoder")]
        stacks = [(side, name, n) if n else (side, "--num-layers", cfg["num_layers"])
                  for side, name, n in stacks]
        return [*found, *step_activations(
            cfg, batch=cfg["batch_size"], length=1, length_flag="tokens a sentence, at least",
            layers=sum(n for *_, n in stacks),
            layers_named=" + ".join(f"{side} {name} {n:,}" for side, name, n in stacks))]

    def runtime(self) -> Runtime:
        """``runtime.py`` of this package (torch, the model, training), imported on first use."""
        from . import runtime

        return runtime

    def init_settings(self, source) -> dict[str, Any]:
        """The settings a Marian directory fixes (``--init DIR``), read from its config.json:
        the sizes, the activation, Marian's post-LN blocks and sinusoids, whether the head is
        tied, and its special ids (its decoder starts from ``decoder_start_token_id``, the pad
        id); an attnlab translate run's are its recorded ones (``Task.init_settings``).

        Raises:
            UsageError: naming DIR and the config.json setting ``Seq2SeqTransformer`` cannot
                reproduce.
        """
        if source.kind != "hf":  # with what the run's model was built from besides its flags
            kept = ("arch", "activation", "pad_id", "sos_id", "eos_id")
            return {**super().init_settings(source),
                    **{k: source.config[k] for k in kept if k in source.config}}
        return marian_settings(source.config, source.path)

    def validate(self, cfg: dict[str, Any]) -> Any:
        """The languages of the built-in data, what it cannot do (--epochs; more held-out
        numbers than half of --max-number), and the --data files, read now: a malformed one
        fails before the run starts. With ``--init DIR`` (not resumed), DIR's model and
        tokenizer are read now too (``runtime.read_init``), so that corrupt weights or a
        tokenizer that disagrees with them are refused before the run directory exists; they
        are returned, for ``run``, with the data splits their lengths were checked on
        (``runtime.check_init_lengths``), which the run trains on rather than make again."""
        # imported here, not at the top: it loads num2words (its cost: benchmarks/RESULTS.md),
        # which only a translate run needs, and every attnlab command imports this module to
        # build its parser
        from .data import check_files, check_languages

        if not cfg.get("resume"):  # a run resumed keeps its reading (``TranslateDerived``)
            cfg["sources_stripped"] = True
        frozen = self.config_class().from_values  # the readers below read a typed config
        init = None
        if cfg.get("init") is not None and not cfg.get("resume"):
            init = self.runtime().read_init(self, frozen(cfg))
        if cfg["data"] is not None:
            cfg.update(check_files(frozen(cfg)))  # the settings dict records the files' digests
            if init is not None:  # (model, tokenisers, the splits run reads)
                init = self.runtime().check_init_lengths(init, frozen(cfg))
            return init
        check_languages(frozen(cfg))
        if cfg.get("epochs") is not None:
            raise UsageError(f"--epochs: the built-in {cfg['dataset']} are generated without "
                             f"end; use --max-steps")
        held_out = cfg["test_size"] + cfg["val_size"]
        if cfg["dataset"] == "numbers" and 2 * held_out > cfg["max_number"]:
            raise UsageError(f"--test-size + --val-size ({held_out}) must be at most half of "
                             f"--max-number ({cfg['max_number']})")
        if init is not None:  # (model, tokenisers, the splits run reads)
            init = self.runtime().check_init_lengths(init, frozen(cfg))
        return init

    def adapt_layout(self, cfg: dict[str, Any]) -> dict[str, Any]:
        """all-but-last-N counts the decoder's blocks, which train beside a frozen encoder; a
        GRU model has no attention projections (nor blocks: --freeze needs a Transformer too)."""
        transformer = cfg.get("arch", "transformer") == "transformer"
        return {"blocks": cfg.get("num_decoder_layers") or cfg["num_layers"],
                "encoder": True, "attention": transformer, "decoder": transformer}

    def heads_split_width(self, cfg: dict[str, Any]) -> bool:
        """A GRU encoder-decoder has no heads (--model-dim 30 was refused for --num-heads 4,
        and --num-heads for not being used)."""
        return cfg["arch"] == "transformer"

    def unused_settings(self, cfg: dict[str, Any]) -> list[tuple[list[str], str]]:
        """A recurrent --arch has no use for the Transformer's own settings; --data has none
        for the built-in data's, nor the built-in data for the columns of a file."""
        groups = []
        if cfg.get("init") is not None:
            groups.append((list(TOKENIZER_SETTINGS),
                           f"for fitting new tokenizers; --init {cfg['init']} brings its "
                           f"checkpoint's own tokenizer"))
        if cfg.get("arch", "transformer") != "transformer":
            groups.append((list(TRANSFORMER_ONLY),
                           f"for --arch transformer only; --arch {cfg['arch']} (a GRU "
                           f"encoder-decoder) uses --model-dim, --num-layers and --dropout"))
        if cfg.get("data") is not None:
            groups.append((["dataset", "src", "tgt", "max_number", "test_size"],
                           "for the built-in data only; --data's pairs are its --src-column "
                           "and --tgt-column, its test rows --test or a tenth of --data"))
        else:
            groups.append((["src_column", "tgt_column", "test"],
                           "for --data FILE only; the built-in data is --dataset"))
        kinds = {cfg.get("src_tokenizer"), cfg.get("tgt_tokenizer")}
        if cfg.get("init") is None and kinds <= {"char", "word"}:
            groups.append((["vocab_size"],
                           f"the BPE vocabulary's size; --src-tokenizer "
                           f"{cfg['src_tokenizer']} and --tgt-tokenizer {cfg['tgt_tokenizer']} "
                           f"keep every symbol of the training pairs"))
        if cfg.get("beam", 1) == 1:  # taken and ignored, it would mislead
            groups.append((["length_penalty"],
                           "for beam search (--beam N > 1) only; with --beam 1 the test "
                           "translations are greedy"))
        return groups

    def unrecorded_settings(self, cfg: dict[str, Any]) -> list[str]:
        """The other data source's settings, but for --src-column and --tgt-column, by which
        ``evaluate --data FILE`` reads a file's pairs for a run on the built-in data too (and
        --length-penalty, which ``translate --beam N`` of a greedy run uses); a
        recurrent --arch still records the Transformer's settings, as its model is built from
        the same ``Seq2SeqConfig`` (vocabularies, special ids), which requires them."""
        kept = {*TRANSFORMER_ONLY, "src_column", "tgt_column",
                "length_penalty"}  # `translate --beam N` of the run reads it
        if cfg.get("init") is None:  # word and char runs recorded it before it was refused
            kept.add("vocab_size")
        return [name for name in super().unrecorded_settings(cfg) if name not in kept]


def marian_settings(config: dict[str, Any], where: Path) -> dict[str, Any]:
    """The ``attnlab train translate`` settings of a Marian ``config.json`` (``config``, read
    from the directory ``where``): what ``attnlab.interop.marian.marian_to_seq2seq`` builds
    from the same config, without loading the weights.

    Raises:
        UsageError: naming ``where`` and the setting ``Seq2SeqTransformer`` cannot reproduce.

    Examples:
        >>> settings = marian_settings({"d_model": 16, "encoder_layers": 2, "decoder_layers": 1,
        ...     "encoder_attention_heads": 2, "decoder_attention_heads": 2,
        ...     "encoder_ffn_dim": 24, "decoder_ffn_dim": 24, "activation_function": "swish",
        ...     "scale_embedding": True, "pad_token_id": 49, "eos_token_id": 0,
        ...     "decoder_start_token_id": 49}, Path("marian"))
        >>> settings["num_encoder_layers"], settings["activation"], settings["sos_id"]
        (2, 'silu', 49)
    """
    from ...interop.weights import activation  # torch: an --init run trains anyway

    c = dict(config)

    def refuse(why: str):
        return UsageError(f"--init {where}: {why} (config.json)")

    for enc, dec in (("encoder_attention_heads", "decoder_attention_heads"),
                     ("encoder_ffn_dim", "decoder_ffn_dim")):
        if c.get(enc) != c.get(dec):
            raise refuse(f"{enc} {c.get(enc)} and {dec} {c.get(dec)} differ; attnlab's "
                         f"Seq2SeqTransformer has one value for both stacks")
    try:
        heads_divide_width(c, "d_model", "encoder_attention_heads")
    except ValueError as e:
        raise UsageError(f"--init {where}: config.json: {e}") from None
    for name in ("encoder_layerdrop", "decoder_layerdrop"):
        if c.get(name):
            raise refuse(f"{name} {c[name]} (skipping layers while training) is not supported")
    pad, eos = c.get("pad_token_id"), c.get("eos_token_id")
    if not isinstance(pad, int) or not isinstance(eos, int):
        raise refuse(f"pad_token_id {pad!r} and eos_token_id {eos!r} must each be one id")
    start = c.get("decoder_start_token_id")
    try:
        act = activation(c.get("activation_function", "gelu"), "marian")
    except ValueError as e:
        raise refuse(str(e).removeprefix("marian: ")) from None
    scaled = bool(c.get("scale_embedding", False))
    return {"arch": "transformer", "model_dim": c["d_model"],
            "num_heads": c["encoder_attention_heads"], "num_layers": c["decoder_layers"],
            "num_encoder_layers": c["encoder_layers"], "num_decoder_layers": c["decoder_layers"],
            "dim_feedforward": c["encoder_ffn_dim"], "norm_first": False,
            "positional": "sinusoidal", "activation": act,
            # unscaled embeddings are stored divided by √D, so the head cannot share them
            "tie_embeddings": scaled and bool(c.get("tie_word_embeddings", True)),
            "pad_id": pad, "sos_id": pad if start is None else start, "eos_id": eos}


TASKS = {"translate": TranslateTask()}


