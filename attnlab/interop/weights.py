"""Weight-copy helpers shared by every Hugging Face conversion (``hf.py``, ``marian.py``), and
the pieces that read a checkpoint's tensors straight into a model's parameters
(``SafetensorsTensors``, ``parameters_on_meta``, ``materialize``; ``direct_read.py`` uses
them for the Llama family).

The conversion modules import from here and never from each other's privates, so the interop
package has no import cycle (``tests/test_imports.py`` checks the whole package).

Why read tensors by hand: ``transformers``' model and then a converted copy hold the weights
twice (four times, in float32, for a bf16 checkpoint), and ``safetensors``' memory-mapped
``get_tensor`` leaves the mapped file's pages counted in the process's memory beside the copy
it returns. Reading each tensor's bytes with ``readinto`` into the parameter that keeps them
touches no other memory, so a checkpoint loads in about its own size (benchmarks/RESULTS.md,
"llama_real").
"""
from __future__ import annotations

import json
import struct
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

# the activation names' tables live with the names (torch-free); re-exported for the converters
from ..activation_names import ACT_FROM_HF, ACT_TO_HF
from ..activation_names import hf_activation as activation

__all__ = ["ACT_FROM_HF", "ACT_TO_HF", "activation", "copy", "copy_linear", "copy_norm", "reader",
           "SafetensorsTensors", "parameters_on_meta", "materialize", "TORCH_DTYPES"]

# safetensors' dtype names -> torch's (the floating ones a checkpoint's weights use, and ints)
SAFETENSORS_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32,
                      "F64": torch.float64, "I64": torch.int64, "I32": torch.int32,
                      "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
                      "BOOL": torch.bool}
# the names ``--dtype`` and ``read_checkpoint(dtype=)`` take (``source.LOAD_DTYPES``) -> torch's
TORCH_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


@torch.no_grad()
def copy(dst: Tensor, src: Tensor) -> None:
    """``dst.copy_(src)`` after checking the shapes agree (a wrong walk fails loudly)."""
    if dst.shape != src.shape:
        raise ValueError(f"shape mismatch while converting: {tuple(src.shape)} -> {tuple(dst.shape)}")
    dst.copy_(src)


def reader(hf: nn.Module, *, release: bool):
    """``read(name, out=None, *, transposed=False)`` of a Hugging Face model ``hf``'s tensors
    by name: the tensor (``transposed``: a GPT-2 Conv1D weight, (in, out), as ``nn.Linear``'s
    (out, in)), copied into ``out`` (shapes checked) when given, else returned.

    Args:
        hf: the model read from (a tied head shares the embedding's memory: read once).
        release: each parameter is given up once read, so that a model read only to be
            converted (a GGUF file's) and ours are not both whole in memory: its memory
            becomes ``out``'s where it fits as it is (same dtype and shape, contiguous:
            transformers' GGUF reader gives a Conv1D weight as the transpose of a contiguous
            matrix), else it is freed with the tensor returned or copied. ``hf`` is then of
            no further use.

    Returns:
        ``read``, which returns ``out`` or the tensor.
    """
    theirs = hf.state_dict()  # (tensors sharing the parameters' memory)

    @torch.no_grad()
    def read(name: str, out: Tensor | None = None, *, transposed: bool = False) -> Tensor:
        tensor = theirs.pop(name) if release else theirs[name]
        tensor = tensor.T if transposed else tensor
        if release:
            hf.get_parameter(name).data = torch.empty(0)
        if out is None:  # (q, k or v: stacked by set_qkv into memory of its own)
            return tensor
        if (release and tensor.dtype == out.dtype and tensor.shape == out.shape
                and tensor.is_contiguous()):
            return out.set_(tensor)  # its memory is ours now, its untouched memory given up
        copy(out, tensor)
        return out

    return read


def copy_linear(dst: nn.Linear, weight: Tensor, bias: Tensor | None) -> None:
    copy(dst.weight, weight)
    if bias is not None:
        copy(dst.bias, bias)


def copy_norm(dst: nn.LayerNorm, src: nn.LayerNorm) -> None:
    copy(dst.weight, src.weight)
    copy(dst.bias, src.bias)


class SafetensorsTensors:
    """The tensors of one or more ``.safetensors`` files (a checkpoint's shards), by name,
    read on demand: ``read(name, out)`` reads a tensor's bytes from disk straight into ``out``.

    Only the files' headers are read when it is made (``names``, ``shape``, ``dtype``); the
    files stay open until ``close`` (or the end of a ``with`` block). A name held by two files
    is the first file's (they are given in order).

    Args:
        files: the safetensors files (``source.weight_files`` of the weights file).

    Examples:
        >>> import tempfile, safetensors.torch
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = Path(folder) / "w.safetensors"
        ...     safetensors.torch.save_file({"w": torch.arange(6.0).view(2, 3)}, path)
        ...     with SafetensorsTensors([path]) as tensors:
        ...         tensors.shape("w"), tensors.read("w", torch.empty(2, 3))[1].tolist()
        ((2, 3), [3.0, 4.0, 5.0])
    """

    def __init__(self, files: list[Path]) -> None:
        self._files: list = []
        self._where: dict[str, tuple[int, torch.dtype, tuple[int, ...], int, int]] = {}
        for path in files:
            f = open(path, "rb")
            self._files.append(f)
            (size,) = struct.unpack("<Q", f.read(8))  # the header's length, little-endian
            header = json.loads(f.read(size))
            for name, entry in header.items():
                if name == "__metadata__" or name in self._where:
                    continue
                begin, end = entry["data_offsets"]
                self._where[name] = (len(self._files) - 1, SAFETENSORS_DTYPES[entry["dtype"]],
                                     tuple(entry["shape"]), 8 + size + begin, end - begin)

    def __enter__(self) -> "SafetensorsTensors":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for f in self._files:
            f.close()

    def names(self) -> list[str]:
        return list(self._where)

    def __contains__(self, name: str) -> bool:
        return name in self._where

    def shape(self, name: str) -> tuple[int, ...]:
        return self._where[name][2]

    def dtype(self, name: str) -> torch.dtype:
        return self._where[name][1]

    def read(self, name: str, out: Tensor | None = None) -> Tensor:
        """Tensor ``name``, its bytes read into ``out`` (same shape; any dtype: a contiguous
        ``out`` of the stored dtype is filled in place, else through one temporary of it), or
        into a new tensor of the stored dtype when ``out`` is None. Returns ``out`` or it."""
        index, dtype, shape, start, length = self._where[name]
        if out is not None and tuple(out.shape) != shape:
            raise ValueError(f"{name} is {shape} in the file, the parameter {tuple(out.shape)}")
        direct = (out is not None and out.dtype == dtype and out.is_contiguous()
                  and sys.byteorder == "little")  # the file's byte order is little-endian
        target = out if direct else torch.empty(shape, dtype=dtype)
        if length:
            f = self._files[index]
            f.seek(start)
            view = memoryview(target.reshape(-1).view(torch.uint8).numpy())  # the raw bytes
            if f.readinto(view) != length:
                raise ValueError(f"{name}: {f.name} ends before the tensor's last byte")
            if sys.byteorder != "little":
                target = _from_little_endian(target)
        if out is None or direct:
            return target
        with torch.no_grad():
            return out.copy_(target)


def _from_little_endian(t: Tensor) -> Tensor:
    """``t``'s bytes read as little-endian, on a big-endian machine."""
    size = t.element_size()
    return t.view(torch.uint8).view(*t.shape, size).flip(-1).reshape(-1).view(t.dtype).view(
        t.shape) if size > 1 else t


@contextmanager
def parameters_on_meta() -> Iterator[None]:
    """Modules built inside this block get their parameters on the meta device: no memory
    and no random initialisation spent on weights a checkpoint will replace, while buffers
    (RoPE's tables, computed from the config) are made as usual. A tied parameter stays one
    object. Fill the parameters with ``materialize``.

    It replaces ``nn.Module.register_parameter`` for the block (as ``accelerate``'s
    ``init_empty_weights`` does), so build nothing on another thread meanwhile; and it skips
    the in-place initialisers (``normal_``, ``uniform_``, ...) on meta tensors, which have
    nothing to fill, and some of which would import ``torch._dynamo`` for their meta version
    (seconds, for nothing).
    """
    register = nn.Module.register_parameter

    def on_meta(module: nn.Module, name: str, param: nn.Parameter | None) -> None:
        if param is not None and not param.is_meta:
            param = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        register(module, name, param)

    nn.Module.register_parameter = on_meta
    try:
        with _NoFillOnMeta():
            yield
    finally:
        nn.Module.register_parameter = register


class _NoFillOnMeta(TorchFunctionMode):
    """In-place tensor methods (``normal_``, ``zero_``, ...) on a meta tensor do nothing."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        target = args[0] if args else kwargs.get("tensor")  # nn.init passes it by keyword
        if (name.endswith("_") and not name.startswith("__") and isinstance(target, Tensor)
                and target.is_meta):
            return target
        return func(*args, **kwargs)


def materialize(model: nn.Module, dtype: torch.dtype) -> None:
    """Give every meta parameter of ``model`` (``parameters_on_meta``) memory of ``dtype``,
    uninitialised; a tied parameter stays one object. The memory is the allocator's untouched
    pages until the checkpoint's values are read into it, so it costs nothing until then: fill
    every parameter before using the model.
    """
    made: dict[int, tuple[nn.Parameter, nn.Parameter]] = {}  # id -> (meta one kept alive, new)
    for module in model.modules():
        for key, param in module._parameters.items():
            if param is None or not param.is_meta:
                continue
            if id(param) not in made:
                made[id(param)] = (param, nn.Parameter(torch.empty(param.shape, dtype=dtype),
                                                       requires_grad=param.requires_grad))
            module._parameters[key] = made[id(param)][1]
