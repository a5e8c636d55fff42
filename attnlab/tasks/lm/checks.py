"""The files ``attnlab train lm`` checks before a run directory is written: --data, a prepared
corpus or a text file, and on --resume the one the run started with. Light: the standard
library and ``attnlab.data.corpus_meta`` (no numpy, no torch), so that the spec can call it
before torch loads; the runtime checks a recorded corpus again with ``check_corpus``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import UsageError
from ...runs import check_data_files

__all__ = ["check_data", "check_corpus"]


def check_data(cfg: dict[str, Any]) -> None:
    """--data (given): a prepared corpus whose splits each hold a window of --block-size + 1
    tokens (its tokeniser recorded in ``cfg``), or a non-empty text file large enough; on
    --resume, the one the run started with. ``UsageError`` naming the flag otherwise."""
    data = Path(cfg["data"])
    if data.is_dir():
        _check_corpus_dir(cfg, data)
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


def check_corpus(cfg: dict[str, Any], data_dir: str | Path, purpose: str) -> None:
    """``attnlab.runs.check_data_files`` on each file of the corpus identity a run recorded
    (``cfg["corpus_sha256"]``: meta.json and tokenizer.json), named as --data's file; ``purpose``
    is "resume" or "evaluate" (it words the message)."""
    for name, digest in cfg["corpus_sha256"].items():
        check_data_files({"data": str(Path(data_dir) / name), "data_sha256": {"data": digest}},
                         purpose=purpose)


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
