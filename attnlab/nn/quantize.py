"""Linear layers for inference: ``linear``, generation's per-token product (a plain
``nn.Linear`` through the faster (in, out) layout at small batch, or whatever linear a module
holds), and ``quantize``, int8 weights: every ``nn.Linear`` of a trained model becomes
PyTorch's own dynamically quantised linear (the x86 engine's fbgemm kernels on x86, qnnpack on
ARM).

    y = x Wᵀ + b   becomes   y ≈ s_x s_W[c] (q_x q_Wᵀ) + b

with the weight stored once as int8 and one scale ``s_W[c]`` per output channel c
(``per_channel``; one per tensor otherwise), and the input quantised to 8 bits per call from
its own range. A decoding step reads every weight once, so a quarter of the bytes is most of
the gain; embeddings, LayerNorms and attention itself stay float32.

For inference only: the result has no gradients and is not meant to be trained or saved as a
checkpoint (save the float model). A tied output projection (``CausalLM.lm_head`` sharing the
token embedding) gets its own int8 copy; the embedding lookup keeps the float table.
"""
from __future__ import annotations

import copy
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn

QUANTIZE_KINDS = ("int8",)


SMALL_BATCH = 8  # rows up to which the (in, out) copy of a weight is used (see ``linear``)


def linear(module: nn.Module, x: Tensor) -> Tensor:
    """``module(x)`` for a linear layer on generation's per-token fast path: a plain
    ``nn.Linear`` with its parameters read by dict lookup (no module call); anything else, such
    as a quantised linear that has no float ``weight``, is called.

    On the CPU, without gradients, for at most ``SMALL_BATCH`` rows, it multiplies by a copy of
    the weight laid out (in, out), made once and remade when the weight changes (its storage or
    version): PyTorch's CPU kernels read a row-major (in, out) matrix for x W much faster than
    the (out, in) one for x Wᵀ at batch 1, and about as fast at batch 8 (benchmarks/RESULTS.md,
    "generate_lm — the step's products with weights laid out (in, out)"). The copy doubles the
    memory of the weights used this way while the model lives.

    Only float32 weights take that path: for bfloat16 (and float16) PyTorch's CPU ``mm`` with
    an (in, out) matrix is many times slower than ``F.linear`` (benchmarks/RESULTS.md,
    "llama_real"), and a second copy of a half-precision checkpoint would undo the memory it
    saves.
    """
    p = module._parameters
    weight = p.get("weight")
    if weight is None:
        return module(x)
    bias = p.get("bias")
    K = x.shape[-1]
    if (weight.device.type != "cpu" or weight.dtype != torch.float32
            or torch.is_grad_enabled() or x.numel() > SMALL_BATCH * K or weight.dim() != 2):
        return F.linear(x, weight, bias)
    key = (weight.data_ptr(), weight._version, weight.dtype)
    cached = module.__dict__.get("_in_out_weight")
    if cached is None or cached[0] != key:
        cached = (key, weight.detach().t().contiguous())  # (in, out)
        module.__dict__["_in_out_weight"] = cached
    x2 = x.reshape(-1, K)
    out = torch.mm(x2, cached[1]) if bias is None else torch.addmm(bias, x2, cached[1])
    return out.view(*x.shape[:-1], out.shape[-1])


def int8_layers(model: nn.Module) -> list[str]:
    """The names of ``model``'s submodules that ``quantize`` made int8 (PyTorch's quantised
    modules, whose weights are no float ``Parameter``): what a float-only reader, such as
    ``attnlab.interop.to_hf``, cannot copy.

    Examples:
        >>> from attnlab.models import CausalLM
        >>> lm = CausalLM(vocab_size=20, model_dim=16, num_heads=2, num_layers=1, max_len=8)
        >>> int8_layers(lm), int8_layers(quantize(lm))[-1]
        ([], 'lm_head')
    """
    return [name for name, module in model.named_modules()  # not their packed-weight holders
            if type(module).__module__.startswith("torch.ao.nn.quantized")
            and not type(module).__name__.endswith("PackedParams")]


def quantized(model: nn.Module, kind: str | None) -> nn.Module:
    """``model`` itself when ``kind`` is None, else ``quantize(model, kind, inplace=True)``:
    for a model just loaded for inference, with no float copy kept."""
    return model if kind is None else quantize(model, kind, inplace=True)


def quantize(model: nn.Module, kind: str = "int8", *, per_channel: bool = True,
             inplace: bool = False) -> nn.Module:
    """``model`` (eval mode) with every ``nn.Linear`` holding int8 weights.

    Args:
        model: a trained float32 model, e.g. ``CausalLM`` or ``Seq2SeqTransformer`` (a
            bfloat16 or float16 one is refused: ``.float()`` it first).
        kind: "int8" (the only kind: PyTorch's dynamic int8 linear kernels).
        per_channel: one scale per output channel (default; closer to float32) instead of one
            per weight matrix.
        inplace: convert ``model`` itself instead of a copy.

    Returns:
        The converted model, in eval mode; its ``generate``/``step`` run on the int8 kernels.

    Examples:
        >>> import torch
        >>> from attnlab.models import CausalLM
        >>> lm = CausalLM(vocab_size=50, model_dim=32, num_heads=2, num_layers=1, max_len=16)
        >>> q = quantize(lm)
        >>> type(q.lm_head).__name__, type(lm.lm_head).__name__  # the float model is untouched
        ('Linear', 'Linear')
        >>> q.lm_head.weight().dtype
        torch.qint8
        >>> q.generate(torch.tensor([[1, 2, 3]]), 4).shape
        torch.Size([1, 7])
    """
    if kind not in QUANTIZE_KINDS:
        raise ValueError(f"kind must be {' or '.join(map(repr, QUANTIZE_KINDS))}, got {kind!r}")
    if torch.backends.quantized.engine == "none":  # PyTorch picks x86 or qnnpack where it can
        engines = torch.backends.quantized.supported_engines
        engine = next((e for e in ("x86", "fbgemm", "qnnpack") if e in engines), None)
        if engine is None:
            raise RuntimeError(f"this PyTorch build has no int8 CPU kernels (engines: {engines})")
        torch.backends.quantized.engine = engine
    if any(p.device.type != "cpu" for p in model.parameters()):
        raise ValueError("int8 quantisation runs on the CPU: move the model there first (.cpu())")
    # PyTorch's observers and int8 kernels take float32 only: a bf16 checkpoint read as stored
    # (read_checkpoint(dtype="auto")) failed inside torch.ao with "expected scalar type Float"
    others = sorted({str(p.dtype) for p in model.parameters()
                     if p.is_floating_point() and p.dtype != torch.float32})
    if others:
        raise ValueError(f"int8 quantisation takes a float32 model, got parameters of "
                         f"{', '.join(others)}: convert it first (.float())")
    from torch.ao import quantization as tq

    qconfig = tq.per_channel_dynamic_qconfig if per_channel else tq.default_dynamic_qconfig
    target = model if inplace else copy.deepcopy(model)
    target.eval()
    with warnings.catch_warnings():  # torch.ao.quantization's notice that it moves to torchao
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        warnings.filterwarnings("ignore", message=".*torch.ao.quantization.*")
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
        return tq.quantize_dynamic(target, {nn.Linear: qconfig}, dtype=torch.qint8, inplace=True)
