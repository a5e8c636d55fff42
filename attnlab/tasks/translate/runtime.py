"""The runtime module of ``attnlab train translate``, the part that imports torch (the spec is
``spec.py``): the batches, the model, training, loading, and the commands that use a trained run
(``predict``, ``evaluate``, ``translate``, ``plot attention``, ``view``, ``evaluate --by-length``,
``export --hf``).

Shapes: B batch, S source tokens, T target tokens (SOS ... EOS), L decoder layers, H heads.

Training feeds the whole target with SOS prepended (teacher forcing); testing decodes greedily
(or with ``--beam``) in large batches with the KV cache, and scores with BLEU, chrF and exact
match (``scoring.py``). After training, ``cross_attention.png`` shows where each
decoder layer looks in the source while it writes the model's translation of the first test
item: the T × S maps that align, for example, "forty-two" with "zweiundvierzig".

Lightning is imported inside ``run`` only: the commands that do not train never load it.
"""
from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader, TensorDataset

from ...data import BatchLoader, numbered_batches
from ...data.tables import CHUNK_ROWS, same_both_readings
from ...errors import UsageError
from ...explorer.collect import collect_layers, with_tokens
from ...explorer.data import Layer
from ...models import Seq2SeqTransformer
from ...models.configs import Seq2SeqConfig
from ...models.rnn_seq2seq import RNNSeq2Seq
from ...notes import progress, said_once, say
from ...run_config import RunSettings
from ...runs import load_weights
from ...settings import check_argument, epoch_steps
from ...tokenizers import note_pieces
from ...viz import plot_attention, plot_by_length
from ...explorer.record import fit_weights_text
from ..base import (FINITE, attends, config_from_run, input_name, input_texts, loads,
                    null_scores, predicts, quantized_run, rng_kept)
from .data import (TranslationTokenizers, builtin_splits, evaluation_pairs, file_splits,
                   fit_tokenizer, pair_chunks, resolve_tokenizer, see_sources, spell_digits,
                   trained_sources)
from .scoring import (LengthTally, Tally, bleu_tokenize_of, check_source_lengths,
                      compute_test_metrics, length_buckets, pad, resolve_bleu_tokenize,
                      scores_by_length, scored_translations, translate_texts, unfinished_note,
                      validation_scores)

__all__ = ["encode_pairs", "stream_batches", "padded_loader", "model_config_of", "build_model",
           "cross_attention_maps", "read_init", "check_init_lengths", "run", "load",
           "check_greedy_penalty", "translate",
           "input_reader", "predict_many", "translation_results", "evaluate", "attention_maps",
           "attention_layers", "evaluate_by_length", "export_hf"]

# where ``attnlab export --hf OUT`` writes the target tokenizer, beside the source one in OUT
TARGET_TOKENIZER_DIR = "target_tokenizer"

# Pairs drawn from the built-in stream to fit the tokenisers on: enough to see every word.
TOKENIZER_SAMPLE = 5000


# ---- batches ----------------------------------------------------------------------------
def encode_pairs(tok: TranslationTokenizers, pairs: list[tuple[str, str]]) -> tuple[Tensor, Tensor]:
    """(src (B, S), tgt (B, T)) of text pairs, each padded with its tokeniser's pad id; targets
    are wrapped in start ... EOS (``TranslationTokenizers.encode_targets``)."""
    src = tok.encode_sources([s for s, _ in pairs])
    tgt = tok.encode_targets([t for _, t in pairs])
    return pad(src, tok.src.pad_id), pad(tgt, tok.tgt.pad_id)


def stream_batches(pairs, tok: TranslationTokenizers, batch_size: int, steps: int):
    """``steps`` fresh training batches of a built-in dataset; batch number n (see
    ``numbered_batches``: different on each DDP rank, and computed directly when a run
    resumes) is drawn by its own generator, seeded from (seed, n)."""
    return numbered_batches(lambda n: encode_pairs(
        tok, pairs.sample(batch_size, seed=f"train/{pairs.seed}/{n}")), steps)


def padded_loader(tok: TranslationTokenizers, pairs: list[tuple[str, str]], batch_size: int):
    """A loader of ready-made padded batches (validation)."""
    batches = [encode_pairs(tok, pairs[i : i + batch_size])
               for i in range(0, len(pairs), batch_size)]
    return DataLoader(batches, batch_size=None)


# ---- the model --------------------------------------------------------------------------
def model_config_of(cfg: RunSettings) -> Seq2SeqConfig:
    """The ``Seq2SeqConfig`` of a run's configuration (``run`` adds the vocabulary sizes and
    ``max_len``; a run without ``positional`` gets the paper's sinusoids).

    Examples:
        >>> from attnlab.tasks import get_task
        >>> cfg = get_task("translate").config(src_vocab_size=40, tgt_vocab_size=50, max_len=64)
        >>> model_config_of(cfg).positional
        'sinusoidal'
    """
    return config_from_run(Seq2SeqConfig, cfg)


def build_model(cfg: RunSettings) -> Seq2SeqTransformer:
    """The model a run's configuration describes (randomly initialised): the one place that
    chooses it, so training and loading always agree.

    Examples:
        >>> from attnlab.tasks import get_task
        >>> sizes = {"src_vocab_size": 40, "tgt_vocab_size": 50, "max_len": 64}
        >>> model = build_model(get_task("translate").config(**sizes))
        >>> type(model).__name__, model.config.max_len
        ('Seq2SeqTransformer', 64)
        >>> type(build_model(get_task("translate").config(**sizes, arch="rnn-additive"))).__name__
        'RNNSeq2Seq'
    """
    arch = cfg.arch  # a run without arch reads "transformer" (its declared absent value)
    if arch == "transformer":
        return Seq2SeqTransformer(model_config_of(cfg))
    config = model_config_of(cfg)  # the vocabularies, width, layers and special ids
    return RNNSeq2Seq(config.src_vocab_size, config.tgt_vocab_size, model_dim=config.model_dim,
                      num_layers=config.num_layers, dropout=config.dropout,
                      attention=arch.removeprefix("rnn").removeprefix("-") or "none",
                      pad_id=config.pad_id, sos_id=config.sos_id, eos_id=config.eos_id)


def _alignment_layers(model, src, tgt):
    """The attention layers of ``model`` reading ``tgt`` after ``src``, without tokens: every
    layer of a Transformer; a recurrent model's one alignment ("cross"). ``UsageError`` for a
    recurrent model without attention, which has none."""
    if not isinstance(model, RNNSeq2Seq):
        return collect_layers(model, src, tgt)
    if model.attention is None:
        raise UsageError("an --arch rnn model has no attention to show (the decoder sees the "
                         "source only through its first state); train rnn-additive or "
                         "rnn-bilinear")
    (weights,) = model.cross_attention(src, tgt)  # (1, 1, T, S)
    return [Layer("attention", "cross", weights[0], "cross")]


def _pair(tok: TranslationTokenizers, src_text: str, translation: str | list[int],
          max_len: int | None = None):
    """(source ids (1, S), decoder input ids (1, T): SOS then the translation, their labels).

    ``translation`` is a text, or the ids the model wrote (``_written``): those are what its
    decoder read, where a text it decoded to "�" (an untrained model's lone bytes) encodes
    back to the replacement character's bytes, and its labels said "�", not which bytes.
    The decoder input is cut at ``max_len`` tokens (the run's ``max_len``, the most the model
    reads; None: not cut): a translation that decodes to broken characters (an untrained
    model's) encodes back to more tokens than were generated."""
    src = torch.tensor(tok.encode_sources([src_text]))  # (1, S)
    whole = (tok.decoder_input(translation) if isinstance(translation, str)
             else [tok.tgt.sos_id, *translation])
    tgt_ids = whole[:max_len]
    # labelled whole, then cut: a character whose bytes the cut divides still shows as itself
    tgt_labels = tok.tgt.labels(whole, skip_special_tokens=False)[:max_len]
    src_labels = tok.source_pieces(src_text)
    return src, torch.tensor([tgt_ids]), src_labels, tgt_labels


def cross_attention_maps(model, tok: TranslationTokenizers, src_text: str,
                         translation: str | list[int], max_len: int | None = None):
    """The cross-attention of every decoder layer while it reads ``translation`` (at most
    ``max_len`` tokens of it) after the source: (L × (H, T, S) maps, the S source tokens, the T
    decoder-input tokens)."""
    src, tgt, src_labels, tgt_labels = _pair(tok, src_text, translation, max_len)
    maps = [layer.weights for layer in _alignment_layers(model, src, tgt)
            if layer.kind == "cross"]  # L × (H, T, S)
    return maps, src_labels, tgt_labels


def _cross_attention_figure(model, tok, src_text: str, cfg: RunSettings, path: Path, *,
                           weights: str) -> None:
    """``cross_attention.png``: the cross-attention of ``model`` reading the ids it writes for
    ``src_text``, searched as the test metrics were (the run's ``--beam``, ``--length-penalty``):
    the translation the run reports, each byte token by its own label."""
    translation = _written(model, tok, src_text, cfg.max_target_len, num_beams=cfg.beam,
                           length_penalty=cfg.length_penalty)
    maps, x_labels, y_labels = cross_attention_maps(model, tok, src_text, translation,
                                                    cfg.max_len)
    plot_attention(maps, x_labels, y_labels, path, kind="cross",
                   title=f"cross-attention (decoder over source) on {src_text!r}\n{weights}")


# ---- training ---------------------------------------------------------------------------
def _splits(cfg: RunSettings):
    """(training pairs or the endless built-in stream, the pairs to fit the tokenisers on,
    validation pairs, test pairs)."""
    if cfg.data is None:
        stream, val, test = builtin_splits(cfg)
        return stream, stream.sample(TOKENIZER_SAMPLE), val, test
    train, val, test = file_splits(cfg)
    return train, train, val, test


def _fit_tokenizers(cfg, sample, val, test, resumed: bool = False):
    """(the run config, the two tokenisers fit on ``sample``): the config with the kinds
    ``auto`` chose and what the model's size depends on (vocabularies, longest source and
    target) derived. ``max_len`` reaches every source the run reads (validation's too) and
    every target validation reads teacher-forced, so that no pair stops the run midway; a run
    ``resumed`` from its checkpoint keeps the ``max_len`` its config.yaml records (one made
    before validation counted may be shorter)."""
    sources, targets, builtin = [s for s, _ in sample], [t for _, t in sample], cfg.data is None
    cfg = cfg.derive(src_tokenizer=resolve_tokenizer(cfg.src_tokenizer, sources, builtin=builtin),
                     tgt_tokenizer=resolve_tokenizer(cfg.tgt_tokenizer, targets, builtin=builtin))
    tok = TranslationTokenizers(
        fit_tokenizer(cfg.src_tokenizer, sources, cfg.vocab_size, cfg.normalize),
        fit_tokenizer(cfg.tgt_tokenizer, targets, cfg.vocab_size, cfg.normalize),
        strip_sources=cfg.sources_stripped)
    note_pieces(tok.src, [s for s, _ in test], "the test sources")  # what word cannot split
    note_pieces(tok.tgt, [t for _, t in test], "the test targets")
    src_len = max(map(len, tok.src.encode_batch([s for s, _ in sample + val + test])))
    tgt_len = max(map(len, tok.tgt.encode_batch([t for _, t in sample])))
    # the decoder reads a validation target as start + pieces (teacher forcing)
    val_len = max(map(len, tok.tgt.encode_batch([t for _, t in val])), default=0) + 1
    max_len = max(64, src_len + 2, 2 * tgt_len + 8, val_len)
    if resumed and cfg.max_len is not None:  # the model's shape as its checkpoint holds it
        max_len = cfg.max_len  # (a learned position table is a weight of that length)
    cfg = cfg.derive(src_vocab_size=tok.src.vocab_size, tgt_vocab_size=tok.tgt.vocab_size,
                     max_target_len=tgt_len + max(4, tgt_len // 2), max_len=max_len)
    return cfg, tok


def read_init(task, cfg: RunSettings) -> tuple[Seq2SeqTransformer, TranslationTokenizers]:
    """(the model, its tokenisers) of ``--init DIR``: a Marian directory
    (``attnlab.interop.checkpoint.read_checkpoint``; its one tokeniser reads the source and
    writes the target) or an attnlab translate run (``load``, as ``attnlab.load`` opens it).
    ``UsageError`` naming DIR for what it cannot be (a run of --arch rnn; every refusal of
    ``read_checkpoint``)."""
    from ...interop.checkpoint import read_checkpoint
    from ...interop.source import reread_init_source

    # DIR as it was when the settings were checked (its digest recorded in init_sha256)
    source = reread_init_source(cfg.init, cfg.init_sha256, task="translate")
    if source.kind == "hf":
        from transformers.utils import logging

        logging.disable_progress_bar()  # "Loading weights" on stderr, before the run's header
        ckpt = read_checkpoint(source.path, task="translate")
        if ckpt.sha256 != source.sha256:
            raise UsageError(f"--init {source.path}: {ckpt.weights.name} changed while it was "
                             f"read; start the run again")
        return ckpt.model, TranslationTokenizers(ckpt.tokenizer, ckpt.tokenizer,
                                                 strip_sources=cfg.sources_stripped)
    run = task.typed(source.config, source.path)  # the --init run's own config.yaml
    if run.arch != "transformer":
        raise UsageError(f"--init {source.path}: a --arch {run.arch} run; "
                         f"--init takes a Transformer's")
    model, tok = load(task, source.path, run)  # the new run reads sources its own way
    return model, replace(tok, strip_sources=cfg.sources_stripped)


def check_init_lengths(init, cfg: RunSettings) -> tuple:
    """``UsageError`` naming ``--data`` (or ``--test``, or the built-in ``--dataset``) when a
    pair of it, encoded by the ``--init`` checkpoint's tokeniser, is longer than its model's
    positions reach. The built-in data is checked on the pairs the run sizes itself by
    (``_splits``: its tokeniser sample, validation and test pairs). Returns ``init`` with
    those splits after it, which ``run`` reads instead of making them again (the built-in
    sample: seconds of num2words)."""
    model, tok = init[:2]
    reach = model.config.max_len
    train, sample, val, test = splits = _splits(cfg)
    if cfg.data is None:
        parts = [(f"--dataset {cfg.dataset}", sample + val + test)]
    else:
        parts = [(f"--data {cfg.data}", train + val),
                 (f"--test {cfg.test}", test) if cfg.test else (f"--data {cfg.data}", test)]
    for where, pairs in parts:
        # the decoder reads a target without its last id (teacher forcing)
        for side, lengths in (("source", map(len, tok.encode_sources([s for s, _ in pairs]))),
                              ("target", (len(ids) - 1 for ids in
                                          tok.encode_targets([t for _, t in pairs])))):
            longest = max(lengths, default=0)
            if longest > reach:
                raise UsageError(f"{where}: a {side} of {longest} tokens; --init "
                                 f"{cfg.init}'s model reads at most {reach}")
    return (model, tok, splits)


def _init_config(cfg, init, sample):
    """(the run config, the model, the tokenisers) of a run from ``--init``: the model's
    weights and the checkpoint's tokenisers, the config deriving what the model holds
    (vocabularies, ``max_len``, a logits bias) and the longest target. The model is rebuilt
    from the config (``build_model``) and the checkpoint's weights copied in, so the run's
    config.yaml alone rebuilds it (``load``, ``--resume``)."""
    model, tok = init
    made = model.config
    tgt_len = max(map(len, tok.encode_targets([t for _, t in sample])))
    cfg = cfg.derive(src_vocab_size=made.src_vocab_size, tgt_vocab_size=made.tgt_vocab_size,
                     max_len=made.max_len, final_logits_bias=made.final_logits_bias,
                     max_target_len=min(made.max_len - 1, tgt_len + max(4, tgt_len // 2)))
    rebuilt = build_model(cfg)
    differ = [name for name, value in made.as_dict().items()
              if name != "dropout" and getattr(rebuilt.config, name) != value]
    if differ:  # the config said one thing, the weights another (a tied head that is not)
        name = differ[0]
        raise UsageError(f"--init {cfg.init}: its model has {name} {getattr(made, name)!r}, "
                         f"its settings give {getattr(rebuilt.config, name)!r}")
    rebuilt.load_state_dict(model.state_dict())
    return cfg, rebuilt, tok


def _train_loader(cfg: RunSettings, train, tok: TranslationTokenizers):
    """(training batches, max_steps, validation interval): the built-in stream is endless, so
    it trains for --max-steps and validates five times; --data trains for --max-steps or
    --epochs and validates once per epoch, or every --val-every steps when given."""
    bs = cfg.batch_size
    if cfg.data is None:
        max_steps = cfg.max_steps
        every = cfg.val_every or max(1, max_steps // 5)
        return stream_batches(train, tok, bs, max_steps), max_steps, every
    loader = BatchLoader(TensorDataset(*encode_pairs(tok, train)), bs, shuffle=True,
                         seed=cfg.seed)
    steps_per_epoch = -(-len(train) // bs)
    max_steps = (epoch_steps(cfg, steps_per_epoch, cfg.epochs) if cfg.epochs
                 else cfg.max_steps)
    return loader, max_steps, cfg.val_every or None  # (the loop caps it at max_steps)


def _start(task, cfg: RunSettings, run_dir: Path, checked, sample, val, test):
    """(the run config, the model holding its first weights, the tokenisers): fit on the data
    and random; --init DIR's (``checked``: read by ``validate`` for a new run; read again and
    checked against init_sha256 for one resumed before its first checkpoint, which keeps the
    tokenisers it saved); or, resumed from its checkpoint, the tokenisers it saved when it
    started (the loop restores the weights)."""
    from ...training.checkpoint import resumes_from_checkpoint, saved_tokenizer_file

    if cfg.init is None:
        resumed = resumes_from_checkpoint(cfg, run_dir)
        cfg, tok = _fit_tokenizers(cfg, sample, val, test, resumed)
        return cfg, build_model(cfg), tok
    if resumes_from_checkpoint(cfg, run_dir):
        return cfg, build_model(cfg), TranslationTokenizers.load(
            run_dir / "tokenizer.json", strip_sources=cfg.sources_stripped)
    saved = saved_tokenizer_file(cfg, run_dir)
    if checked is None:  # resumed: validate read none, before the run was seeded
        with torch.random.fork_rng(devices=[]):  # so it draws what a new run draws
            checked = read_init(task, cfg)
    model, tok = checked
    if saved:
        tok = TranslationTokenizers.load(saved, strip_sources=cfg.sources_stripped)
    return _init_config(cfg, (model, tok), sample)


def run(task, cfg: RunSettings, run_dir: Path,
        checked: Any = None) -> dict[str, float]:
    """Train, test on the held-out pairs and write the run directory (with
    ``cross_attention.png``); return test_exact_match, test_bleu and test_chrf.

    The model and tokenisers: fit on the data and random; with ``--init DIR``, DIR's (read by
    ``validate``: ``checked``), the tokenisers saved by ``fit`` before the first step, so that
    ``--resume`` reads them from the run directory and never from DIR."""
    from ...training import finish, fit  # Lightning: loaded by training only
    from ...training.seq2seq import Seq2SeqModule

    # validate's --init check made the splits already (``check_init_lengths``)
    train, sample, val, test = checked[2] if checked is not None else _splits(cfg)
    cfg, model, tok = _start(task, cfg, run_dir, checked and checked[:2], sample, val, test)
    loader, max_steps, every = _train_loader(cfg, train, tok)
    # before training: --val-bleu scores the validation pairs as the test pairs are scored
    cfg = cfg.derive(bleu_tokenize=resolve_bleu_tokenize([t for _, t in test],
                                                         cfg.bleu_tokenize))
    decoded = validation_scores(tok, val[:cfg.val_bleu], cfg) if cfg.val_bleu else None
    result = fit(Seq2SeqModule(model, cfg, max_steps, decoded_metrics=decoded), loader,
                 padded_loader(tok, val, cfg.batch_size), cfg, run_dir,
                 max_steps=max_steps, val_check_interval=every, tokenizer=tok)
    model.eval()
    metrics = {}
    if result.is_global_zero:  # other DDP ranks write nothing: no need to test there
        # with run_dir, evaluate's rule: null scores and one warning where outputs are NaN
        metrics, _ = compute_test_metrics(model, tok, test, cfg, run_dir=run_dir)
        if not (isinstance(model, RNNSeq2Seq) and model.attention is None):  # rnn: none to draw
            _cross_attention_figure(model, tok, test[0][0], cfg,  # the test's first source
                                    run_dir / "cross_attention.png",
                                    weights=fit_weights_text(result.steps, result.best))
    return finish(cfg, run_dir, model, metrics, result, tokenizer=tok)


# ---- a trained run ----------------------------------------------------------------------
@loads
def load(task, run_dir: Path, cfg: RunSettings, *, quantize: str | None = None):
    """(model in eval mode, ``TranslationTokenizers``) of a run directory; with
    ``quantize="int8"``, the model's linear layers on int8 weights (``attnlab.nn.quantize``)."""
    tok = TranslationTokenizers.load(Path(run_dir) / "tokenizer.json",
                                     strip_sources=cfg.sources_stripped)
    model = build_model(cfg)
    load_weights(model, Path(run_dir) / "model.safetensors")
    return quantized_run(model.eval(), quantize, run_dir), tok


def check_greedy_penalty(cfg: RunSettings, num_beams: int | None,
                         length_penalty: float | None, *, flags: bool = False) -> None:
    """Refuse a ``length_penalty`` given for greedy decoding (``num_beams``, or the run's
    ``beam`` when not given, 1), which would ignore it without a word: a ``ValueError``
    naming the arguments, or with ``flags`` a ``UsageError`` naming ``--length-penalty`` and
    ``--beam``."""
    beams = num_beams or cfg.beam
    if length_penalty is None or beams != 1:
        return
    penalty, beam = ("--length-penalty ", "--beam ") if flags else ("length_penalty=",
                                                                    "num_beams=")
    whose = "" if num_beams else ", the run's setting"
    raise (UsageError if flags else ValueError)(
        f"{penalty}{length_penalty} is for beam search, and this translation is greedy "
        f"({beam}{beams}{whose}); give {beam}N > 1 with it, or drop it")


def translate(task, run_dir: Path, cfg: RunSettings, texts: list[str], *,
              num_beams: int | None = None, length_penalty: float | None = None,
              quantize: str | None = None, labels: list[str] | None = None,
              finite: list[bool] | None = None) -> list[str]:
    """Translations of ``texts`` (the run's ``beam`` and ``length_penalty`` unless given);
    with the built-in numbers, digits are spelled out first; ``quantize="int8"``: by the int8
    model, one text at a time (its linear layers round each call's input to 8 bits by the
    range of the whole call, so in a batch a text's translation would depend on the texts
    beside it); ``labels`` name the texts in errors. ``texts`` one ``str`` (or bytes) is a
    ``TypeError``, not a translation of each of its characters; ``num_beams`` and
    ``length_penalty`` given are checked as ``--beam`` and ``--length-penalty`` are (a
    ``ValueError`` naming them: ``num_beams=0`` translated with the run's beams, in silence),
    ``length_penalty`` for greedy decoding refused too (``check_greedy_penalty``);
    ``finite``, when given, gets whether each text's outputs were finite (``translate_texts``)."""
    for name, key, value in (("num_beams", "beam", num_beams),
                             ("length_penalty", "length_penalty", length_penalty)):
        if value is not None:  # not given: the run's own
            check_argument(task.settings, key, value, shown=name)
    check_greedy_penalty(cfg, num_beams, length_penalty)
    texts = spell_digits(cfg, input_texts(texts), labels)  # refused before the model loads
    model, tok = load(task, run_dir, cfg, quantize=quantize)
    unfinished: list[int] = []
    found = translate_texts(model, tok, texts, max_new_tokens=cfg.max_target_len,
                            num_beams=num_beams or cfg.beam,
                            length_penalty=cfg.length_penalty if length_penalty is None
                            else length_penalty,
                            batch_size=1 if quantize else 500, labels=labels,
                            unfinished=unfinished, finite=finite)
    # after the texts were accepted: a refusal stays the one line said
    names = labels or [f"text number {n}" for n in range(1, len(texts) + 1)]
    tok.note_unknown(texts, names)
    say("unfinished", len(unfinished), lambda count, _: "note: " + unfinished_note(
        unfinished, names, cfg.max_target_len, count), len(texts))
    return found



def input_reader(task, run_dir: Path, cfg: RunSettings):
    """One source text as ``translate`` reads it: its digits spelled (``spell_digits``), no
    longer than the model reads (``check_source_lengths``), by the run's tokenizers alone, so
    that every line of a long file is checked before the model is loaded."""
    tok = TranslationTokenizers.load(Path(run_dir) / "tokenizer.json",
                                     strip_sources=cfg.sources_stripped)
    max_len = _source_reach(cfg)

    def read(text: str) -> str:
        text = spell_digits(cfg, [text], ["--input"])[0]
        check_source_lengths(tok.encode_sources([text]), max_len, ["--input"])
        return text
    return read


@predicts
def predict_many(task, run_dir: Path, cfg: RunSettings, texts: list[str],
                 labels: list[str], **options) -> list[dict[str, Any]]:
    """Every text's translation (``translate``, with its ``options``: the model loaded once,
    the texts batched), as ``translation_results`` gives it, with whether its outputs were
    finite (``FINITE``): a run trained to NaN writes the argmax of NaN rows, which ``predicts``
    turns into no answer and one warning, as every task's ``predict`` does."""
    finite: list[bool] = []
    found = translate(task, run_dir, cfg, texts, labels=labels, finite=finite, **options)
    return [{**result, FINITE: ok} for result, ok in zip(translation_results(found), finite,
                                                         strict=True)]


def translation_results(translations: list[str]) -> list[dict[str, str]]:
    """``predict``'s and ``translate``'s result of each translation: ``--json`` gives it as
    written, and its printed line has each newline as a space (a run trained on targets that
    span lines writes them), so that one input is one line of output, as an lm run's
    continuation is printed (``prediction_of``)."""
    from ..lm.continuation import prediction_of

    return [prediction_of(t) for t in translations]


def export_hf(task, run_dir: Path, cfg: RunSettings) -> tuple[Any, dict[str, Any], None]:
    """``attnlab export --hf``: a ``--arch transformer`` run as a ``MarianMTModel``
    (``attnlab.interop.to_hf``) with the source tokenizer in OUT and the target one in
    ``OUT/target_tokenizer``, and no note; a run from a Marian checkpoint has Marian's one
    tokenizer, written as Marian's files. A recurrent run is a UsageError: Hugging Face has no
    model to hold it."""
    if cfg.arch != "transformer":
        raise UsageError(f"export: {run_dir} is a --arch {cfg.arch} run; Hugging Face has "
                         f"no recurrent translation model to hold it (export --arch "
                         f"transformer runs)")
    from ...interop import to_hf
    from ...interop.tokenizer import to_hf_tokenizer

    model, tok = load(task, run_dir, cfg)
    if tok.marian:  # a run from a Marian checkpoint: its one tokenizer, as Marian's files
        return to_hf(model), {"": tok.src}, None
    # a run that reads its sources without the spaces around them exports a tokenizer that
    # drops them too: transformers would otherwise read " le chat " as other ids
    return to_hf(model), {"": to_hf_tokenizer(tok.src, strip=cfg.sources_stripped),
                          TARGET_TOKENIZER_DIR: to_hf_tokenizer(tok.tgt)}, None


def _own_translation(task, run_dir: Path, cfg: RunSettings, text: str):
    """(the model, its tokenisers, ``text`` as the model reads it, the ids of the model's
    translation of it, searched as ``translate`` searches: the run's ``--beam`` and
    ``--length-penalty``) for the pictures of ``--input``: a refusal names ``--input``."""
    text = spell_digits(cfg, [text], ["--input"])[0]
    model, tok = load(task, run_dir, cfg)
    # translate's refusal of a source longer than the model reads (as ``input_reader``)
    check_source_lengths(tok.encode_sources([text]), _source_reach(cfg), ["--input"])
    tok.note_unknown([text], [input_name()])  # as translate and predict say it
    return model, tok, text, _written(model, tok, text, cfg.max_target_len,
                                      num_beams=cfg.beam, length_penalty=cfg.length_penalty)


def _written(model, tok: TranslationTokenizers, text: str, max_new_tokens: int, *,
             num_beams: int = 1, length_penalty: float = 1.0) -> list[int]:
    """The ids ``model`` writes for ``text`` (as ``translate_texts`` with the same search),
    after the start and before the end: what its decoder reads, as a decoded text re-encoded
    is not (bytes that make no character decode to "�", whose own bytes are other ids)."""
    src = torch.tensor(tok.encode_sources([text]))  # (1, S)
    with torch.no_grad():
        row = model.generate(src, max_new_tokens, num_beams=num_beams,
                             length_penalty=length_penalty)[0, 1:].tolist()  # after SOS
    return row[:row.index(model.eos_id)] if model.eos_id in row else row


@attends
def attention_maps(task, run_dir: Path, cfg: RunSettings, text: str):
    """Cross-attention of the model reading its own translation of ``text`` (the run's
    ``--beam`` and ``--length-penalty``, as ``translate``)."""
    model, tok, text, translation = _own_translation(task, run_dir, cfg, text)
    return cross_attention_maps(model, tok, text, translation, cfg.max_len)


def attention_layers(task, run_dir: Path, cfg: RunSettings, text: str):
    """``attnlab view``: while the model reads its own translation of ``text`` (the run's
    ``--beam`` and ``--length-penalty``, as ``translate``), the
    encoder's self-attention over the source (S × S), the decoder's causal self-attention over
    its input (T × T) and the cross-attention between them (T × S)."""
    model, tok, text, translation = _own_translation(task, run_dir, cfg, text)
    src, tgt, src_labels, tgt_labels = _pair(tok, text, translation, cfg.max_len)
    layers = with_tokens(_alignment_layers(model, src, tgt), src_labels, tgt_labels)
    return layers, src_labels, src_labels


def _warn(line: str | None) -> None:
    """``line`` on standard error, when there is one."""
    if line:
        print(line, file=sys.stderr, flush=True)


@rng_kept()  # a notebook's seeded draws after it are as before it
def evaluate(task, run_dir: Path, cfg: RunSettings, data: str | None, *,
             quantize: str | None = None) -> dict[str, float]:
    """The test metrics of the run's held-out pairs, or of ``--data FILE``'s pairs (of the
    int8 model with ``quantize="int8"``)."""
    if data is not None:
        return _file_metrics(task, run_dir, cfg, data, quantize)[0]
    test, labels, trained = evaluation_pairs(cfg, data)
    model, tok = load(task, run_dir, cfg, quantize=quantize)
    metrics = compute_test_metrics(model, tok, test, cfg, labels, run_dir)[0]
    _warn(trained)
    return metrics


def _file_metrics(task, run_dir: Path, cfg: RunSettings, data: str, quantize: str | None,
                  by_length: bool = False) -> tuple[dict[str, float], list[dict], int]:
    """``evaluate --data FILE``: its pairs read, translated and scored ``CHUNK_ROWS`` at a
    time (``Tally``: the scores of all of them, exact), after a first pass that checks every
    pair (its source's digits and length) and counts the references' words (``auto``'s BLEU
    tokenisation), keeping none: what is held grows with the chunk, not the file, a bad pair
    anywhere is refused before any is translated, and a long file says on stderr how far it
    is. With ``by_length``, also the rows of ``scores_by_length`` (``LengthTally``, its buckets
    from the first pass's source lengths), else none; and how many pairs there are."""
    tok = TranslationTokenizers.load(Path(run_dir) / "tokenizer.json",
                                     strip_sources=cfg.sources_stripped)
    reach = _source_reach(cfg)
    trained, total, words, lengths = trained_sources(cfg), 0, 0, set()
    for pairs, labels, chunk in pair_chunks(cfg, data, CHUNK_ROWS):
        ids = tok.encode_sources([s for s, _ in pairs])
        check_source_lengths(ids, reach, labels)
        lengths.update(map(len, ids))  # the lengths there are, for --by-length's buckets
        see_sources(trained, cfg, pairs, chunk)
        total, words = total + len(pairs), words + sum(len(t.split()) for _, t in pairs)
    digest = chunk.sha256
    model, tok = load(task, run_dir, cfg, quantize=quantize)
    tally = Tally(bleu_tokenize_of(words, total, cfg.bleu_tokenize), cfg.normalize)
    by = LengthTally(length_buckets(sorted(lengths)) if by_length else [], cfg.normalize)
    started, nan = time.perf_counter(), False
    with said_once(total):  # the notes of cut and NaN translations: once, of them all
        for pairs, labels, chunk in pair_chunks(cfg, data, CHUNK_ROWS):
            before = tally.pairs
            hyps, nan_here = scored_translations(model, tok, pairs, cfg, labels, run_dir)
            refs = [t for _, t in pairs]
            tally.add(hyps, refs)
            if by_length:
                by.add([len(ids) for ids in tok.encode_sources([s for s, _ in pairs])], hyps,
                       refs)
            nan |= nan_here
            progress("evaluate", before, tally.pairs, total, started, CHUNK_ROWS, "pairs")
    same_both_readings(chunk.path, digest, chunk.sha256)
    _warn(trained and trained.note(f"--data {data}"))
    return null_scores(tally.scores()) if nan else tally.scores(), by.rows(), total


def _source_reach(cfg: RunSettings) -> int | None:
    """The most source tokens the run's model reads: its positions (None: a recurrent
    model, which has no such limit)."""
    return model_config_of(cfg).max_len if cfg.arch == "transformer" else None


def evaluate_by_length(task, run_dir: Path, cfg: RunSettings, data: str | None,
                       out: Path, *, quantize: str | None = None):
    """``attnlab evaluate DIR --by-length``: (the test metrics, their rows per source-length
    bucket); draws the figure ``out``, its title naming the pairs scored. ``data`` is read,
    translated and scored a chunk at a time, as ``evaluate --data`` reads it
    (``_file_metrics``)."""
    if data is not None:
        metrics, rows, count = _file_metrics(task, run_dir, cfg, data, quantize, by_length=True)
    else:
        test, labels, trained = evaluation_pairs(cfg, data)
        model, tok = load(task, run_dir, cfg, quantize=quantize)
        metrics, hyps = compute_test_metrics(model, tok, test, cfg, labels, run_dir)
        _warn(trained)
        rows, count = scores_by_length(tok, test, hyps, cfg.normalize), len(test)
    nan = any(value != value for value in metrics.values())
    if nan:  # NaN outputs: null, as the totals (and the figure says why it is empty)
        rows = null_scores(rows)
    scored = f"--data {Path(data).name}" if data is not None else "the run's test pairs"
    try:
        plot_by_length({"exact match": [r["exact_match"] for r in rows],
                        "chrF / 100": [r["chrf"] / 100 for r in rows]},
                       [r["lengths"] for r in rows], out,
                       title=f"{cfg.arch}: score by source length, "
                             f"{scored} ({count:,} pairs)"
                             + ("\nno scores: the model's outputs are NaN" if nan else ""))
    except OSError as e:  # a read-only run directory: say which file, no traceback
        raise UsageError(f"--out {out}: cannot write it ({e.strerror or e})") from None
    return metrics, rows
