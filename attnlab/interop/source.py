"""What ``--init DIR`` names, read without torch: a Hugging Face model directory or an attnlab run.

``attnlab train lm|classify|translate --init DIR`` starts from DIR's weights. Before a run
directory exists, ``read_init_source(DIR, task=..., model_types=...)`` checks what it can
without loading a model (the spec's checks import no torch) and returns an ``InitSource``:
the directory's config, its weights file and that file's SHA-256, which config.yaml records.
The weights themselves are read later, by the task's runtime (``attnlab.interop.checkpoint``
for a Hugging Face directory, ``attnlab.load`` for a run). Nothing is ever downloaded: a name
that is not a directory is refused, saying how to fetch it.

    kind   DIR holds                                   model_type
    hf     config.json, model.safetensors (or its      config.json's, one of ``model_types``:
           shards and model.safetensors.index.json)    the task's ``Task.init_model_types``
           or pytorch_model.bin, the tokeniser's files (lm: gpt2, llama, qwen2, qwen3,
                                                       mistral; classify: the BERT family;
                                                       translate: marian)
    hf     DIR is a FILE.gguf (``attnlab.interop.gguf``: its general.architecture one of
           ``model_types``; its config, tokenizer and tensors as transformers reads them)
    run    config.yaml of the same task, model.safetensors   the task's name

Which model types a task converts from is the task's declaration, not this module's: the
caller passes them (``Task.init_source`` does), so a task that starts only from its own runs
needs nothing here.

Every refusal is a ``UsageError`` of one line naming DIR.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..runs import file_digest, read_json
from ..settings import AdaptSettings, check_argument
from .gguf import gguf_dtype, gguf_quantised, gguf_source, is_gguf

__all__ = ["InitSource", "read_init_source", "reread_init_source", "WEIGHTS_FILES", "BERT_FAMILY",
           "GPT2_TYPES", "LLAMA_TYPES", "MARIAN_TYPES", "weights_digest", "weight_files",
           "file_stat", "settled_stat",
           "weights_file", "WEIGHTS_EXPECTED", "INIT_MODEL_TYPES",
           "FAST_TOKENIZER_FILES", "MARIAN_TOKENIZER_FILES", "check_directory",
           "checkpoint_dropout", "ATTENTION_DROPOUT_KEYS", "LOAD_DTYPES", "rounded_init_note"]

# the Hugging Face model types attnlab converts, by the model it converts them to
GPT2_TYPES = ("gpt2",)  # to a CausalLM
LLAMA_TYPES = ("llama", "qwen2", "qwen3", "mistral")  # to a CausalLM (interop.llama_config)
BERT_FAMILY = ("bert", "roberta", "xlm-roberta", "camembert", "distilbert")  # an encoder
MARIAN_TYPES = ("marian",)  # to a Seq2SeqTransformer
# the one table of which Hugging Face model types each task starts from with --init: the
# task's ``Task.init_model_types`` is its row, and ``read_checkpoint`` reads the same rows
INIT_MODEL_TYPES: dict[str, tuple[str, ...]] = {"lm": GPT2_TYPES + LLAMA_TYPES,
                                                "classify": BERT_FAMILY, "tag": BERT_FAMILY,
                                                "translate": MARIAN_TYPES}
# the first present is read; the index of sharded safetensors stands for its shards
WEIGHTS_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
WEIGHTS_EXPECTED = ("model.safetensors or pytorch_model.bin (or safetensors shards with their "
                    "model.safetensors.index.json)")
# the tokeniser files of a fast tokeniser (any one set) and of Marian's (all of them)
FAST_TOKENIZER_FILES = (("tokenizer.json",), ("vocab.json", "merges.txt"), ("vocab.txt",))
MARIAN_TOKENIZER_FILES = ("source.spm", "target.spm", "vocab.json")
RUN_WEIGHTS = "model.safetensors"
# the dtypes a checkpoint's model can be loaded in (``read_checkpoint(dtype=)``, ``generate
# --dtype``): "auto" is the checkpoint's own, as ``transformers``' ``from_pretrained`` reads it
LOAD_DTYPES = ("auto", "bfloat16", "float16", "float32")


@dataclass(frozen=True)
class InitSource:
    """A checked ``--init`` directory.

    Attributes:
        path: the directory, resolved.
        kind: ``"hf"`` (a Hugging Face model directory) or ``"run"`` (an attnlab run).
        config: config.json's mapping (hf) or config.yaml's (run).
        model_type: config.json's ``model_type`` (hf); the task's name (run).
        weights: the weights file the run will read.
        sha256: the SHA-256 of ``weights`` (hex; for sharded safetensors, of the index's and
            the shards' digests: ``weights_digest``), recorded as config.yaml's ``init_sha256``.
    """

    path: Path
    kind: str
    config: dict[str, Any]
    model_type: str
    weights: Path
    sha256: str


def check_directory(path: str | Path, flag: str = "") -> Path:
    """``path`` resolved, if it is a directory; a hub name or a file refused in one line.

    Examples:
        >>> check_directory("gpt2", "--init")
        Traceback (most recent call last):
        ...
        attnlab.errors.UsageError: --init gpt2 is not a directory; attnlab never downloads: ...
    """
    name = f"{flag} {path}" if flag else str(path)
    p = Path(path).expanduser()
    if p.is_file():
        raise UsageError(f"{name} is a file, not a Hugging Face model directory (config.json, "
                         f"weights and tokenizer files) nor an attnlab run")
    if not p.is_dir():
        raise UsageError(f"{name} is not a directory; attnlab never downloads: fetch it with "
                         f"`huggingface-cli download {path} --local-dir DIR` (or "
                         f"`save_pretrained(DIR)`) on a machine online and pass DIR")
    return p.resolve()


def read_init_source(path: str | Path, *, task: str, model_types: tuple[str, ...] = (),
                     flag: str = "--init") -> InitSource:
    """The checked ``--init`` directory ``path`` for the task named ``task``, its weights'
    digest computed; see the module doc.

    Args:
        path: a Hugging Face model directory or an attnlab run of ``task``.
        task: the task's name: a run must be of it, and messages name it.
        model_types: the Hugging Face ``model_type``s ``task`` converts from (its
            ``Task.init_model_types``); empty: only attnlab runs of ``task``.
        flag: the option ``path`` came from, to name in messages.

    Raises:
        UsageError: one line naming ``flag`` and ``path``: empty (``Path("")`` would be
            the current directory: ``AdaptSettings.init``'s rule); not a directory; neither
            config.json nor config.yaml; a ``model_type`` or run of another task (naming it
            and what the task takes); no weights file; no tokeniser files.

    Examples:
        >>> read_init_source("gpt2", task="lm", model_types=("gpt2",))
        Traceback (most recent call last):
        ...
        attnlab.errors.UsageError: --init gpt2 is not a directory; attnlab never downloads: ...
    """
    check_argument(AdaptSettings, "init", path, shown=flag, error=UsageError)
    return _read_source(path, task, model_types, flag)


def _read_source(path: str | Path, task: str, model_types: tuple[str, ...] | None,
                 flag: str) -> InitSource:
    """``read_init_source``; ``model_types`` None: any (the digest pins the file)."""
    if is_gguf(path):  # a GGUF file: its config and model type as transformers reads them
        found = gguf_source(path, task=task, model_types=model_types, flag=flag)
        return InitSource(found.path, "hf", found.config, found.model_type, found.path,
                          found.sha256)
    source = check_directory(path, flag)
    name = f"{flag} {path}"
    if (source / "config.yaml").is_file() and not (source / "config.json").is_file():
        return _run_source(source, task, name, flag)
    config_file = source / "config.json"
    if not config_file.is_file():
        raise UsageError(f"{name}: no config.json (a Hugging Face model directory) nor "
                         f"config.yaml (an attnlab run)")
    config = read_json(config_file, what="valid JSON")
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_types is not None and not model_types:
        raise UsageError(f"{name}: attnlab train {task} starts from attnlab {task} runs only, "
                         f"not from Hugging Face directories (model_type {model_type!r})")
    if model_types is not None and model_type not in model_types:
        raise UsageError(f"{name}: model_type {model_type!r} is not supported for {task}; "
                         f"supported: {', '.join(model_types)}")
    weights = weights_file(source)
    if weights is None:
        raise UsageError(f"{name} has no weights file: expected {WEIGHTS_EXPECTED}")
    check_tokenizer_files(source, model_type, name)
    _check_transformers(source, model_type, name)
    return InitSource(source, "hf", config, model_type, weights, weights_digest(weights))


def _check_transformers(source: Path, model_type: str, name: str) -> None:
    """A UsageError naming what to install where reading this checkpoint needs
    ``transformers`` (the optional ``hf`` extra) and it is not installed: found here, before a
    run directory exists, not once the run reads the weights. Only a BERT-family checkpoint
    whose tokeniser ``wordpiece_files`` reads needs none."""
    import importlib.util

    if importlib.util.find_spec("transformers") is not None:
        return
    if model_type in BERT_FAMILY:
        from .wordpiece_files import read_wordpiece

        if read_wordpiece(source) is not None:
            return
    raise UsageError(f"{name}: reading a {model_type} checkpoint needs the transformers "
                     f"package, which is not installed: pip install 'attnlab[hf]'")


def weights_file(source: Path) -> Path | None:
    """The weights file of the Hugging Face directory ``source`` that is read: the first of
    ``WEIGHTS_FILES`` there; None without one."""
    return next((source / n for n in WEIGHTS_FILES if (source / n).is_file()), None)


def weight_files(weights: Path) -> list[Path]:
    """The files holding the tensors of ``weights``: itself, or the shards a
    ``model.safetensors.index.json`` maps tensors to (sorted); UsageError naming the index
    when it is not valid or names a shard that is not there."""
    if not weights.name.endswith(".index.json"):
        return [weights]
    index = read_json(weights, what="valid JSON")
    names = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(names, dict) or not names:
        raise UsageError(f"{weights} has no weight_map of tensor names to shard files")
    shards = [weights.parent / n for n in sorted(set(map(str, names.values())))]
    if missing := [p.name for p in shards if not p.is_file()]:
        raise UsageError(f"{weights} names shard {missing[0]}, which is not in {weights.parent}")
    return shards


def weights_digest(weights: Path) -> str:
    """The SHA-256 (hex) that pins ``weights``: the file's own; for a sharded checkpoint's
    index, the SHA-256 of the index's digest and each shard's name and digest, in name order
    (a changed shard or index changes it). Each file is read once per process while it is
    unchanged (``settled_stat``): a run's checks and its start take the digest of the same
    weights, and each pass over a big checkpoint costs seconds."""
    if not weights.name.endswith(".index.json"):
        return _digest(weights)
    import hashlib

    h = hashlib.sha256(_digest(weights).encode())
    for shard in weight_files(weights):
        h.update(f"\n{shard.name} {_digest(shard)}".encode())
    return h.hexdigest()


# settled_stat -> the file's SHA-256, taken in this process
_DIGESTS: dict[tuple, str] = {}
# git's "racily clean" rule: a file whose mtime is this close to now may be rewritten again
# within the same timestamp on a filesystem that counts whole seconds (ext3, HFS+, NFS) or
# two (FAT), with the same size, so its stat cannot tell the two versions apart
RACY_NS = 2_000_000_000


def _digest(path: Path) -> str:
    key = settled_stat(path)
    if key is None:
        return file_digest(path)
    if key not in _DIGESTS:
        _DIGESTS[key] = file_digest(path)
    return _DIGESTS[key]


def file_stat(path: Path) -> tuple:
    """What changes when the file ``path`` does: its identity, size and times (``st_ctime``
    changes with any write, rename or change of its metadata, and no user can set it back),
    so a result computed from its bytes can be kept while this is the same."""
    s = Path(path).stat()
    return (str(Path(path).resolve()), s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns,
            s.st_ctime_ns)


def settled_stat(path: Path) -> tuple | None:
    """``file_stat(path)`` where a result computed from the file's bytes now may be kept;
    None while its mtime is less than ``RACY_NS`` old, when a rewrite of the same size could
    keep every field where timestamps are coarse."""
    now = time.time_ns()
    key = file_stat(path)
    return key if now - key[4] >= RACY_NS else None


def check_tokenizer_files(source: Path, model_type: str, name: str | None = None) -> None:
    """A UsageError naming ``name`` (default: the directory) if the tokeniser's files of a
    ``model_type`` checkpoint are not all there."""
    name = name or str(source)
    if model_type == "marian":
        missing = [n for n in MARIAN_TOKENIZER_FILES if not (source / n).is_file()]
        if missing:
            raise UsageError(f"{name} has no tokenizer file {', '.join(missing)} (a Marian "
                             f"tokenizer needs {', '.join(MARIAN_TOKENIZER_FILES)})")
        return
    if not any(all((source / n).is_file() for n in names) for names in FAST_TOKENIZER_FILES):
        sets = " or ".join(" + ".join(names) for names in FAST_TOKENIZER_FILES)
        raise UsageError(f"{name} has no tokenizer files: expected {sets}")


def _run_source(source: Path, task: str, name: str, flag: str) -> InitSource:
    from ..runs import read_yaml

    config = read_yaml(source / "config.yaml", what=flag)
    if not isinstance(config, dict) or config.get("task") != task:
        found = config.get("task") if isinstance(config, dict) else None
        raise UsageError(f"{name} holds a {found!r} run, not {task!r}: {flag} takes "
                         f"only {task} runs")
    weights = source / RUN_WEIGHTS
    if not weights.is_file():
        raise UsageError(f"{name} has no {RUN_WEIGHTS}: the run has not finished (continue it "
                         f"with --resume --out {source})")
    return InitSource(source, "run", config, task, weights, weights_digest(weights))



def reread_init_source(path: str | Path, sha256: str, *, task: str) -> InitSource:
    """``read_init_source`` again, when the run reads the weights: a file changed since the
    run's settings were checked (and its digest recorded) is refused in one line. Its model
    type was checked then; the digest pins the file, so it is not checked again.

    Raises:
        UsageError: as ``read_init_source``, or naming the weights file whose SHA-256 is no
            longer ``sha256``.
    """
    source = _read_source(path, task, None, "--init")
    if source.sha256 != sha256:
        raise UsageError(f"--init {path}: {source.weights.name} changed since the run was "
                         f"configured (SHA-256 {source.sha256[:12]}..., config.yaml records "
                         f"{sha256[:12]}...); start the run again")
    return source


# model_type -> config.json's key of the dropout on the hidden states (the residual stream),
# which attnlab's --dropout is; its default when the key is absent is transformers' own
_DROPOUT_KEYS = {**{t: ("resid_pdrop", 0.1) for t in GPT2_TYPES},
                 **{t: ("hidden_dropout_prob", 0.1) for t in BERT_FAMILY},
                 "distilbert": ("dropout", 0.1),
                 **{t: ("dropout", 0.1) for t in MARIAN_TYPES}}
# model_type -> config.json's key of a dropout on the attention weights of its own, which
# attnlab's --attention-dropout is (the Llama family's attention_dropout: LlamaSpec's)
ATTENTION_DROPOUT_KEYS = {t: ("attn_pdrop", 0.1) for t in GPT2_TYPES}


def checkpoint_dropout(source: InitSource, keys: dict[str, tuple[str, float]] = _DROPOUT_KEYS
                       ) -> tuple[float, str] | None:
    """(the dropout a Hugging Face checkpoint was trained with, config.json's key for it), the
    value ``--dropout`` takes when a run from ``--init`` does not name it (a Marian
    fine-tune ran at translate's default 0.0 where opus-mt says 0.1); None for an attnlab run
    (its own dropout is a fine-tuning choice) or a value that is not a fraction in [0, 1).
    ``keys``: another table of keys (``ATTENTION_DROPOUT_KEYS``: --attention-dropout's).

    Examples:
        >>> s = InitSource(Path("m"), "hf", {"dropout": 0.1}, "marian", Path("w"), "")
        >>> checkpoint_dropout(s)
        (0.1, 'dropout')
    """
    if source.kind != "hf" or source.model_type not in keys:
        return None
    key, default = keys[source.model_type]
    value = source.config.get(key, default)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1
    return (float(value), key) if ok else None


def rounded_init_note(init: str | None, precision: str) -> str | None:
    """The note of a run whose ``--precision bf16-true`` rounds ``--init``'s weights to
    bfloat16 from the floating dtype they are stored in (float16, float32: a GGUF file's
    matrices', ``gguf_dtype``, else config.json's ``dtype`` or ``torch_dtype``); None where
    nothing is rounded or the files do not say (an attnlab run).

    Examples:
        >>> rounded_init_note("runs/lm-1", "bf16-true") is None
        True
    """
    if not init or str(precision) != "bf16-true":
        return None
    path = Path(init).expanduser()
    if is_gguf(path):
        stored = gguf_dtype(path)
    else:
        config = path / "config.json"
        data = read_json(config, what="valid JSON") if config.is_file() else {}
        stored = data.get("dtype") or data.get("torch_dtype") if isinstance(data, dict) else None
    if stored not in ("float16", "float32"):
        return None
    if is_gguf(path) and gguf_quantised(path):  # Q8_0, Q4_K: read as float32
        stored = "dequantised (float32)"
    return (f"note: --precision bf16-true rounds --init {init}'s {stored} weights to bfloat16 "
            f"(8 significant bits); --precision bf16-mixed keeps them exact and computes in "
            f"bfloat16")
