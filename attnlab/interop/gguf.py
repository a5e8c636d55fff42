"""A ``.gguf`` file (llama.cpp's format, how most small models are shared offline) read as
``transformers`` reads it, for ``--init FILE.gguf`` and ``attnlab generate FILE.gguf``.

A GGUF file holds a model's tensors (float or block-quantised), its hyperparameters under the
architecture's name (``gpt2.embedding_length``, ``llama.block_count``, ...) and its tokenizer
(``tokenizer.ggml.*``, the chat template included). ``transformers`` reads it through the
``gguf`` package: the tensors dequantised to float32, the metadata renamed into the family's
``config.json`` keys. This module asks it for the same, so that what follows is the path of a
Hugging Face directory: ``gguf_source`` gives the config values and model type that
``--init``'s settings are read from (``read_init_source``), ``load_gguf`` the
``transformers`` model and tokenizer that ``read_checkpoint`` converts.

The model is built from the config and loaded with ``transformers``' own GGUF reader
(``load_gguf_checkpoint``): ``from_pretrained(gguf_file=...)`` would do the same but insists
on the ``accelerate`` package. Where ``transformers`` leaves a GPT-2 key out (it reads
``gpt2.context_length`` as ``n_ctx``, not ``n_positions``, so a file of another context length
than 1024 does not load), the GGUF's value fills it (``_FILLED``).

What ``transformers`` leaves out of a Llama-family file is read here (``_head_dim``,
``_rope_scaling``): the head width ``{arch}.attention.key_length`` and RoPE's scaling, linear
from the metadata or Llama 3.1's llama3 from llama.cpp's ``rope_freqs`` tensor.

Refused in one line naming the file, before a run directory is written: a file that is not
GGUF, one part of a model split over several files (``_check_whole``), one cut short (in its header, or naming the tensor) or with a tensor type id ``gguf``
does not know (naming the tensor, ``_tensor_table_refusal``), an architecture attnlab does not
convert (naming it and the supported ones: the caller's ``model_types``, the task's row of
``INIT_MODEL_TYPES``), a tensor type the ``gguf`` reader cannot dequantise (naming the type and the tensor), a RoPE scaling attnlab
cannot run (yarn, longrope, other rope_freqs), a missing metadata key that fixes the model's
numbers (``_REQUIRED``), a file without a tokenizer (``_TOKENIZER_KEYS``), and tensors the
config does not describe (a Llama-family file's from its header, ``_check_tensors``), and a
tensor with values that dequantise to NaN or infinity, naming it (from its bytes: F32, F16 and
BF16 values, a block type's float16 scales, ``_check_finite_bytes``; a block type whose
scales are not read there once dequantised, ``_check_finite``, after the run has started).
"""
from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import UsageError, first_few
from .chat import _one_line
from .llama_config import LLAMA_FAMILY

__all__ = ["GGUF_SUFFIX", "is_gguf", "GGUFSource", "gguf_source", "gguf_vocabulary",
           "gguf_eog_ids", "gguf_dtype", "gguf_quantised", "gguf_chat_template",
           "check_gguf_chat_template", "load_gguf", "load_gguf_tokenizer"]

GGUF_SUFFIX = ".gguf"
# per model type: the config key transformers leaves out <- the key it reads the GGUF value into
_FILLED = {"gpt2": {"n_positions": "n_ctx", "n_inner": "feed_forward_length"}}


def is_gguf(path: str | Path) -> bool:
    """Whether ``path`` names a GGUF file (by its suffix; the file is read later).

    Examples:
        >>> is_gguf("models/SmolLM2-135M.Q8_0.gguf"), is_gguf("models/gpt2")
        (True, False)
    """
    return str(path).lower().endswith(GGUF_SUFFIX)


@dataclass(frozen=True)
class GGUFSource:
    """A checked GGUF file: ``model_type`` (transformers' name of its family), ``config``
    (the family's config.json values), ``sha256`` (the file's, hex), ``dtype`` (its
    matrices', ``stored_dtype``: what ``--dtype auto`` loads)."""

    path: Path
    model_type: str
    config: dict[str, Any]
    sha256: str
    dtype: str = "float32"


def _reader(path: Path, name: str):
    """``gguf``'s reader of ``path`` (a memory map: nothing is read but the header)."""
    if not path.is_file():
        raise UsageError(f"{name} is not a file; attnlab never downloads: fetch the .gguf file "
                         f"on a machine online and pass its path")
    try:
        from gguf import GGUFReader
    except ImportError:  # the file and the flag named, not only the package (cli's message)
        raise UsageError(f"{name}: reading a GGUF file needs the gguf package, which is not "
                         f"installed: pip install 'attnlab[hf]'") from None
    try:
        return GGUFReader(path)
    except Exception as e:  # bad magic, an unknown value type
        raise UsageError(_tensor_table_refusal(path, name)
                         or f"{name} is not a readable GGUF file ({_one_line(e)})") from None


class _CutShort(Exception):
    """A GGUF header read past the end of its file: (the byte it needs, the file's size)."""


def _tensor_table_refusal(path: Path, name: str) -> str | None:
    """Why gguf's reader failed on ``path`` where the file is cut short or a tensor of it is
    the cause (gguf's own error is numpy's, about a reshape, a view or an enum, naming nothing):
    a header (metadata, tensor table) that ends past the end of the file, the first tensor
    whose type id ``gguf`` does not know (a type of a newer llama.cpp), or whose bytes end past
    the end of the file (a download or copy cut short). None otherwise."""
    import numpy as np
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader

    found = []

    class Header(GGUFReader):  # the header read, its tensors' table kept and not mapped
        def _get(self, offset, dtype, count=1, override_order=None):
            end = int(offset) + np.dtype(dtype).itemsize * int(count)
            if end > self.data.size:  # gguf's view of the missing bytes fails in numpy's words
                raise _CutShort(end, self.data.size)
            return super()._get(offset, dtype, count, override_order)

        def _build_tensors(self, start_offs, fields):
            found.append((start_offs, fields, self.data.size))

    try:
        Header(path)
    except _CutShort as e:
        end, size = e.args
        return (f"{name} is cut short in its header (needs byte {end:,}, the file has "
                f"{size:,}; a download or copy interrupted?); fetch or copy it again")
    except Exception:  # the header itself unreadable: gguf's error says what it could
        return None
    if not found:
        return None
    start, fields, size = found[0]
    for field in fields:
        _, raw_name, _, dims, raw_type, offset = field.parts
        tensor = bytes(raw_name).decode("utf-8", errors="replace")
        try:
            block, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(int(raw_type[0]))]
        except (ValueError, KeyError):
            return (f"{name}: tensor {tensor} is of type id {int(raw_type[0])}, which the gguf "
                    f"reader does not know (a newer llama.cpp type?); convert the file to "
                    f"another type (F16, Q8_0, Q4_K, ...) or upgrade gguf")
        end = start + int(offset[0]) + math.prod(int(n) for n in dims) * block_bytes // block
        if end > size:
            return (f"{name} is cut short: its tensor {tensor} ends at byte {end:,}, the file "
                    f"has {size:,} bytes (a download or copy interrupted?); fetch or copy it "
                    f"again")
    return None


def _field(reader, key: str):
    """The value of the metadata field ``key`` (a str, a number or a list), None if absent."""
    field = reader.fields.get(key)
    return None if field is None else field.contents()


def _check_tensor_types(reader, name: str) -> None:
    """Every tensor of a type ``gguf`` dequantises (F32, F16 and the types it implements)."""
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import _type_traits

    for tensor in reader.tensors:
        kind = tensor.tensor_type
        if kind not in (Q.F32, Q.F16) and kind not in _type_traits:
            raise UsageError(f"{name}: tensor {tensor.name} is of type {kind.name}, which the "
                             f"gguf reader cannot dequantise; convert the file to another type "
                             f"(F32, F16, BF16, Q8_0, Q4_K, ...)")


def gguf_source(path: str | Path, *, task: str, model_types: tuple[str, ...] | None,
                flag: str = "--init") -> GGUFSource:
    """The checked GGUF file ``path`` of a ``task`` that converts ``model_types`` (None: any,
    the digest pinning the file): its family's config values and SHA-256.

    Raises:
        UsageError: one line naming ``flag`` and ``path`` (see the module doc).
    """
    from ..runs import file_digest

    name = f"{flag} {path}" if flag else str(path)
    p = Path(path).expanduser()
    reader = _reader(p, name)
    _check_whole(reader, name, p)  # (a later part has no general.architecture)
    architecture = _field(reader, "general.architecture")
    if model_types is not None and architecture not in model_types:
        raise UsageError(f"{name}: architecture {architecture!r} (general.architecture) is not "
                         f"supported for {task}; supported: {', '.join(model_types) or 'none'}")
    _check_tensor_types(reader, name)
    _check_required(reader, architecture, name)
    _check_tokenizer(reader, name)
    config = _config(p, name, _head_dim(reader, architecture, name),
                     _rope_scaling(reader, architecture, name))
    if config["model_type"] in LLAMA_FAMILY:
        _check_tensors(reader, architecture, config, name)
    _check_finite_bytes(reader, name)
    return GGUFSource(p.resolve(), config["model_type"], config, file_digest(p),
                      stored_dtype(reader))


# a GGUF tensor type that stores one torch floating dtype's values
_FLOAT_TYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def gguf_dtype(path: str | Path) -> str:
    """``stored_dtype`` of the GGUF file ``path`` (its header read, nothing checked)."""
    return stored_dtype(_reader(Path(path).expanduser(), str(path)))


def gguf_quantised(path: str | Path) -> bool:
    """Whether a matrix of the GGUF file ``path`` is block-quantised (Q8_0, Q4_K, ...: read
    dequantised to float32), not stored as F32, F16 or BF16."""
    reader = _reader(Path(path).expanduser(), str(path))
    return any(t.tensor_type.name not in _FLOAT_TYPES for t in reader.tensors if len(t.shape) >= 2)


def stored_dtype(reader) -> str:
    """The dtype of the file's matrices, as ``--dtype auto`` reads a GGUF file (the file's
    own, as ``from_pretrained(dtype="auto")`` reads a safetensors checkpoint's): bfloat16 or
    float16 where every matrix is stored so (llama.cpp's BF16 and F16 files, their norms in
    F32), else float32 (an F32 file; block-quantised types, which dequantise to float32)."""
    kinds = {t.tensor_type.name for t in reader.tensors if len(t.shape) >= 2}
    return _FLOAT_TYPES.get(kinds.pop(), "float32") if len(kinds) == 1 else "float32"


def _check_whole(reader, name: str, path: Path) -> None:
    """A one-line refusal of one part of a model split over several files (llama.cpp's
    ``gguf-split``, how the largest models are shared: ``split.count`` in each part's
    metadata), which holds only some of its tensors: attnlab reads one file. The merge
    command it gives names the first part as ``gguf-split`` names it (``-00001-of-NNNNN``),
    which ``llama-gguf-split --merge`` must be given."""
    count = _field(reader, "split.count")
    if count is not None and int(count) > 1:
        part = int(_field(reader, "split.no") or 0) + 1
        first = path.with_name(re.sub(r"-\d{5}-of-(\d{5})\.gguf$", r"-00001-of-\1.gguf",
                                      path.name))
        raise UsageError(f"{name} is part {part} of a model split over {int(count)} files "
                         f"(split.count); attnlab reads one file: merge the parts with "
                         f"llama.cpp's llama-gguf-split --merge {first} OUT.gguf and pass "
                         f"OUT.gguf")


def _check_tensors(reader, architecture: str, config: dict[str, Any], name: str) -> None:
    """Every tensor the family's model of ``config`` reads in the file, of its shape, checked
    from the header (the names by ``gguf``'s map of the architecture, the shapes in ggml's
    order reversed): a file whose metadata describes other tensors is refused before a run
    directory exists, not once ``load_gguf`` reads them."""
    import gguf
    import torch
    import transformers

    names = _name_map(architecture, config["num_hidden_layers"])
    if names is None:  # an architecture this gguf version has no names for: load_gguf says
        return
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(
            transformers.AutoConfig.for_model(**config))
    stored = {t.name: tuple(int(n) for n in reversed(t.shape)) for t in reader.tensors}
    tied = {"lm_head.weight"} if config.get("tie_word_embeddings") else set()
    missing = []
    for key, param in model.state_dict().items():
        theirs = names.get_name(key, try_suffixes=(".weight", ".bias"))
        if key in tied or theirs is None:  # (a name gguf does not map: load_gguf's to say)
            continue
        if theirs not in stored:
            missing.append(key)
        elif stored[theirs] != tuple(param.shape):
            raise UsageError(f"{name}: tensor {theirs} is {stored[theirs]} in the file, "
                             f"{tuple(param.shape)} by its metadata ({key})")
    if missing:
        raise UsageError(_lacks(name, missing))


def _name_map(architecture: str, layers: int):
    """``gguf``'s map of transformers' tensor names to llama.cpp's for ``architecture`` with
    ``layers`` blocks, None for an architecture this ``gguf`` version has no names for."""
    import gguf

    arch = next((k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == architecture), None)
    return None if arch is None else gguf.get_tensor_name_map(arch, layers)


# per block type: the bytes of a block (start, end) that hold its float16 scales (d, and the
# min's dmin or m), as gguf's quants.py splits it; a block dequantises to NaN or infinity
# exactly where one of them is not finite (NaN * 0 is NaN), as its integers cannot overflow
_SCALES = {"Q4_0": (0, 2), "Q5_0": (0, 2), "Q8_0": (0, 2), "Q4_1": (0, 4), "Q5_1": (0, 4),
           "Q4_K": (0, 4), "Q5_K": (0, 4), "Q2_K": (-4, None), "Q3_K": (-2, None),
           "Q6_K": (-2, None)}
_CHUNK = 1 << 24  # values checked at a time: a 14 GB F16 file is not copied into memory


def _not_finite(tensor) -> int | None:
    """How many of the values of ``tensor`` (``gguf``'s, its bytes memory-mapped) dequantise
    to NaN or infinity, read from its bytes: F32, F16 and BF16 values, a block type's scales
    (``_SCALES``); None for another type (``_check_finite`` counts it once dequantised)."""
    import numpy as np
    from gguf import GGML_QUANT_SIZES
    from gguf import GGMLQuantizationType as Q

    kind, raw = tensor.tensor_type, np.asarray(tensor.data).reshape(-1).view(np.uint8)
    if kind in (Q.F32, Q.F16, Q.BF16):
        values = raw.view({Q.F32: np.float32, Q.F16: np.float16, Q.BF16: np.uint16}[kind])
        finite = ((lambda v: (v & 0x7F80) != 0x7F80) if kind == Q.BF16  # its exponent all 1s
                  else np.isfinite)
        return sum(int((~finite(values[i:i + _CHUNK])).sum())
                   for i in range(0, values.size, _CHUNK))
    if kind.name not in _SCALES:
        return None
    block, size = GGML_QUANT_SIZES[kind]
    start, end = _SCALES[kind.name]
    scales = np.ascontiguousarray(raw.reshape(-1, size)[:, start:end]).view(np.float16)
    return int((~np.isfinite(scales)).any(axis=1).sum()) * block


def _refuse_not_finite(name: str, tensor: str, bad: int, total: int) -> None:
    raise UsageError(f"{name}: its tensor {tensor} has {bad:,} of its {total:,} values not "
                     f"finite (NaN or infinite) once dequantised: the file is damaged or was "
                     f"quantised wrongly; fetch or convert it again")


def _check_finite_bytes(reader, name: str) -> None:
    """A one-line refusal naming the first tensor of the file with a value that dequantises
    to NaN or infinity, read from the bytes before a run directory is written: a block whose
    float16 scale is NaN or infinite (damaged bytes, a quantisation gone wrong) dequantises to
    NaN, and the model would write nothing, or noise, without a word."""
    for tensor in reader.tensors:
        if bad := _not_finite(tensor):
            _refuse_not_finite(name, tensor.name, bad, int(tensor.n_elements))


def _check_finite(tensors: dict, source: GGUFSource, name: str) -> None:
    """``_check_finite_bytes`` once the tensors are dequantised (transformers' names), for the
    types whose bytes it does not read (``_not_finite``: None)."""
    import torch

    for key, tensor in tensors.items():
        bad = int((~torch.isfinite(tensor)).sum())
        if bad:
            names = _name_map(source.config.get("model_type", ""), int(
                source.config.get("num_hidden_layers") or source.config.get("n_layer") or 0))
            theirs = names and names.get_name(key, try_suffixes=(".weight", ".bias"))
            _refuse_not_finite(name, theirs or key, bad, tensor.numel())


def _lacks(name: str, missing: list[str]) -> str:
    """The refusal of a file without the tensors ``missing`` (transformers' names)."""
    return f"{name} lacks tensors its metadata describes ({first_few(sorted(missing))})"


# per architecture: the metadata keys (after ``{arch}.``) that fix the model's numbers and have
# no value of the format's own (llama.cpp refuses a Llama or GPT-2 file without the context or
# the epsilon); ``transformers`` fills a missing one from its config class's defaults (an RMS
# epsilon of 1e-6, a context of 2048, 32 heads), which would run the file with other numbers.
# RoPE's freq_base is not among them: absent, it is 10000, in llama.cpp as in transformers
_SIZES = ("context_length", "embedding_length", "block_count", "feed_forward_length",
          "attention.head_count")
_REQUIRED = {"gpt2": (*_SIZES, "attention.layer_norm_epsilon"),
             **dict.fromkeys(LLAMA_FAMILY, (*_SIZES, "attention.layer_norm_rms_epsilon"))}


def _check_required(reader, architecture: str, name: str) -> None:
    """A one-line refusal naming the first key of ``_REQUIRED`` the file's metadata lacks."""
    for key in _REQUIRED.get(architecture, ()):
        if _field(reader, f"{architecture}.{key}") is None:
            raise UsageError(f"{name}: its metadata has no {architecture}.{key}, and "
                             f"attnlab does not guess it (transformers would take its config's "
                             f"default); write the file again with its converter")


# a GGUF file's tokenizer: its kind and its tokens. Without them ``transformers`` builds no
# tokenizer and reads the vocabulary size as its config's default (32000 for Llama), so the
# file would fail later on its embedding's shape, with a message that does not say why
_TOKENIZER_KEYS = ("tokenizer.ggml.model", "tokenizer.ggml.tokens")


def _check_tokenizer(reader, name: str) -> None:
    """A one-line refusal naming the first key of ``_TOKENIZER_KEYS`` the file lacks (looked
    up, not read: the tokens of a real vocabulary are a list of 150,000 strings)."""
    for key in _TOKENIZER_KEYS:
        if key not in reader.fields:
            raise UsageError(f"{name}: its metadata has no tokenizer (no {key}); attnlab reads "
                             f"a GGUF file's tokenizer from the file: write it again with its "
                             f"converter, which stores the tokenizer")


def _head_dim(reader, architecture: str, name: str) -> int | None:
    """The head width ``{arch}.attention.key_length`` declares, None where the file has none.

    ``transformers`` leaves the key out for Qwen3 (whose config then says 128, right for
    Qwen3-0.6B and wrong for any other width) and reads Llama's from the rotary dimension
    count; the attention's own key length is the head width, so it wins. A value length other
    than it has no attnlab equivalent (one head width for keys and values), nor a rotary
    dimension count other than it (RoPE on part of each head: attnlab's turns all of it)."""
    key, value = (_field(reader, f"{architecture}.attention.{k}_length") for k in ("key", "value"))
    if key is not None and value is not None and key != value:
        raise UsageError(f"{name}: {architecture}.attention.key_length {key} differs from "
                         f"value_length {value}; attnlab's keys and values are one head width")
    rotary = _field(reader, f"{architecture}.rope.dimension_count")
    # without a key length (llama.cpp writes one only where config.json has head_dim), the
    # heads are the model width over the heads
    width, said = key, f"{architecture}.attention.key_length"
    if width is None:
        width = _field(reader, f"{architecture}.embedding_length") // _field(
            reader, f"{architecture}.attention.head_count")
        said = f"{architecture}.embedding_length / attention.head_count"
    if rotary is not None and rotary != width:
        raise UsageError(f"{name}: {architecture}.rope.dimension_count {rotary} differs from "
                         f"the head width {width} ({said}); attnlab's RoPE turns every feature "
                         f"of a head")
    return None if key is None else int(key)


# llama3 scaling's factors as Llama 3.1 and 3.2 set them, besides ``factor`` itself: what a
# file's rope_freqs tensor is matched against (llama.cpp stores the factors, not these)
_LLAMA3 = {"low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 8192}


def _rope_scaling(reader, architecture: str, name: str) -> dict[str, Any] | None:
    """RoPE's scaling as ``rope_parameters`` entries, from ``{arch}.rope.scaling.type`` (linear)
    or a ``rope_freqs.weight`` tensor (llama.cpp's per-frequency divisors of Llama 3.1's llama3
    scaling, matched against the factors of ``_LLAMA3``); None without scaling.

    ``transformers`` reads neither (but for gpt-oss) and would run such a file without its
    scaling, a silent wrong result: a scaling attnlab cannot represent is refused in one line
    naming the file, the key and the supported kinds."""
    kind = _field(reader, f"{architecture}.rope.scaling.type")
    freqs = next((t for t in reader.tensors if t.name == "rope_freqs.weight"), None)
    if freqs is not None:
        return _llama3_of(freqs.data, reader, architecture, name)
    if kind in (None, "none"):
        return None
    if kind == "linear":
        return {"rope_type": "linear",
                "factor": float(_field(reader, f"{architecture}.rope.scaling.factor") or 1.0)}
    raise UsageError(f"{name}: rope scaling {kind!r} ({architecture}.rope.scaling.type) is not "
                     f"supported; supported: none, linear, and llama3 (a rope_freqs tensor)")


def _llama3_of(divisors, reader, architecture: str, name: str) -> dict[str, Any]:
    """The llama3 ``rope_parameters`` whose frequencies a ``rope_freqs`` tensor's ``divisors``
    (ω_i / ω_i scaled, per frequency) give, or a one-line refusal where none of ``_LLAMA3``'s
    does."""
    import numpy as np
    import torch

    from ..nn.positional import rope_frequencies

    divisors = np.asarray(divisors, dtype=np.float64).reshape(-1)
    theta = float(_field(reader, f"{architecture}.rope.freq_base") or 10000.0)
    params = {"rope_type": "llama3", "factor": float(divisors.max()), "rope_theta": theta,
              **_LLAMA3}
    head_dim = 2 * divisors.size
    with torch.no_grad():
        plain = rope_frequencies(head_dim, theta).double()
        scaled = rope_frequencies(
            head_dim, theta, scaling="llama3", factor=params["factor"],
            low_freq_factor=_LLAMA3["low_freq_factor"],
            high_freq_factor=_LLAMA3["high_freq_factor"],
            original_max_len=_LLAMA3["original_max_position_embeddings"]).double()
    if not np.allclose((plain / scaled).numpy(), divisors, rtol=1e-4, atol=0):
        raise UsageError(f"{name}: its rope_freqs tensor scales RoPE's frequencies otherwise "
                         f"than llama3 scaling with factor {params['factor']:g} and "
                         f"low_freq_factor 1, high_freq_factor 4, original context 8192; "
                         f"attnlab supports those")
    return params


def _config(path: Path, name: str, head_dim: int | None = None,
            rope: dict[str, Any] | None = None) -> dict[str, Any]:
    """The config.json values ``transformers`` reads from the GGUF metadata (with ``_FILLED``
    and the Llama family's ``head_dim`` and RoPE scaling ``rope``), completed with the family's
    defaults as ``save_pretrained`` writes them."""
    from transformers import AutoConfig
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    from .llama_config import LLAMA_FAMILY

    try:
        values = dict(load_gguf_checkpoint(str(path))["config"])
        for key, read_as in _FILLED.get(values.get("model_type"), {}).items():
            if key not in values and read_as in values:
                values[key] = values.pop(read_as)
        if values.get("model_type") in LLAMA_FAMILY:
            if head_dim is not None:
                values["head_dim"] = head_dim
            if rope is not None:
                theta = values.pop("rope_theta", None) or values.get("rope_parameters", {}).get(
                    "rope_theta", 10000.0)
                values["rope_parameters"] = {"rope_theta": float(theta), **rope}
        return AutoConfig.for_model(**values).to_dict()
    except Exception as e:  # an architecture transformers does not read, a bad value
        raise UsageError(f"{name}: transformers cannot read its metadata ({_one_line(e)})") from None


def gguf_vocabulary(path: str | Path) -> dict[str, int]:
    """token -> id of the GGUF file's tokenizer (``tokenizer.ggml.tokens``), without torch."""
    tokens = _field(_reader(Path(path), str(path)), "tokenizer.ggml.tokens") or []
    return {token: i for i, token in enumerate(tokens)}


# the metadata keys that name a token ending generation: the end of a text, of a turn (Llama
# 3's <|eot_id|>, Qwen's <|im_end|>) and of a message that calls a tool (Llama 3.1's
# <|eom_id|>). ``transformers`` reads only the eos one, so a plain prompt of an instruct file
# would run past its turn's end. llama.cpp's "end of generation" set (``llama_vocab::is_eog``)
# holds these ids and also tokens it finds by their text (<|eot_id|>, <|im_end|>, <|end|>,
# <end_of_turn>, ...), which a file without eot_token_id may need; attnlab reads the keys only
_EOG_KEYS = ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
             "tokenizer.ggml.eom_token_id")


def gguf_eog_ids(path: str | Path) -> list[int]:
    """The ids the GGUF file's metadata names as ending generation (``_EOG_KEYS``: eos, eot,
    eom, those present, each once), without torch. An id past the file's vocabulary is
    left out with a one-line note on stderr, as llama.cpp leaves it out with a warning."""
    reader = _reader(Path(path).expanduser(), str(path))
    size = len(_field(reader, "tokenizer.ggml.tokens") or [])
    found = {key: int(i) for key in _EOG_KEYS if (i := _field(reader, key)) is not None}
    for key, i in found.items():
        if i >= size:
            _say_past_vocabulary(str(path), key, i, size)
    return list(dict.fromkeys(i for i in found.values() if i < size))


@lru_cache(maxsize=None)
def _say_past_vocabulary(name: str, key: str, i: int, size: int) -> None:
    """The note of ``gguf_eog_ids``, once in a process (train reads the file's tokenizer when
    it checks the flags and again when the run starts)."""
    print(f"note: {name}: {key} {i} is past its {size:,} tokens; generation does not stop at "
          f"it", file=sys.stderr, flush=True)


def gguf_chat_template(path: str | Path) -> str | None:
    """The chat template the GGUF file's tokenizer carries (``tokenizer.chat_template``)."""
    return _field(_reader(Path(path), str(path)), "tokenizer.chat_template") or None


def check_gguf_chat_template(path: str | Path, flag: str = "--chat") -> None:
    """A one-line ``UsageError`` naming ``path`` if it carries no chat template."""
    if gguf_chat_template(path) is None:
        raise UsageError(f"{flag}: {path} has no chat template (no tokenizer.chat_template in "
                         f"its metadata): a base model continues text; give --prompt TEXT instead")


def load_gguf_tokenizer(path: str | Path):
    """``transformers``' tokenizer of the GGUF file (``AutoTokenizer``'s ``gguf_file``)."""
    from transformers import AutoTokenizer

    p = Path(path)
    try:
        return AutoTokenizer.from_pretrained(p.parent, gguf_file=p.name, local_files_only=True)
    except KeyError as e:  # a tokenizer.ggml.* key the file's tokenizer model needs (merges, ...)
        raise UsageError(f"{path}: its tokenizer cannot be read (no {_one_line(e)} among what "
                         f"transformers read of its tokenizer.ggml.* metadata)") from None
    except Exception as e:
        raise UsageError(f"{path}: its tokenizer cannot be read ({_one_line(e)})") from None


def load_gguf(path: str | Path, source: GGUFSource):
    """(the ``transformers`` model of the GGUF file, in eval mode and float32, every tensor
    read from the file; its tokenizer). ``source`` is ``gguf_source``'s check of the file."""
    import io
    from contextlib import redirect_stderr

    import transformers
    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # transformers 4
        from transformers.modeling_utils import no_init_weights
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    config = transformers.AutoConfig.for_model(**source.config)
    # its parameters left empty (untouched memory) and then replaced by the file's tensors
    # (``assign``): the weights are in memory once, not a random copy and the file's
    with no_init_weights():
        model = transformers.AutoModelForCausalLM.from_config(config)
    try:
        with redirect_stderr(io.StringIO()):  # its tqdm bar, whatever transformers' logging says
            tensors = load_gguf_checkpoint(str(path), return_tensors=True,
                                           model_to_load=model)["tensors"]
        found = model.load_state_dict(tensors, strict=False, assign=True)
    except Exception as e:  # NotImplementedError of a type, a shape the config does not give
        raise UsageError(f"{path}: its tensors cannot be read as the {source.model_type} model "
                         f"its metadata describes ({_one_line(e)})") from None
    _check_finite(tensors, source, str(path))
    del tensors
    tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if missing := sorted(set(found.missing_keys) - tied):
        raise UsageError(_lacks(str(path), missing))
    model.tie_weights()
    return model.eval(), load_gguf_tokenizer(path)
