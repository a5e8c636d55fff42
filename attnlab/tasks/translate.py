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
"""
from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..errors import UsageError
from .base import Task

TOKENIZERS = ("auto", "char", "word", "bpe")
DATASETS = ("numbers", "dates")
BLEU_TOKENIZE = ("auto", "13a", "char", "intl", "none")
TARGET_TOKENIZER_FILE = "target_tokenizer.json"


@dataclass
class TranslationTokenizers:
    """The source and target tokenisers of a translation run.

    ``encode`` reads source text, ``decode`` writes target text; ``save(path)`` writes the
    source tokeniser to ``path`` and the target one next to it as ``target_tokenizer.json``.
    """

    src: Any
    tgt: Any

    def encode(self, text: str) -> list[int]:
        return self.src.encode(text)

    def decode(self, ids) -> str:
        return self.tgt.decode(ids)

    def save(self, path: str | Path) -> None:
        self.src.save(path)
        self.tgt.save(Path(path).with_name(TARGET_TOKENIZER_FILE))


# ---- batches ----------------------------------------------------------------------------
def pad(seqs: list[list[int]], pad_id: int = 0) -> Tensor:
    """Right-pad lists of ids into a (B, L) int64 tensor."""
    out = torch.full((len(seqs), max(1, max(map(len, seqs)))), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out


def encode_pairs(tok: TranslationTokenizers, pairs: list[tuple[str, str]]) -> tuple[Tensor, Tensor]:
    """(src (B, S), tgt (B, T)) of text pairs; targets are wrapped in SOS ... EOS."""
    src = tok.src.encode_batch([s for s, _ in pairs])
    tgt = tok.tgt.encode_batch([t for _, t in pairs], add_special_tokens=True)
    return pad(src), pad(tgt)


def _stream_batches(pairs, tok: TranslationTokenizers, batch_size: int, steps: int):
    """``steps`` fresh training batches of a built-in dataset; batch number n (see
    ``numbered_batches``: different on each DDP rank, and computed directly when a run
    resumes) is drawn by its own generator, seeded from (seed, n)."""
    from ..data import numbered_batches

    return numbered_batches(lambda n: encode_pairs(
        tok, pairs.sample(batch_size, seed=f"train/{pairs.seed}/{n}")), steps)


def _batches(tok: TranslationTokenizers, pairs: list[tuple[str, str]], batch_size: int):
    """A loader of ready-made padded batches (validation)."""
    batches = [encode_pairs(tok, pairs[i : i + batch_size])
               for i in range(0, len(pairs), batch_size)]
    return torch.utils.data.DataLoader(batches, batch_size=None)


# ---- translating and scoring ------------------------------------------------------------
@torch.no_grad()
def translate_texts(model, tok: TranslationTokenizers, texts: list[str], *, max_new_tokens: int,
                    num_beams: int = 1, length_penalty: float = 1.0,
                    batch_size: int = 500) -> list[str]:
    """Translate texts in batches of similar length (little padding), greedy or beam search.

    Raises:
        UsageError: if a text is longer than the model's positional encoding reaches.
    """
    ids = tok.src.encode_batch(texts)
    longest = max(range(len(ids)), key=lambda i: len(ids[i]), default=None)
    if longest is not None and len(ids[longest]) > model.positional.max_len:
        raise UsageError(f"text number {longest + 1} has {len(ids[longest])} tokens; this model "
                         f"reads at most {model.positional.max_len}")
    order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
    out: list[str] = [""] * len(texts)
    if num_beams > 1:
        batch_size = max(1, batch_size // num_beams)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        generated = model.generate(pad([ids[i] for i in chunk]), max_new_tokens,
                                   num_beams=num_beams, length_penalty=length_penalty)
        for i, row in zip(chunk, generated.tolist()):
            out[i] = tok.decode(row[1:])  # after SOS; decode drops EOS and padding
    return out


def _bleu_tokenize(refs: list[str], choice: str) -> str:
    """BLEU counts up to 4-grams of words: text of one or two words (German numbers are one
    word) always scores 0, so ``auto`` counts characters there and words elsewhere."""
    if choice != "auto":
        return choice
    words = sum(len(r.split()) for r in refs) / max(1, len(refs))
    return "char" if words < 4 else "13a"


def score(hyps: list[str], refs: list[str], *, bleu_tokenize: str = "auto") -> dict[str, float]:
    """test_exact_match (fraction), test_bleu and test_chrf (sacrebleu, 0-100)."""
    import sacrebleu

    exact = sum(h.strip() == r.strip() for h, r in zip(hyps, refs)) / max(1, len(refs))
    bleu = sacrebleu.corpus_bleu(hyps, [refs], tokenize=_bleu_tokenize(refs, bleu_tokenize))
    chrf = sacrebleu.corpus_chrf(hyps, [refs])
    return {"test_exact_match": exact, "test_bleu": bleu.score, "test_chrf": chrf.score}


def compute_test_metrics(model, tok, pairs, cfg) -> tuple[dict[str, float], list[str]]:
    hyps = translate_texts(model, tok, [s for s, _ in pairs], max_new_tokens=cfg["max_target_len"],
                           num_beams=cfg["beam"], length_penalty=cfg["length_penalty"])
    return score(hyps, [t for _, t in pairs], bleu_tokenize=cfg["bleu_tokenize"]), hyps


# ---- data -------------------------------------------------------------------------------
def _builtin_splits(cfg: dict[str, Any]):
    """(endless training stream, validation pairs, test pairs) of the built-in dataset."""
    if cfg.get("dataset", "numbers") == "dates":
        from ..data.dates import DatePairs, held_out_days

        test, val = held_out_days(cfg["test_size"], cfg["val_size"])
        stream = DatePairs(cfg["src"], cfg["tgt"], exclude=set(test) | set(val), seed=cfg["seed"])
    else:
        from ..data.numbers import NumberPairs, held_out_numbers

        test, val = held_out_numbers(cfg["max_number"], cfg["test_size"], cfg["val_size"])
        stream = NumberPairs(cfg["src"], cfg["tgt"], cfg["max_number"],
                             exclude=set(test) | set(val), seed=cfg["seed"])
    return stream, [stream.pair(n) for n in val], [stream.pair(n) for n in test]


def _read_pairs(path: str, cfg: dict[str, Any], what: str) -> list[tuple[str, str]]:
    from ..data.tables import read_table

    columns = [cfg["src_column"], cfg["tgt_column"]]
    rows = read_table(path, columns=columns, what=what)
    return [(r[columns[0]], r[columns[1]]) for r in rows]


def _file_splits(cfg: dict[str, Any]):
    """(train, val, test) pairs of --data (and --test); held-out rows chosen with the seed."""
    pairs = _read_pairs(cfg["data"], cfg, "--data")
    random.Random(cfg["seed"]).shuffle(pairs)
    test = _read_pairs(cfg["test"], cfg, "--test") if cfg.get("test") else None
    held = max(1, len(pairs) // 10)
    if test is None:
        test, pairs = pairs[:held], pairs[held:]
    val, train = pairs[: min(held, cfg["val_size"])], pairs[min(held, cfg["val_size"]) :]
    if len(train) < 1 or not val:
        raise UsageError(f"--data {cfg['data']}: {len(pairs)} rows are too few to hold out "
                         f"test and validation rows; give at least 3")
    return train, val, test


def resolve_tokenizer(kind: str, texts: list[str], *, builtin: bool) -> str:
    """``auto``: words for built-in numbers written as several words (English: ~12 words, none
    unseen), byte-level BPE otherwise (German numbers are one long word; users' text has words
    the training rows never show, which BPE still spells)."""
    if kind != "auto":
        return kind
    words = sum(len(t.split()) for t in texts) / max(1, len(texts))
    return "word" if builtin and words >= 2 else "bpe"


def _fit_tokenizer(kind: str, texts: list[str], vocab_size: int):
    from ..tokenizers import BPETokenizer, CharTokenizer, WordTokenizer

    if kind == "bpe":
        return BPETokenizer.fit(texts, vocab_size=vocab_size)
    return {"char": CharTokenizer, "word": WordTokenizer}[kind].fit(texts)


def _build_model(cfg: dict[str, Any]):
    from ..models import Seq2SeqTransformer

    return Seq2SeqTransformer(
        cfg["src_vocab_size"], cfg["tgt_vocab_size"], model_dim=cfg["model_dim"],
        num_heads=cfg["num_heads"], num_layers=cfg["num_layers"],
        dim_feedforward=cfg["dim_feedforward"], dropout=cfg["dropout"],
        norm_first=cfg["norm_first"], max_len=cfg["max_len"], tie_embeddings=cfg["tie_embeddings"])


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
    defaults = {
        "src": "en", "tgt": "de", "dataset": "numbers", "data": None, "test": None,
        "src_column": "source", "tgt_column": "target",
        "src_tokenizer": "auto", "tgt_tokenizer": "auto", "vocab_size": 400,
        "max_number": 1_000_000, "test_size": 2000, "val_size": 200,
        "label_smoothing": 0.1, "beam": 1, "length_penalty": 1.0, "bleu_tokenize": "auto",
        "tie_embeddings": True,
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
        elif not Path(cfg["data"]).is_file():
            raise UsageError(f"--data: file not found: {cfg['data']}")
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
            _file_splits(cfg)  # read the files now: a malformed one fails before the run starts

    def run(self, cfg: dict[str, Any], run_dir: Path) -> dict[str, float]:
        from torch.utils.data import TensorDataset

        from ..data import BatchLoader
        from ..training import finish, fit
        from ..training.seq2seq import Seq2SeqModule

        if cfg["data"] is None:
            stream, val, test = _builtin_splits(cfg)
            sample = stream.sample(5000)  # enough to see every word and fit BPE
        else:
            train, val, test = _file_splits(cfg)
            sample = train
        builtin = cfg["data"] is None
        for key, side in (("src_tokenizer", 0), ("tgt_tokenizer", 1)):
            cfg[key] = resolve_tokenizer(cfg[key], [p[side] for p in sample], builtin=builtin)
        tok = TranslationTokenizers(
            _fit_tokenizer(cfg["src_tokenizer"], [s for s, _ in sample], cfg["vocab_size"]),
            _fit_tokenizer(cfg["tgt_tokenizer"], [t for _, t in sample], cfg["vocab_size"]))
        src_len = max(map(len, tok.src.encode_batch([s for s, _ in sample + test])))
        tgt_len = max(map(len, tok.tgt.encode_batch([t for _, t in sample])))
        cfg.update(src_vocab_size=tok.src.vocab_size, tgt_vocab_size=tok.tgt.vocab_size,
                   max_target_len=tgt_len + max(4, tgt_len // 2),
                   max_len=max(64, src_len + 2, 2 * tgt_len + 8))
        model = _build_model(cfg)
        bs = cfg["batch_size"]
        if cfg["data"] is None:
            max_steps = cfg["max_steps"]
            train_loader = _stream_batches(stream, tok, bs, max_steps)
            every = cfg.get("val_every") or max(1, max_steps // 5)
        else:
            train_loader = BatchLoader(TensorDataset(*encode_pairs(tok, train)), bs,
                                       shuffle=True, seed=cfg["seed"])
            steps_per_epoch = -(-len(train) // bs)
            max_steps = cfg["epochs"] * steps_per_epoch if cfg.get("epochs") else cfg["max_steps"]
            every = None
        module = Seq2SeqModule(model, cfg, max_steps)
        result = fit(module, train_loader, _batches(tok, val, bs), cfg, run_dir,
                     max_steps=max_steps, val_check_interval=every)
        model.eval()
        cfg["bleu_tokenize"] = _bleu_tokenize([t for _, t in test], cfg["bleu_tokenize"])
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
        model = _build_model(cfg)
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
            test = _read_pairs(data, cfg, "--data")
        elif cfg.get("data") is None:
            test = _builtin_splits(cfg)[2]
        else:
            test = _file_splits(cfg)[2]
        model, tok = self.load(run_dir, cfg)
        return compute_test_metrics(model, tok, test, cfg)[0]


TASK = TranslateTask()
