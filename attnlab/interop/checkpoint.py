"""Read a Hugging Face model directory from disk as an attnlab model and tokeniser.

``read_checkpoint(path, task=...)`` never downloads: a path that is not a directory is refused
before ``transformers`` is imported, and every ``from_pretrained`` call passes
``local_files_only=True``. What it reads, per task:

    task        model_type           Hugging Face class -> attnlab model
    lm          gpt2                 GPT2LMHeadModel    -> CausalLM
    lm          llama, qwen2, qwen3, (safetensors, one file or shards with their index: read
                mistral              straight into a CausalLM, ``direct_read``; a
                                     pytorch_model.bin: LlamaForCausalLM, ...) -> CausalLM
                (also from a FILE.gguf of these, read as transformers reads it: ``gguf``)
    classify,   the BERT family      (none: the tensors read by name, ``bert_weights``)
    tag                                                 -> BertEncoder
    translate   marian               MarianMTModel      -> Seq2SeqTransformer

The model comes in float32 (what training from ``--init`` needs), or in the ``dtype`` asked
for: ``"auto"`` is the checkpoint's own, as ``transformers``' ``from_pretrained`` reads it by
default (config.json's ``dtype``, else the stored weights'; a GGUF file's matrices',
``gguf.stored_dtype``). A Llama-family safetensors
checkpoint is read straight into parameters of that dtype, so a bf16 one loaded in bf16 takes
about its own size in memory.

A BERT-family encoder is read without building a Hugging Face model, so without importing
``transformers``' model code; its tokeniser too, where it is BERT's or DistilBERT's WordPiece
and its files say what ``transformers`` builds from them (``wordpiece_files``); a checkpoint
saved without a pooler (RoBERTa's ``*ForSequenceClassification``, a sentence encoder) gives an
encoder without one.

Every bad input is a ``UsageError`` whose one-line message names the path: not a directory,
a ``model_type`` the task does not take, a missing ``config.json``, weights file or tokeniser
file, a ``pytorch_model.bin`` beside ``model.safetensors`` of other weights
(``twin_weights``), corrupt weights (a truncated file, tensors missing or of other shapes
than the config's) and a tokeniser with more ids than the model has embedding rows. A
tokeniser with fewer ids than rows is accepted (GPT-2-style vocabularies padded to a round
number): the model keeps its rows, the extra ids are never produced by the tokeniser.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError, first_few
from ..runs import read_json
from .gguf import is_gguf
from .llama_config import LLAMA_CLASSES
from .source import (BERT_FAMILY, INIT_MODEL_TYPES, LOAD_DTYPES, WEIGHTS_EXPECTED, WEIGHTS_FILES,
                     check_directory, check_tokenizer_files, weight_files, weights_digest)

__all__ = ["Checkpoint", "read_checkpoint", "read_tokenizer", "SUPPORTED", "WEIGHTS_FILES"]

# the ``task=`` of ``read_checkpoint`` -> the model types its converters below read (the table
# of the module doc): the tasks' own table, which ``Task.init_model_types`` reads too
SUPPORTED: dict[str, tuple[str, ...]] = INIT_MODEL_TYPES


@dataclass(frozen=True)
class Checkpoint:
    """What ``read_checkpoint`` read.

    Attributes:
        model: the attnlab model holding the checkpoint's weights, in eval mode.
        config: its typed config (``model.config``: ``CausalLMConfig``, ``BertEncoderConfig``
            or ``Seq2SeqConfig``).
        tokenizer: the checkpoint's own tokeniser as an attnlab ``Tokenizer``.
        source: the directory, resolved.
        weights: the weights file read (``model.safetensors``, the shards' index
            ``model.safetensors.index.json``, or ``pytorch_model.bin``).
        sha256: the SHA-256 of ``weights`` (hex; ``source.weights_digest`` for an index).
        model_type: ``config.json``'s ``model_type``.
    """

    model: Any
    config: Any
    tokenizer: Any
    source: Path
    weights: Path
    sha256: str
    model_type: str


def read_checkpoint(path: str | Path, *, task: str, dtype: str | None = None) -> Checkpoint:
    """The attnlab model and tokeniser of the Hugging Face directory ``path``, for ``task``.

    Args:
        path: a directory holding ``config.json``, ``model.safetensors`` or
            ``pytorch_model.bin``, and the tokeniser's files.
        task: ``"lm"``, ``"classify"``, ``"tag"`` or ``"translate"`` (see ``SUPPORTED``).
        dtype: the model's floating dtype, one of ``LOAD_DTYPES``: ``"auto"`` (the
            checkpoint's own), ``"bfloat16"``, ``"float16"`` or ``"float32"``; None: float32.

    Returns:
        A ``Checkpoint``; its model gives the Hugging Face model's outputs (logits for lm and
        translate, last hidden states for classify).

    Raises:
        UsageError: one line naming ``path`` for every bad input (see the module doc).
        ValueError: for a task not in ``SUPPORTED`` or a dtype not in ``LOAD_DTYPES``.

    Examples:
        >>> read_checkpoint("gpt2", task="lm")
        Traceback (most recent call last):
        ...
        attnlab.errors.UsageError: gpt2 is not a directory; attnlab never downloads: ...
    """
    if task not in SUPPORTED:
        raise ValueError(f"task must be one of {', '.join(SUPPORTED)}, got {task!r}")
    if dtype is not None and dtype not in LOAD_DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(LOAD_DTYPES)}, got {dtype!r}")
    if task == "lm" and is_gguf(path):
        return _read_gguf(path, task, dtype)  # read as float32 (transformers dequantises),
        # then cast to dtype (auto: the file's matrices')
    source = check_directory(path)
    model_type = _model_type(source, task)
    weights = _weights_file(source)
    check_tokenizer_files(source, model_type)
    _check_weights_readable(weights)
    from .twin_weights import check_twin_weights  # torch

    check_twin_weights(weights)  # a pytorch_model.bin beside, of other weights
    digest = weights_digest(weights)
    hf_model = None
    if model_type in BERT_FAMILY:  # read by name: none of transformers' model code is imported
        model = _cast(_read_encoder(source, model_type, weights),
                      read_json(source / "config.json"), dtype)
        rows = model.word_embeddings.num_embeddings
    elif reads_directly(task, model_type, weights):  # no transformers model, no copy
        model = _read_direct(source, weights, dtype or "float32")
        rows = model.token_embedding.num_embeddings
    else:
        hf_model = _load_model(source, task, weights)
        rows = hf_model.get_input_embeddings().num_embeddings
    tokenizer = _load_tokenizer(source, model_type)
    _check_vocabulary(source, rows, tokenizer)
    if hf_model is not None:
        model = _cast(_convert(source, hf_model), read_json(source / "config.json"), dtype)
    return Checkpoint(model=model, config=model.config, tokenizer=tokenizer, source=source,
                      weights=weights, sha256=digest, model_type=model_type)


def reads_directly(task: str, model_type: str, weights: Path) -> bool:
    """Whether ``direct_read`` reads this checkpoint: a Llama-family language model stored
    as safetensors (one file or shards)."""
    return (task == "lm" and model_type in LLAMA_CLASSES
            and weights.name.endswith((".safetensors", ".safetensors.index.json")))


def _read_direct(source: Path, weights: Path, dtype: str):
    """The ``CausalLM`` of a Llama-family safetensors directory, read into ``dtype``."""
    from .direct_read import read_llama_family
    from .weights import TORCH_DTYPES

    try:
        model, *disagree = read_llama_family(
            read_json(source / "config.json"), weights, TORCH_DTYPES.get(dtype, dtype))
    except ValueError as e:  # a setting attnlab cannot represent; a file cut short
        raise UsageError(f"{source}: {_one_line(e)}") from None
    refuse_incomplete(source, weights, *disagree)
    return model


def _cast(model, config: dict, dtype: str | None):
    """A model converted from ``transformers``' (float32) in ``dtype``; ``"auto"``:
    config.json's ``dtype`` (``torch_dtype`` before transformers 5), else float32, as
    ``from_pretrained`` reads a checkpoint that names none."""
    from .weights import TORCH_DTYPES

    if dtype == "auto":
        declared = config.get("dtype") or config.get("torch_dtype")
        dtype = declared if declared in TORCH_DTYPES else None
    return model if dtype in (None, "float32") else model.to(TORCH_DTYPES[dtype])


def _read_gguf(path: str | Path, task: str, dtype: str | None) -> Checkpoint:
    """``read_checkpoint`` of a GGUF file: the ``transformers`` model and tokenizer read from
    it (``attnlab.interop.gguf``), converted as a directory's are, in ``dtype`` (``"auto"``:
    the file's matrices', ``stored_dtype``)."""
    from .gguf import gguf_source, load_gguf

    found = gguf_source(path, task=task, model_types=SUPPORTED[task], flag="")
    hf_model, theirs = load_gguf(found.path, found)
    tokenizer = _gguf_tokenizer(path, theirs)
    _check_vocabulary(found.path, hf_model.get_input_embeddings().num_embeddings, tokenizer)
    # read only to be converted: given up tensor by tensor as ours fills (one copy at the peak)
    model = _cast(_convert(found.path, hf_model, release=True), {"dtype": found.dtype}, dtype)
    return Checkpoint(model=model, config=model.config, tokenizer=tokenizer, source=found.path,
                      weights=found.path, sha256=found.sha256, model_type=found.model_type)


def read_tokenizer(path: str | Path, *, task: str):
    """The tokeniser alone of the Hugging Face directory ``path`` (or, for lm, the GGUF file:
    its metadata's tokenizer), its weights not read, as ``read_checkpoint`` gives it:
    ``HFTokenizer`` or ``MarianTokenizer``.

    Raises:
        UsageError: one line naming ``path``: not a directory, no config.json, a
            ``model_type`` ``task`` does not take, missing or unreadable tokeniser files.
        ValueError: for a task not in ``SUPPORTED``.
    """
    if task not in SUPPORTED:
        raise ValueError(f"task must be one of {', '.join(SUPPORTED)}, got {task!r}")
    if task == "lm" and is_gguf(path):
        from .gguf import gguf_source, load_gguf_tokenizer

        found = gguf_source(path, task=task, model_types=SUPPORTED[task], flag="")
        return _gguf_tokenizer(path, load_gguf_tokenizer(found.path))
    source = check_directory(path)
    model_type = _model_type(source, task)
    check_tokenizer_files(source, model_type)
    return _load_tokenizer(source, model_type)


def _gguf_tokenizer(path: str | Path, theirs):
    """The ``HFTokenizer`` of a GGUF file's tokenizer as ``transformers`` reads it."""
    from .gguf import gguf_eog_ids
    from .hf_tokenizer import HFTokenizer

    try:  # its eos, eot and eom ids kept, as a directory's config eos ids are
        return HFTokenizer.from_transformers(theirs, gguf_eog_ids(Path(path).expanduser()))
    except ValueError as e:
        raise UsageError(f"{path}: its tokenizer cannot be read ({_one_line(e)})") from None


def _model_type(source: Path, task: str) -> str:
    config = source / "config.json"
    if not config.is_file():
        raise UsageError(f"{source} has no config.json: not a Hugging Face model directory")
    data = read_json(config, what="valid JSON")
    model_type = data.get("model_type") if isinstance(data, dict) else None
    if model_type not in SUPPORTED[task]:
        raise UsageError(f"{source}: model_type {model_type!r} is not supported for {task}; "
                         f"supported: {', '.join(SUPPORTED[task])}")
    return model_type


def _weights_file(source: Path) -> Path:
    found = next((source / n for n in WEIGHTS_FILES if (source / n).is_file()), None)
    if found is None:
        raise UsageError(f"{source} has no weights file: expected {WEIGHTS_EXPECTED}")
    return found


def _check_weights_readable(weights: Path) -> None:
    """A weights file cut short, damaged or not of its format is refused here, before
    ``transformers`` reads it: safetensors' header and tensor extents, or a zip-format
    ``pytorch_model.bin``'s checksums (``_check_crc``) and ``torch.load(weights_only=True)``."""
    for each in weight_files(weights):
        _check_file_readable(each)


def _check_file_readable(weights: Path) -> None:
    try:
        if weights.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(weights), framework="pt") as f:
                for name in f.keys():
                    f.get_slice(name)
        else:
            import torch

            # the CRC pass reads every byte; the load then maps the zip's records rather
            # than read them once more (a legacy pickle cannot be mapped: read whole)
            zipped = _check_crc(weights)
            torch.load(weights, map_location="cpu", weights_only=True, mmap=zipped)
    except Exception as e:  # SafetensorError, pickle errors, the I/O errors of a short file
        kind = "safetensors" if weights.suffix == ".safetensors" else "PyTorch weights"
        raise UsageError(f"{weights} is not a readable {kind} file ({_one_line(e)})") from None


def _check_crc(weights: Path) -> bool:
    """A ValueError naming the first storage record (``torch.save``'s ``<name>/data/<key>``,
    the bytes of one or more tensors) of a zip-format ``pytorch_model.bin`` whose bytes do
    not match the CRC-32 the zip stores for them: a byte damaged after the file was written
    (a copy or download gone wrong), which ``torch.load`` does not check and so reads as a
    wrong weight in silence. A legacy (not zip) pickle has no checksums to compare. Whether
    ``weights`` is a zip."""
    import zipfile

    if not zipfile.is_zipfile(weights):
        return False
    with zipfile.ZipFile(weights) as z:
        damaged = z.testzip()
    if damaged is not None:
        raise ValueError(f"its storage record {damaged} fails its CRC-32: the file was "
                         f"damaged after it was written")
    return True


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 200 else text[:197] + "..."


def _load_model(source: Path, task: str, weights: Path):
    """The Hugging Face model, every tensor of it read from ``weights`` (none left random)."""
    model, *disagree = _from_pretrained(source, task, weights)
    refuse_incomplete(source, weights, *disagree)
    return model.eval()


def _read_encoder(source: Path, model_type: str, weights: Path):
    """The ``BertEncoder`` of a BERT-family directory, its tensors read by name
    (``bert_weights``); with BERT's pooler where the weights hold one."""
    from .bert_weights import bert_encoder_of, bert_tensors

    try:
        model, *disagree = bert_encoder_of(
            bert_tensors(weights), model_type, read_json(source / "config.json"))
    except ValueError as e:
        raise UsageError(f"{source}: {_one_line(e)}") from None
    refuse_incomplete(source, weights, *disagree)
    return model


def refuse_incomplete(source: Path, weights: Path, missing: list[str], mismatched: list,
                      unexpected: list[str] = ()) -> None:
    """A UsageError naming the first tensor of ``weights`` of another shape than the config's
    (``mismatched``: (name, stored shape, config's shape)), else the first ones missing, else
    the first ones the config does not describe (``unexpected``: a config.json of fewer layers
    than its weights)."""
    config = source / "config.json"
    if mismatched:
        name, stored, expected = mismatched[0]
        raise UsageError(f"{weights} does not match {config}: {name} is "
                         f"{_shape(stored)} there, {_shape(expected)} by the config"
                         + (f" (and {len(mismatched) - 1} more)" if len(mismatched) > 1 else ""))
    if missing:
        raise UsageError(f"{weights} lacks tensors that {config} describes "
                         f"({first_few(sorted(missing))})")
    if unexpected:
        raise UsageError(f"{weights} holds tensors that {config} does not describe "
                         f"({first_few(sorted(unexpected))}): is config.json the one saved "
                         f"with these weights?")


def _shape(shape) -> str:
    return str(tuple(int(n) for n in shape))


def _from_pretrained(source: Path, task: str, weights: Path, **options):
    """``(model, tensors not in weights, [(name, stored shape, config's shape)], tensors of
    weights the model does not use)``; tensors of another shape are reported rather than
    raised, so the message can name them; unused ones are those transformers does not
    ignore (its ``_keys_to_ignore_on_load_unexpected``; ``direct_read.undescribed``)."""
    import transformers
    from transformers.utils import logging

    from .direct_read import undescribed
    from .llama_config import lacking

    logging.disable_progress_bar()  # "Loading weights" on stderr, in the middle of a run's output
    # looked up by name: each class imports its own model code
    cls = getattr(transformers, _model_class(source, task))
    verbosity = logging.get_verbosity()
    # transformers' own "LOAD REPORT" table of the tensors missing or of another shape: the
    # caller names them in one line (refused, as refuse_incomplete says)
    logging.set_verbosity_error()
    try:
        model, info = cls.from_pretrained(source, local_files_only=True,
                                          output_loading_info=True,
                                          ignore_mismatched_sizes=True, **options)
    except Exception as e:  # unreadable pickles, bad config values
        raise UsageError(f"{weights} cannot be loaded as the model {source / 'config.json'} "
                         f"describes ({_one_line(e)})") from None
    finally:
        logging.set_verbosity(verbosity)
    mismatched = sorted(k for k in info.get("mismatched_keys", ()) if isinstance(k, tuple))
    mismatched_names = {k[0] for k in mismatched}
    missing = lacking(model.config.to_dict(), [k for k in info.get("missing_keys", ())
                                               if k not in mismatched_names])
    return model, missing, mismatched, undescribed(info.get("unexpected_keys", ()))


def _model_class(source: Path, task: str) -> str:
    """The ``transformers`` class name of the directory's model (its ``model_type``, checked)."""
    if task == "translate":
        return "MarianMTModel"
    model_type = read_json(source / "config.json").get("model_type")
    return LLAMA_CLASSES.get(model_type, "GPT2LMHeadModel")


def _load_tokenizer(source: Path, model_type: str):
    if model_type == "marian":
        from .marian_tokenizer import MarianTokenizer

        return MarianTokenizer.from_directory(source)
    from .wordpiece_files import read_wordpiece

    direct = read_wordpiece(source)  # BERT's and DistilBERT's, without importing transformers
    if direct is not None:
        return direct
    from transformers import AutoTokenizer

    from .chat import config_eos_ids
    from .hf_tokenizer import HFTokenizer

    try:
        theirs = AutoTokenizer.from_pretrained(source, local_files_only=True)
        return HFTokenizer.from_transformers(theirs, config_eos_ids(source))
    except Exception as e:
        raise UsageError(f"{source}: its tokenizer files cannot be read ({_one_line(e)})") from None


def _check_vocabulary(source: Path, rows: int, tokenizer) -> None:
    """The tokeniser gives no id past the model's ``rows`` embedding rows."""
    if tokenizer.vocab_size > rows:
        raise UsageError(f"{source}: the tokenizer has {tokenizer.vocab_size} ids but the model's "
                         f"embedding only {rows} rows; ids from {rows} on would index past it")


def _convert(source: Path, hf_model, *, release: bool = False):
    """``from_hf(hf_model)`` in eval mode, its ValueError one line naming ``source``;
    ``release``: a GPT-2 or Llama-family ``hf_model`` is emptied as it is read."""
    from .hf import from_hf

    try:
        return from_hf(hf_model, release=release).eval()
    except ValueError as e:
        raise UsageError(f"{source}: {_one_line(e)}") from None
