"""The files ``attnlab train lm`` checks before a run directory is written: --data, a prepared
corpus or a text file, and on --resume the one the run started with; with --init, that a
prepared corpus was made with --init's tokenizer. Light: the standard
library and ``attnlab.data.corpus_meta`` (no numpy, no torch), so that the spec can call it
before torch loads; the runtime checks a recorded corpus again with ``check_corpus``.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ...data.chat_rows import is_rows_file
from ...data.tables import decode_utf8, file_format, read_whole_as_text
from ...errors import UsageError
from ...interop.gguf import gguf_chat_template, gguf_vocabulary, is_gguf
from ...paths import not_found
from ...runs import check_data_files, data_gone, read_json, record_data_files

HEAD_BYTES = 1 << 16  # what check_data decodes of a text --data before the run starts
DATASETS_MARKS = ("state.json", "dataset_dict.json")  # what save_to_disk writes in its directory

__all__ = ["check_data", "check_corpus", "check_init_corpus", "check_init_vocabulary",
           "init_is_run", "init_tokenizer", "hf_vocabulary", "check_rows",
           "init_has_chat_template"]


def check_data(cfg: dict[str, Any]) -> None:
    """--data (given): a prepared corpus whose splits each hold a window of --block-size + 1
    tokens (its tokeniser recorded in ``cfg``), or a non-empty text file large enough; on
    --resume, the one the run started with. ``UsageError`` naming the flag otherwise."""
    if cfg.get("resume"):
        cfg["data"] = _corpus_where_started(cfg)
    data = Path(cfg["data"])
    text = (cfg.get("data_sha256") or {}).get("data")  # else a corpus_sha256 pins a corpus
    if cfg.get("resume") and not data.exists() and (text or cfg.get("corpus_sha256")):
        raise data_gone("data", data, purpose="resume", what="file" if text else "corpus")
    _refuse_table(data, None if cfg.get("resume") else cfg.get("init"))
    if is_prepared(data):
        _check_corpus_dir(cfg, data)
        _record_tokenizer(cfg, data)
    elif not data.is_file():
        raise not_found("--data", data)
    elif data.stat().st_size == 0:
        raise UsageError(f"--data {data}: the file is empty")
    elif cfg.get("resume") and cfg.get("data_sha256"):
        check_data_files({"data": cfg["data"]}, cfg["data_sha256"], purpose="resume")
    if data.is_file():
        head = _check_text_head(data)
        if not cfg.get("resume"):  # a run that started on it goes on as it began
            _refuse_rows_as_text(data, head)
            refusal = None if is_rows_file(data) else read_whole_as_text(
                data, f"--data {data}", "train lm", _tokenizer_flag(cfg.get("init")))
            if refusal:  # a .csv or .tsv of texts (a .jsonl is instruction rows)
                raise UsageError(refusal)
            _check_size(data, cfg["block_size"])
    if cfg.get("resume") and cfg.get("out") and (Path(cfg["out"]) / "data").is_dir():
        _record_tokenizer(cfg, Path(cfg["out"]) / "data")  # what a text file became


def _corpus_where_started(cfg: dict[str, Any]) -> str:
    """--data of a resumed run: a prepared corpus that config.yaml names by a relative path
    (as typed, by runs before it was recorded absolute) is the one the run started on,
    config.yaml's ``data_dir``, not that path read from the directory resumed from (where it
    names nothing, or another corpus). A text or rows file is recorded absolute, and pinned."""
    data, started = cfg["data"], cfg.get("data_dir")
    if (started and Path(started).is_absolute() and not Path(data).is_absolute()
            and not (cfg.get("data_sha256") or {}).get("data")):
        return started
    return data


def _tokenizer_flag(init: str | None) -> str:
    """What the `attnlab prepare` a refusal names adds for a run with --init: its tokenizer
    (``check_init_corpus`` requires a corpus made with it)."""
    return f" --tokenizer {init}" if init else ""


def _check_size(data: Path, block_size: int) -> None:
    """The validation split is a tenth of the tokens, and needs one window of --block-size +
    1; no tokeniser makes more tokens than bytes (+1 for the EOS), so a text --data this small
    is refused now rather than after the run directory is made (once it is known to be text:
    a table or rows are told what they are first)."""
    size = data.stat().st_size
    if size + 1 < 10 * block_size:
        raise UsageError(f"--data {data}: {size} bytes are too few for --block-size "
                         f"{block_size} (its validation tenth must hold one window of "
                         f"--block-size + 1 tokens); give at least {10 * block_size} bytes of "
                         f"text or lower --block-size")


def _refuse_table(data: Path, init: str | None = None) -> None:
    """A Parquet file or a ``datasets`` directory as --data is refused: a table's text is a
    column of it, which only `attnlab prepare` has a flag to name (a datasets directory is
    told first: it is a directory, as a prepared corpus is). With --init, the command given
    tokenises with its tokenizer, as ``check_init_corpus`` requires."""
    if file_format(data) == "parquet" or any((data / f).is_file() for f in DATASETS_MARKS):
        tokenizer = _tokenizer_flag(init)
        raise UsageError(f"--data {data}: train lm reads a text file or a prepared corpus; "
                         f"prepare this table first (attnlab prepare {data} --text-column NAME"
                         f"{tokenizer} --out CORPUS), then give --data CORPUS")


def _check_text_head(data: Path) -> str:
    """The first ``HEAD_BYTES`` of a text --data decode as ``attnlab prepare`` will read them:
    a UTF-16, Latin-1 or binary file is refused now, not once the run directory is made.
    Returns the text decoded."""
    import codecs

    try:
        with open(data, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError as e:  # no permission, EIO: the words of attnlab.data.tables.read_bytes
        raise UsageError(f"--data {data}: cannot read the file ({e.strerror or e})") from None
    # not the end of the file: a character cut by HEAD_BYTES is left to prepare
    return decode_utf8(codecs.getincrementaldecoder("utf-8")(), head, 0, f"--data {data}")


# the fields of an instruction row (``chat_rows``' and Alpaca's), as a table's header names them
_ROW_FIELDS = ({"prompt", "response"}, {"instruction", "output"})
# a JSON document of rows: a list of objects, or an object, whose first thing is a key, and
# one of a row's keys given a value (not a wikitext "{{", a TOML "[table]", prose quoting a key)
_JSON_START = re.compile(r'\[?\s*\{\s*"')
# (ShareGPT's "conversations" too: its .json documents were trained on as text)
_JSON_KEY = re.compile(r'"(?:messages|conversations|%s)"\s*:'
                       % "|".join(sorted(set().union(*_ROW_FIELDS))))


def _refuse_rows_as_text(data: Path, head: str) -> None:
    """A text --data that holds instruction rows in another form than JSON Lines is refused
    naming what was seen: a CSV or TSV whose header names a row's fields, or a JSON document
    of rows (Alpaca's ``[{"instruction": ...}]``). Read as text, the run would learn the
    file's commas, quotes and keys, and its loss would count the prompts too."""
    stripped = head.lstrip()
    header = stripped.split("\n", 1)[0].strip()
    fields = {f.strip().strip('"').lower() for f in header.replace("\t", ",").split(",")}
    if any(row <= fields for row in _ROW_FIELDS):
        seen = f"its header ({header[:60]}) names instruction rows"
    elif _JSON_START.match(stripped) and _JSON_KEY.search(stripped[:2000]):
        seen = "it is JSON that holds instruction rows"
    else:
        return
    # prepare reads a .csv or .tsv by its --text-column (read whole, it is a .txt's), and
    # this check refuses any name
    named = data.with_suffix(".txt") if file_format(data) else data
    rename = f"rename it {named.name}, then " if named != data else ""
    as_text = f"{rename}prepare it (attnlab prepare {named} --out CORPUS) and give --data CORPUS"
    raise UsageError(f"--data {data}: {seen}, which would be trained on as plain text; "
                     f"instruction rows are read from a JSON Lines file (.jsonl: one "
                     f"{{\"prompt\": ..., \"response\": ...}} or {{\"messages\": [...]}} a line); "
                     f"to train on the file as text, {as_text}")


def check_corpus(corpus_sha256: dict[str, str], data_dir: str | Path, purpose: str) -> None:
    """``attnlab.runs.check_data_files`` on each file of the corpus identity a run recorded
    (``corpus_sha256`` in its config.yaml: the SHA-256 of meta.json and tokenizer.json, by
    name), named as --data's file; ``purpose`` is "resume" or "evaluate" (it words the
    message)."""
    for name, digest in corpus_sha256.items():
        check_data_files({"data": str(Path(data_dir) / name)}, {"data": digest}, purpose=purpose)


def _check_corpus_dir(cfg: dict[str, Any], data: Path) -> None:
    from ...data.corpus_meta import SPLITS, read_meta  # a light reader: no numpy, no torch

    meta = read_meta(data)
    if cfg.get("resume") and cfg.get("corpus_sha256"):
        check_corpus(cfg["corpus_sha256"], data, "resume")
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


def is_prepared(data: str | Path) -> bool:
    """Whether --data names a corpus ``attnlab prepare`` wrote (a directory), not a text file."""
    return Path(data).is_dir()


def init_is_run(init: str | Path) -> bool:
    """Whether the --init directory is an attnlab run (its config.yaml), not a Hugging Face
    directory (config.json), as ``attnlab.interop.source.read_init_source`` tells them."""
    return (Path(init) / "config.yaml").is_file() and not (Path(init) / "config.json").is_file()


def init_tokenizer(init: str | Path):
    """--init's tokenizer, read as the run reads it: a Hugging Face directory's or a GGUF
    file's through ``transformers`` (``read_tokenizer``), an lm run's tokenizer.json. Read
    before the run directory is written, so that one that cannot be read is a one-line
    refusal (``UsageError`` naming the file) with nothing left behind."""
    if init_is_run(init):
        from ...interop.saved import load_any_tokenizer

        return load_any_tokenizer(Path(init) / "tokenizer.json")
    from ...interop.checkpoint import read_tokenizer

    return read_tokenizer(init, task="lm")


def check_init_corpus(init: str | Path, data: Path) -> None:
    """A prepared --data trained with --init: its tokenizer must be --init's, else its token
    ids would mean other tokens to the pretrained model. An attnlab run's tokenizer.json must
    hold what the corpus's does; a Hugging Face directory's vocabulary (token -> id, added
    tokens included) must be the corpus's. ``UsageError`` naming both otherwise; a table or
    a directory that is no corpus (no meta.json) is refused as ``check_data`` refuses it."""
    from ...data.corpus_meta import read_meta

    _refuse_table(data, str(init))
    read_meta(data)
    ours = read_json(data / "tokenizer.json", what="a tokenizer file written by attnlab")
    kind = ours.get("type") if isinstance(ours, dict) else None
    if init_is_run(init):
        theirs = read_json(Path(init) / "tokenizer.json", what="a tokenizer file written by attnlab")
        same = _without_checkpoint_eos(ours) == _without_checkpoint_eos(theirs)
        differs = None if same else _kind_or(kind, "its tokenizer.json differs")
    elif kind != "hf":
        differs = f"the {kind} tokenizer"
    else:
        differs = _vocabulary_differs(_vocabulary(ours["tokenizer"]), hf_vocabulary(init))
    if differs:
        raise UsageError(f"--data {data} was prepared with another tokenizer than --init "
                         f"{init}'s ({differs}); tokenise the text with `attnlab prepare "
                         f"FILE... --tokenizer {init} --out CORPUS`")


def check_init_vocabulary(init: str | Path, rows: int) -> None:
    """A Hugging Face directory whose tokenizer gives ids past its model's ``rows`` embedding
    rows is refused (fewer ids than rows is GPT-2's padding, and fine); ``read_checkpoint``
    checks it again when the weights are read."""
    ids = max(hf_vocabulary(init).values(), default=-1) + 1
    if ids > rows:
        raise UsageError(f"--init {init}: the tokenizer has {ids:,} ids but the model's embedding "
                         f"only {rows:,} rows (config.json's vocab_size); ids from {rows:,} on "
                         f"would index past it")


def _without_checkpoint_eos(tokenizer: Any) -> Any:
    """A tokenizer.json without the eos ids of the checkpoint it was read from
    (``checkpoint_eos_ids``): what ends generation, not what a text's ids are; a corpus or run
    made before they were kept has none, and its ids are the same."""
    if not isinstance(tokenizer, dict):
        return tokenizer
    return {k: v for k, v in tokenizer.items() if k != "checkpoint_eos_ids"}


def _kind_or(kind: str | None, otherwise: str) -> str:
    return f"the {kind} tokenizer" if kind != "hf" else otherwise


def _vocabulary(fast: dict[str, Any]) -> dict[str, int]:
    """token -> id of a ``tokenizers`` JSON document, added tokens included."""
    return {**fast["model"]["vocab"], **{t["content"]: t["id"] for t in fast.get("added_tokens", [])}}


def hf_vocabulary(directory: str | Path) -> dict[str, int]:
    """token -> id of a Hugging Face directory's tokenizer: tokenizer.json's model and added
    tokens, or vocab.json and added_tokens.json."""
    if is_gguf(directory):  # a GGUF file: its tokenizer.ggml.tokens
        return gguf_vocabulary(directory)
    directory = Path(directory)
    if (directory / "tokenizer.json").is_file():
        return _vocabulary(read_json(directory / "tokenizer.json", what="a tokenizer.json"))
    vocab = read_json(directory / "vocab.json", what="a vocab.json")
    added = directory / "added_tokens.json"
    return {**vocab, **(read_json(added, what="an added_tokens.json") if added.is_file() else {})}


def _vocabulary_differs(ours: dict[str, int], theirs: dict[str, int]) -> str | None:
    """How two vocabularies differ, in words; None when they are the same."""
    if ours == theirs:
        return None
    if len(ours) != len(theirs):
        return f"a vocabulary of {len(ours):,} tokens, --init's has {len(theirs):,}"
    token = next(t for t in sorted(ours) if theirs.get(t) != ours[t])
    found = theirs.get(token)
    return (f"token {token!r} is id {ours[token]} there, "
            + (f"{found} in --init's" if found is not None else "absent from --init's"))


def check_rows(cfg: dict[str, Any], check_init) -> Any:
    """--data FILE.jsonl, instruction rows (``attnlab.data.chat_rows``): read and checked now,
    before the run directory is made; returns them (``Rows``) for the runtime.

    A new run needs --init (the rows fine-tune a pretrained model; ``check_init`` checks it)
    and records how its rows become tokens (``instruction``): "chat" through --init's chat
    template, or "plain" (prompt + response + eos) for a checkpoint without one, which then
    refuses a "messages" row. The file's SHA-256 is recorded (``data_sha256``) and on
    --resume must be the one the run started with; the held-out tenth must have a row.
    """
    from ...data.chat_rows import check_last_turns, holdout, read_rows
    from ...data.tables import check_digest

    data, resuming = cfg["data"], bool(cfg.get("resume") and cfg.get("data_sha256"))
    if resuming:  # first: its message says the file changed since the run started
        check_data_files({"data": data}, cfg["data_sha256"], purpose="resume")
    else:
        _refuse_texts_as_rows(data, cfg.get("init"))
        if not cfg.get("init"):
            raise UsageError(f"--data {data} holds instruction rows, which fine-tune a "
                             f"pretrained model: give --init DIR (a Hugging Face directory, a "
                             f".gguf file or an lm run)")
        check_init(cfg)
    rows = read_rows(data, new=not cfg.get("resume"))
    if not cfg.get("resume"):
        check_last_turns(rows)
        cfg["instruction"] = "chat" if init_has_chat_template(cfg["init"]) else "plain"
    if cfg.get("instruction") == "plain" and True in rows.as_messages:
        line = rows.lines[rows.as_messages.index(True)]
        raise UsageError(f"--data {data} line {line}: a \"messages\" row needs a chat template, "
                         f"and --init {cfg.get('init')} has none (a base model); write it as "
                         f"\"prompt\" and \"response\", or start from an instruct checkpoint")
    holdout(len(rows.conversations), cfg["seed"], where=f"--data {data}")
    if not resuming:  # the settings dict, before the run config is frozen
        cfg.update(record_data_files({"data": data}))
    check_digest(cfg["data"], rows.sha256, (cfg.get("data_sha256") or {}).get("data"),
                 what="--data")
    return rows


# the fields of an instruction row, read (chat_rows) or told how to be written (Alpaca's,
# ShareGPT's)
_ROW_KEYS = {"messages", "conversations", *set().union(*_ROW_FIELDS)}


def _refuse_texts_as_rows(data: str | Path, init: str | None) -> None:
    """A .jsonl --data whose first row has no field of an instruction row (``{"text": ...}``
    a line: texts, as a table of documents holds them) is refused naming the prepare that
    makes a corpus of its texts, as a .csv of them is (``read_whole_as_text``): not told it
    holds instruction rows that need --init. With --init, the prepare tokenises with its
    tokenizer (``check_init_corpus``). A first row that is rows, or not a JSON object, is
    left to ``read_rows``."""
    import json

    number, row = 0, None
    try:
        with open(data, "rb") as f:
            for number, line in enumerate(f, start=1):
                if line.strip():
                    row = json.loads(line.decode("utf-8-sig" if number == 1 else "utf-8"))
                    break
    except (OSError, ValueError, RecursionError):  # (UnicodeDecodeError is a ValueError)
        return  # named by read_rows, in its words
    if not isinstance(row, dict) or any(k in row for k in _ROW_KEYS):
        return
    column = "text" if "text" in row else next(
        (k for k, v in row.items() if isinstance(v, str)), "NAME")
    tokenizer = _tokenizer_flag(init)
    raise UsageError(f"--data {data} line {number}: a row of {', '.join(row) or 'no fields'}, "
                     f"not an instruction row (\"messages\", or \"prompt\" and \"response\"): "
                     f"texts, which train lm reads prepared; prepare them first (attnlab prepare "
                     f"{data} --text-column {column}{tokenizer} --out CORPUS, then give --data "
                     f"CORPUS)")


def init_has_chat_template(init: str | Path) -> bool:
    """Whether --init's tokenizer has a chat template: a Hugging Face directory's files, a
    GGUF file's metadata, or an lm run's tokenizer.json (read without torch)."""
    from ...interop.chat import has_chat_template

    if is_gguf(init):
        return gguf_chat_template(init) is not None
    return has_chat_template(init)
