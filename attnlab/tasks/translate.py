"""``attnlab train translate``: an encoder–decoder Transformer that translates.

Built-in data: numbers spelled out by num2words (``--src en --tgt de``: "three hundred and
forty-two" → "dreihundertzweiundvierzig"), tested on held-out numbers never seen in training;
``--dataset dates``: dates written by babel in two locales ("Friday, March 5, 2021" →
"Freitag, 5. März 2021"). Users' data: ``--data FILE`` with a source and a target column
(CSV, TSV or JSONL).

Shapes: B batch, S source tokens, T target tokens (SOS ... EOS).

Why the defaults are fast: the source is tokenised into words (~12 per number) and the German
target into byte-level BPE pieces ("vierhundert", "sieben", "tausend", ...; ~5 per number)
instead of ~50 characters, so training steps and the decoding of the 2,000 test numbers are
short; the test set is decoded greedily in large batches with the KV cache.

The run directory holds ``tokenizer.json`` (the source tokeniser, which reads the user's text)
and ``target_tokenizer.json``; ``attnlab.load(DIR)`` returns ``(model, TranslationTokenizers)``.

This file holds the task (flags, checks, training, loading) and the cross-attention pictures;
the splits, tokenisers and batches are in ``translate_data.py``, translating and scoring in
``translate_scoring.py``.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch

from ..errors import UsageError
from ..models.configs import Seq2SeqConfig
from ..tokenizers import TOKENIZER_KINDS
from .base import Task, config_from_run, model_defaults
from .translate_data import (TARGET_TOKENIZER_FILE, TranslationTokenizers, builtin_splits,
                             encode_pairs, file_splits, fit_tokenizer, padded_loader, read_pairs,
                             resolve_tokenizer, stream_batches)
from .translate_scoring import (BLEU_TOKENIZE, compute_test_metrics, resolve_bleu_tokenize,
                                score, translate_texts)

# Re-exported: ``TranslationTokenizers`` and ``score`` have always been importable from here.
__all__ = ["TranslateTask", "TASKS", "TASK", "build_model", "model_config_of",
           "TranslationTokenizers", "score", "cross_attention_maps"]

TOKENIZERS = ("auto", *TOKENIZER_KINDS)  # auto: chosen from the data (resolve_tokenizer)
DATASETS = ("numbers", "dates")


def model_config_of(cfg: dict[str, Any]) -> Seq2SeqConfig:
    """The ``Seq2SeqConfig`` of a run's configuration (``run`` adds the vocabulary sizes and
    ``max_len``; a run written before ``positional`` was a flag gets the paper's sinusoids).

    Example:
        >>> from attnlab.tasks import SHARED_DEFAULTS
        >>> model_config_of({**SHARED_DEFAULTS, "src_vocab_size": 40, "tgt_vocab_size": 50,
        ...                  "max_len": 64}).positional
        'sinusoidal'
    """
    return config_from_run(Seq2SeqConfig, cfg)


def build_model(cfg: dict[str, Any]):
    """The ``Seq2SeqTransformer`` a run's configuration describes (randomly initialised)."""
    from ..models import Seq2SeqTransformer

    return Seq2SeqTransformer.from_config(model_config_of(cfg))


_build_model = build_model  # its name before #9 part 5 (tests/cli/test_translate_cli.py)


def cross_attention_maps(model, tok: TranslationTokenizers, src_text: str, translation: str):
    """The cross-attention of every decoder layer while it reads ``translation`` after the
    source: (L × (H, T, S) maps, the S source tokens, the T decoder-input tokens)."""
    src = torch.tensor([tok.src.encode(src_text)])
    tgt_ids = [tok.tgt.sos_id, *tok.tgt.encode(translation)]
    maps = [m[0] for m in model.cross_attention(src, torch.tensor([tgt_ids]))]  # L × (H, T, S)
    y_labels = [tok.tgt.decode([i], skip_special_tokens=False) for i in tgt_ids]
    return maps, [t.strip() or repr(t) for t in tok.src.tokenize(src_text)], y_labels


def _cross_attention_figure(model, tok, src_text: str, translation: str, path: Path) -> None:
    from ..viz import plot_attention

    maps, x_labels, y_labels = cross_attention_maps(model, tok, src_text, translation)
    plot_attention(maps, x_labels, y_labels, path,
                   title=f"cross-attention (layers × heads): {src_text!r}")


# ---- the task ---------------------------------------------------------------------------
class TranslateTask(Task):
    name = "translate"
    help = "encoder-decoder translation: spelled-out numbers (num2words) or --data FILE"
    has_tokenizer = True
    model_config = Seq2SeqConfig  # its flags: --num-encoder-layers, --positional, ...
    defaults = {
        **model_defaults(Seq2SeqConfig),
        "src": "en", "tgt": "de", "dataset": "numbers", "data": None, "test": None,
        "src_column": "source", "tgt_column": "target",
        "src_tokenizer": "auto", "tgt_tokenizer": "auto", "vocab_size": 400,
        "max_number": 1_000_000, "test_size": 2000, "val_size": 200,
        "label_smoothing": 0.1, "beam": 1, "length_penalty": 1.0, "bleu_tokenize": "auto",
        "model_dim": 128, "num_heads": 4, "num_layers": 2, "dim_feedforward": 512,
        "batch_size": 128, "max_steps": 600, "lr": 1e-3, "warmup": 200, "dropout": 0.0,
        "threads": 1,
    }

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        g = p.add_argument_group("translate")
        g.add_argument("--src", metavar="LANG", help="source language of the built-in data")
        g.add_argument("--tgt", metavar="LANG",
                       help="target language (any num2words language; for dates a babel locale)")
        g.add_argument("--dataset", choices=DATASETS,
                       help="built-in data: numbers (num2words) or dates (babel locales)")
        g.add_argument("--data", metavar="FILE", help="your parallel data (CSV/TSV/JSONL)")
        g.add_argument("--test", metavar="FILE", help="test pairs (default: 10%% of --data)")
        g.add_argument("--src-column", metavar="NAME", help="source column of --data")
        g.add_argument("--tgt-column", metavar="NAME", help="target column of --data")
        g.add_argument("--src-tokenizer", choices=TOKENIZERS,
                       help="source tokeniser (auto: word for built-in numbers written as several "
                            "words, else bpe)")
        g.add_argument("--tgt-tokenizer", choices=TOKENIZERS,
                       help="target tokeniser (auto, as --src-tokenizer)")
        g.add_argument("--vocab-size", type=int, metavar="N", help="BPE vocabulary size")
        g.add_argument("--max-number", type=int, metavar="N", help="built-in numbers are below N")
        g.add_argument("--test-size", type=int, metavar="N",
                       help="held-out test pairs of the built-in data")
        g.add_argument("--val-size", type=int, metavar="N", help="validation pairs")
        g.add_argument("--label-smoothing", type=float, metavar="F",
                       help="label smoothing of the training loss")
        g.add_argument("--beam", type=int, metavar="N", help="beams when testing (1: greedy)")
        g.add_argument("--length-penalty", type=float, metavar="F",
                       help="beam search length penalty")
        g.add_argument("--bleu-tokenize", choices=BLEU_TOKENIZE,
                       help="sacrebleu tokenisation (auto: char for one-word targets)")

    def validate(self, cfg: dict[str, Any]) -> None:
        if cfg["data"] is None:
            if cfg["dataset"] not in DATASETS:
                raise UsageError(f"--dataset must be one of {', '.join(DATASETS)}, "
                                 f"got {cfg['dataset']!r}")
            if cfg["dataset"] == "dates":
                from ..data.dates import check_locale as check
            else:
                from ..data.numbers import check_language as check
            for key in ("src", "tgt"):
                try:
                    check(str(cfg[key]))
                except ValueError as e:
                    raise UsageError(f"--{key}: {e}") from None
            if cfg.get("epochs") is not None:
                raise UsageError(f"--epochs: the built-in {cfg['dataset']} are generated without "
                                 f"end; use --max-steps")
        for key, low in (("vocab_size", 260), ("max_number", 10), ("test_size", 1),
                         ("val_size", 1), ("beam", 1)):
            if not isinstance(cfg[key], int) or isinstance(cfg[key], bool) or cfg[key] < low:
                raise UsageError(f"--{key.replace('_', '-')} must be an integer >= {low}, "
                                 f"got {cfg[key]!r}")
        if not 0 <= float(cfg["label_smoothing"]) < 1:
            raise UsageError(f"--label-smoothing must be in [0, 1), got {cfg['label_smoothing']}")
        if (cfg["data"] is None and cfg["dataset"] == "numbers"
                and 2 * (cfg["test_size"] + cfg["val_size"]) > cfg["max_number"]):
            raise UsageError(f"--test-size + --val-size ({cfg['test_size'] + cfg['val_size']}) "
                             f"must be at most half of --max-number ({cfg['max_number']})")
        if cfg["data"] is not None:
            file_splits(cfg)  # read the files now: a malformed one fails before the run starts
            from ..runs import pin_data_files

            pin_data_files(cfg, ("data", "test"))  # saved with config.yaml: evaluate, --resume

    def run(self, cfg: dict[str, Any], run_dir: Path) -> dict[str, float]:
        from torch.utils.data import TensorDataset

        from ..data import BatchLoader
        from ..training import finish, fit
        from ..training.seq2seq import Seq2SeqModule

        if cfg["data"] is None:
            stream, val, test = builtin_splits(cfg)
            sample = stream.sample(5000)  # enough to see every word and fit BPE
        else:
            train, val, test = file_splits(cfg)
            sample = train
        builtin = cfg["data"] is None
        for key, side in (("src_tokenizer", 0), ("tgt_tokenizer", 1)):
            cfg[key] = resolve_tokenizer(cfg[key], [p[side] for p in sample], builtin=builtin)
        tok = TranslationTokenizers(
            fit_tokenizer(cfg["src_tokenizer"], [s for s, _ in sample], cfg["vocab_size"]),
            fit_tokenizer(cfg["tgt_tokenizer"], [t for _, t in sample], cfg["vocab_size"]))
        src_len = max(map(len, tok.src.encode_batch([s for s, _ in sample + test])))
        tgt_len = max(map(len, tok.tgt.encode_batch([t for _, t in sample])))
        cfg.update(src_vocab_size=tok.src.vocab_size, tgt_vocab_size=tok.tgt.vocab_size,
                   max_target_len=tgt_len + max(4, tgt_len // 2),
                   max_len=max(64, src_len + 2, 2 * tgt_len + 8))
        model = build_model(cfg)
        bs = cfg["batch_size"]
        if cfg["data"] is None:
            max_steps = cfg["max_steps"]
            train_loader = stream_batches(stream, tok, bs, max_steps)
            every = cfg.get("val_every") or max(1, max_steps // 5)
        else:
            train_loader = BatchLoader(TensorDataset(*encode_pairs(tok, train)), bs,
                                       shuffle=True, seed=cfg["seed"])
            steps_per_epoch = -(-len(train) // bs)
            max_steps = cfg["epochs"] * steps_per_epoch if cfg.get("epochs") else cfg["max_steps"]
            every = None
        module = Seq2SeqModule(model, cfg, max_steps)
        result = fit(module, train_loader, padded_loader(tok, val, bs), cfg, run_dir,
                     max_steps=max_steps, val_check_interval=every)
        model.eval()
        cfg["bleu_tokenize"] = resolve_bleu_tokenize([t for _, t in test], cfg["bleu_tokenize"])
        metrics = {}
        if result.is_global_zero:  # other DDP ranks write nothing: no need to test there
            metrics, hyps = compute_test_metrics(model, tok, test, cfg)
            _cross_attention_figure(model, tok, test[0][0], hyps[0],
                                    run_dir / "cross_attention.png")
        return finish(cfg, run_dir, model, metrics, result, tokenizer=tok)

    def load(self, run_dir: Path, cfg: dict[str, Any]):
        from ..runs import load_weights
        from ..tokenizers import load_tokenizer

        tok = TranslationTokenizers(load_tokenizer(Path(run_dir) / "tokenizer.json"),
                                    load_tokenizer(Path(run_dir) / TARGET_TOKENIZER_FILE))
        model = build_model(cfg)
        load_weights(model, Path(run_dir) / "model.safetensors")
        return model.eval(), tok

    @staticmethod
    def _spell_digits(cfg: dict[str, Any], texts: list[str]) -> list[str]:
        """With the built-in numbers, a text of digits ("342") is spelled in the source language."""
        if cfg.get("data") is not None or cfg.get("dataset", "numbers") != "numbers":
            return texts
        from ..data.numbers import spell

        return [spell(int(t), cfg["src"]) if t.strip().isdigit() else t for t in texts]

    def translate(self, run_dir: Path, cfg: dict[str, Any], texts: list[str], *,
                  num_beams: int | None = None, length_penalty: float | None = None) -> list[str]:
        """Translations of ``texts``; with the built-in numbers, digits are spelled out first."""
        model, tok = self.load(run_dir, cfg)
        return translate_texts(model, tok, self._spell_digits(cfg, texts),
                               max_new_tokens=cfg["max_target_len"],
                               num_beams=num_beams or cfg["beam"],
                               length_penalty=cfg["length_penalty"] if length_penalty is None
                               else length_penalty)

    def predict(self, run_dir: Path, cfg: dict[str, Any], text: str) -> str:
        return self.translate(run_dir, cfg, [text])[0]

    def attention_maps(self, run_dir: Path, cfg: dict[str, Any], text: str):
        """Cross-attention of the model reading its own translation of ``text``."""
        model, tok = self.load(run_dir, cfg)
        text = self._spell_digits(cfg, [text])[0]
        translation = translate_texts(model, tok, [text], max_new_tokens=cfg["max_target_len"])[0]
        return cross_attention_maps(model, tok, text, translation)

    def evaluate(self, run_dir: Path, cfg: dict[str, Any], data: str | None) -> dict[str, float]:
        if data is not None:
            test = read_pairs(data, cfg, "--data")
        elif cfg.get("data") is None:
            test = builtin_splits(cfg)[2]
        else:
            from ..runs import check_data_files

            check_data_files(cfg)  # a changed file would give other "held-out" rows
            test = file_splits(cfg)[2]
        model, tok = self.load(run_dir, cfg)
        return compute_test_metrics(model, tok, test, cfg)[0]


TASKS = {"translate": TranslateTask()}
TASK = TASKS["translate"]  # the one task of this module, as it has always been importable
