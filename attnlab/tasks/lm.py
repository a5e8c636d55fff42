"""``attnlab train lm --data PATH``: a decoder-only language model on the user's own text.

PATH is a directory written by ``attnlab prepare`` (memory-mapped token files, streamed from
disk), or a text file, prepared on the fly into ``RUN_DIR/data``. Training draws random windows
of ``--block-size`` + 1 tokens from train.bin; ``val_loss`` (mean next-token cross-entropy in
nats) and ``val_perplexity`` = exp(val_loss) are measured on non-overlapping windows of
val.bin by ``lm_metrics``, shared by ``run`` and ``evaluate`` (plain torch, no Lightning).

Shapes: B batch, T block size, V vocabulary.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import torch

from ..errors import UsageError
from ..models.configs import CausalLMConfig
from ..tokenizers import TOKENIZER_KINDS
from .base import Task, config_from_run, model_defaults

__all__ = ["LMTask", "TASKS", "TASK", "lm_metrics", "build_model", "model_config_of"]


def model_config_of(cfg: dict[str, Any]) -> CausalLMConfig:
    """The ``CausalLMConfig`` of a run's configuration: its fields by name, the context length
    ``block_size`` as ``max_len`` (``vocab_size`` is the prepared corpus' once ``run`` set it).

    Example:
        >>> from attnlab.tasks import SHARED_DEFAULTS
        >>> model_config_of({**SHARED_DEFAULTS, "vocab_size": 70, "block_size": 32}).max_len
        32
    """
    return config_from_run(CausalLMConfig, cfg, max_len=cfg["block_size"])


def build_model(cfg: dict[str, Any]):
    """The ``CausalLM`` a run's configuration describes."""
    from ..models.causal_lm import CausalLM

    return CausalLM.from_config(model_config_of(cfg))


@torch.no_grad()
def lm_metrics(model, windows, batch_size: int, max_batches: int | None = None) -> dict[str, float]:
    """``val_loss`` (mean next-token cross-entropy, nats) and ``val_perplexity`` = exp(val_loss)
    over the first ``max_batches`` batches of ``windows`` (a ``TokenWindows``), every token
    weighted equally."""
    import torch.nn.functional as F

    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    n = len(windows) if max_batches is None else min(len(windows), max_batches * batch_size)
    for start in range(0, n, batch_size):
        inputs, targets = (torch.stack(t) for t in zip(*(windows[i] for i in
                                                          range(start, min(start + batch_size, n)))))
        logits = model(inputs)  # (B, T, V)
        total += float(F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="sum"))
        count += targets.numel()
    model.train(was_training)
    loss = total / count
    return {"val_loss": loss, "val_perplexity": math.exp(min(loss, 700.0))}



def random_windows(windows, batch_size: int, steps: int, seed: int):
    """``steps`` training batches of windows drawn anywhere in the corpus (with replacement).

    Batch number n (see ``numbered_batches``) is drawn by a generator seeded from (seed, n): the
    DDP ranks see different windows, and a resumed run goes on with the batches it had not seen.
    """
    from ..data import numbered_batches

    def batch(n: int):
        g = torch.Generator().manual_seed(seed * 1_000_003 + n)
        xs, ys = zip(*(windows[int(i)] for i in torch.randint(len(windows), (batch_size,),
                                                               generator=g)))
        return torch.stack(xs), torch.stack(ys)

    return numbered_batches(batch, steps)


class LMTask(Task):
    name = "lm"
    help = "train a decoder-only (GPT-style) language model on your text (--data FILE or DIR)"
    has_tokenizer = True
    model_config = CausalLMConfig  # its flags: every exposed field (--positional, ...)
    defaults: dict[str, Any] = {
        **model_defaults(CausalLMConfig),
        "data": None, "tokenizer": "char", "vocab_size": None, "block_size": 128,
        "activation": "gelu", "val_batches": 20, "predict_tokens": 100,
        "model_dim": 128, "num_heads": 4, "num_layers": 4, "dim_feedforward": 512,
        "dropout": 0.1, "norm_first": True, "batch_size": 32, "max_steps": 2000,
        "lr": 1e-3, "warmup": 100,
    }

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        g = parser.add_argument_group("lm task")
        g.add_argument("--data", metavar="PATH",
                       help="a directory from `attnlab prepare`, or a UTF-8 text file")
        g.add_argument("--tokenizer", choices=tuple(TOKENIZER_KINDS),
                       help="for a text file: char (default), word or bpe")
        g.add_argument("--vocab-size", type=int, metavar="N",
                       help="for a text file: vocabulary cap (char/word) or size (bpe)")
        g.add_argument("--block-size", type=int, metavar="N",
                       help="context length in tokens, the model's max_len (default 128)")
        g.add_argument("--val-batches", type=int, metavar="N",
                       help="validation batches for val_loss (default 20)")

    def validate(self, cfg: dict[str, Any]) -> None:
        from ..data.corpus import read_meta

        if not cfg.get("data"):
            raise UsageError("--data is required: a directory from `attnlab prepare` or a text file")
        for key, low in (("block_size", 2), ("val_batches", 1), ("predict_tokens", 1)):
            value = cfg.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise UsageError(f"--{key.replace('_', '-')} must be an integer >= {low}, got {value!r}")
        # everything below is refused before the run directory is created (issue #8)
        data = Path(cfg["data"])
        if data.is_dir():
            meta = read_meta(data)
            if cfg.get("resume") and cfg.get("corpus_sha256"):
                _check_corpus(cfg, data, "resume")
            for split in ("train", "val"):
                if meta[f"{split}_tokens"] < cfg["block_size"] + 1:
                    raise UsageError(f"--block-size {cfg['block_size']}: {data}/{split}.bin holds "
                                     f"{meta[f'{split}_tokens']} tokens, fewer than one window of "
                                     f"--block-size + 1; lower --block-size")
        elif not data.is_file():
            raise UsageError(f"--data: not found: {data}")
        elif data.stat().st_size == 0:
            raise UsageError(f"--data {data}: the file is empty")
        elif cfg.get("resume") and cfg.get("data_sha256"):
            from ..runs import check_data_files

            check_data_files(cfg, purpose="resume")
        if cfg["tokenizer"] not in TOKENIZER_KINDS:
            raise UsageError(f"--tokenizer must be one of {', '.join(TOKENIZER_KINDS)}, "
                             f"got {cfg['tokenizer']!r}")
        vs = cfg.get("vocab_size")
        if vs is not None and (isinstance(vs, bool) or not isinstance(vs, int) or vs < 5):
            raise UsageError(f"--vocab-size must be an integer >= 5, got {vs!r}")

    # ---- data -------------------------------------------------------------------------------
    def data_dir(self, cfg: dict[str, Any], run_dir: Path) -> Path:
        """The prepared corpus: --data itself, or RUN_DIR/data prepared from a text file."""
        from ..data.corpus import prepare

        data = Path(cfg["data"])
        if data.is_dir():
            return data
        out = Path(run_dir) / "data"
        if not (out / "meta.json").is_file():
            print(f"preparing {data} -> {out} ({cfg['tokenizer']} tokenizer)", flush=True)
            # force: RUN_DIR/data is the run's own; it replaces what a killed prepare left there
            prepare([data], out, tokenizer=cfg["tokenizer"], vocab_size=cfg.get("vocab_size"),
                    force=True)
        return out

    @staticmethod
    def pin_corpus(cfg: dict[str, Any], run_dir: Path, data_dir: Path) -> None:
        """Record, when the run starts, what it trains on; on ``--resume``, refuse a change.

        A prepared corpus is identified by the SHA-256 of its meta.json and tokenizer.json
        (``corpus_sha256`` in config.yaml): meta.json holds the digests ``prepare`` computed of
        the token files while writing them, so two small files stand for a corpus of any size
        and ``evaluate`` stays fast (``attnlab.data.corpus``). A text file given as --data is
        also recorded in ``data_sha256``, as classify records its file, and must be the text
        RUN_DIR/data was prepared from. config.yaml is written again here, so that a run
        killed before it finishes has the digests too.
        """
        from ..data.corpus import corpus_identity, read_meta
        from ..data.tables import check_digest
        from ..runs import write_yaml

        if cfg.get("resume") and cfg.get("corpus_sha256"):
            _check_corpus(cfg, data_dir, "resume")
        else:
            cfg["corpus_sha256"] = corpus_identity(data_dir)
        prepared_from = read_meta(data_dir).get("files_sha256") or [None]
        if Path(cfg["data"]).is_file() and prepared_from[0]:  # prepare read the text recorded
            check_digest(cfg["data"], prepared_from[0], cfg["data_sha256"]["data"], what="--data")
        write_yaml(Path(run_dir) / "config.yaml", cfg)

    @staticmethod
    def windows(cfg: dict[str, Any], split: str, *, stride: int | None = None):
        from ..data.corpus import TokenWindows

        path = Path(cfg["data_dir"]) / f"{split}.bin"
        if not path.is_file():
            raise UsageError(f"{path} not found: the prepared corpus of this run moved or was "
                             f"deleted (data_dir in config.yaml)")
        return TokenWindows(path, cfg["block_size"], dtype=cfg["dtype"], stride=stride)

    # ---- training -----------------------------------------------------------------------
    def run(self, cfg: dict[str, Any], run_dir: Path) -> dict[str, float]:
        from torch.utils.data import DataLoader

        from ..data.corpus import read_meta
        from ..tokenizers import load_tokenizer
        from ..training import finish, fit  # Lightning is imported here
        from ..training.lm import LMModule

        if Path(cfg["data"]).is_file():  # before preparing: a resumed run refuses a changed file
            from ..runs import pin_data_files

            pin_data_files(cfg, ("data",))
        data_dir = self.data_dir(cfg, run_dir)
        self.pin_corpus(cfg, run_dir, data_dir)
        meta = read_meta(data_dir)
        cfg.update(data_dir=str(data_dir.resolve()), vocab_size=meta["vocab_size"],
                   dtype=meta["dtype"])
        tokenizer = load_tokenizer(data_dir / "tokenizer.json")
        train = self.windows(cfg, "train", stride=1)
        val = self.windows(cfg, "val")
        B = cfg["batch_size"]
        max_steps = cfg["max_steps"]
        if cfg.get("epochs"):  # an epoch: every token seen once, in non-overlapping windows
            max_steps = cfg["epochs"] * max(1, meta["train_tokens"] // (cfg["block_size"] * B))
        model = build_model(cfg)
        module = LMModule(model, cfg, max_steps)
        val_every = cfg.get("val_every")
        result = fit(module, random_windows(train, B, max_steps, cfg["seed"]),
                     DataLoader(val, batch_size=B), cfg, run_dir, max_steps=max_steps,
                     val_check_interval=min(val_every, max_steps) if val_every else None,
                     limit_val_batches=cfg["val_batches"])
        metrics = {}
        if result.is_global_zero:
            metrics = lm_metrics(model, val, B, cfg["val_batches"])
            self.figures(cfg, run_dir, result.steps, max_steps)
        return finish(cfg, run_dir, model, metrics, result, tokenizer=tokenizer)

    @staticmethod
    def figures(cfg: dict[str, Any], run_dir: Path, steps: int, max_steps: int) -> None:
        """lr_schedule.png: the learning rate over the run."""
        from ..viz import lr_curve, plot_lr_schedule

        curve = lr_curve(cfg["schedule"], warmup=cfg["warmup"], max_iters=max_steps,
                         d_model=cfg["model_dim"], lr=cfg["lr"])
        plot_lr_schedule({cfg["schedule"]: curve}, Path(run_dir) / "lr_schedule.png",
                         mark_step=steps if steps < max_steps else None)

    # ---- using a trained run (no Lightning) ----------------------------------------------
    def load(self, run_dir: Path, cfg: dict[str, Any]):
        from ..runs import load_weights
        from ..tokenizers import load_tokenizer

        model = build_model(cfg)
        load_weights(model, Path(run_dir) / "model.safetensors")
        return model.eval(), load_tokenizer(Path(run_dir) / "tokenizer.json")

    def encode_prompt(self, tokenizer, text: str, *, what: str = "--prompt") -> list[int]:
        ids = tokenizer.encode(text)
        if not ids:
            raise UsageError(f"{what} is empty; give some text to continue")
        return ids

    def predict(self, run_dir: Path, cfg: dict[str, Any], text: str) -> str:
        """The greedy continuation of ``text`` (``predict_tokens`` tokens), on one line."""
        model, tokenizer = self.load(run_dir, cfg)
        ids = self.encode_prompt(tokenizer, text, what="--input")
        n = min(cfg["predict_tokens"], model.max_len - 1)
        ids = ids[-(model.max_len - n):]
        out = model.generate(torch.tensor([ids]), n, eos_token_id=tokenizer.eos_id)
        return tokenizer.decode(out[0, len(ids):].tolist()).replace("\n", " ")

    def evaluate(self, run_dir: Path, cfg: dict[str, Any], data: str | None) -> dict[str, float]:
        """val_loss/val_perplexity on the run's val split, or on a text file (--data FILE)."""
        model, tokenizer = self.load(run_dir, cfg)
        if data is None:
            if cfg.get("corpus_sha256"):  # the corpus is the one trained on (pin_corpus)
                from ..data.corpus import read_meta

                _check_corpus(cfg, Path(cfg["data_dir"]), "evaluate")
                read_meta(cfg["data_dir"])  # and val.bin has the size its meta.json states
            windows = self.windows(cfg, "val")
            return lm_metrics(model, windows, cfg["batch_size"], cfg["val_batches"])
        return _file_metrics(model, tokenizer, Path(data), cfg)

    def attention_maps(self, run_dir: Path, cfg: dict[str, Any], text: str):
        """``attnlab plot attention`` on an lm run: the causal maps over the tokens of ``text``."""
        model, tokenizer = self.load(run_dir, cfg)
        ids = self.encode_prompt(tokenizer, text, what="--input")[: model.max_len]
        maps = [m[0] for m in model.get_attention_maps(torch.tensor([ids]))]  # L × (H, T, T)
        labels = [tokenizer.decode([i]) or "·" for i in ids]
        return maps, labels, labels


def _check_corpus(cfg: dict[str, Any], data_dir: Path, purpose: str) -> None:
    """``attnlab.runs.check_data_files`` on each file of the corpus' identity (``pin_corpus``),
    named as --data's meta.json or tokenizer.json."""
    from ..runs import check_data_files

    for name, digest in cfg["corpus_sha256"].items():
        check_data_files({"data": str(Path(data_dir) / name), "data_sha256": {"data": digest}},
                         purpose=purpose)


def _file_metrics(model, tokenizer, path: Path, cfg: dict[str, Any]) -> dict[str, float]:
    """val_loss/val_perplexity over non-overlapping windows of a text file, encoded chunk by
    chunk into a temporary token file and read through a memory map (any size of file)."""
    import tempfile

    from ..data.corpus import TokenWindows, encode_file

    if not path.is_file():
        raise UsageError(f"--data: file not found: {path}")
    with tempfile.TemporaryDirectory(prefix="attnlab-eval-") as tmp:
        tokens = Path(tmp) / "tokens.bin"
        n = encode_file([path], tokenizer, tokens, dtype=cfg["dtype"])
        if n < 2:
            raise UsageError(f"--data {path} holds fewer than 2 tokens")
        windows = TokenWindows(tokens, min(cfg["block_size"], n - 1), dtype=cfg["dtype"])
        return lm_metrics(model, windows, cfg["batch_size"])


TASKS = {"lm": LMTask()}
TASK = TASKS["lm"]  # the one task of this module, as it has always been importable
