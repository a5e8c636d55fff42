"""A Llama-family directory's safetensors read straight into a ``CausalLM``, in the dtype asked.

``read_checkpoint`` of a Llama, Qwen2, Qwen3 or Mistral directory stored as safetensors (one
file, or shards with their ``model.safetensors.index.json``) comes here instead of building
``transformers``' model and converting it: the ``CausalLM`` is built with its parameters on
the meta device (``weights.parameters_on_meta``), each parameter is then given memory of the
requested dtype and the checkpoint's bytes are read into it (``weights.SafetensorsTensors``),
so a bf16 checkpoint loaded in bf16 costs about its own size in memory, with no float32 copy
and no second model (benchmarks/RESULTS.md, "llama_real").

The tensors are found by Hugging Face's names, attnlab's with these parts renamed:

    attnlab                         Hugging Face
    token_embedding.                model.embed_tokens.
    decoder.layers.{i}.             model.layers.{i}.
      norm1. / norm2.                 input_layernorm. / post_attention_layernorm.
      linear_net.                     mlp.         (gate_proj, up_proj, down_proj)
      self_attn.qkv_proj.             self_attn.{q,k,v}_proj.  (stacked by ``set_qkv``)
    decoder.norm.                   model.norm.
    (the rest: self_attn.o_proj, self_attn.q_norm/k_norm, lm_head: the same names)

Llama's ``attention_bias`` without ``mlp_bias`` (what ``export --hf`` writes of q/k/v biases
alone) is read as q/k/v biases: its ``self_attn.o_proj.bias`` tensors must hold zeros
(``llama_config.zero_biases``), else the directory is refused naming the first that does not
(``check_zero_biases``), never read without it; absent, they are zero, as ``transformers``
starts them (``llama_config.lacking``).

Every tensor the model uses must be there with its shape, and the files may hold no tensor
the model does not use (a config.json of fewer layers than its weights) but for those
``transformers`` ignores too (its ``_keys_to_ignore_on_load_unexpected``, an old checkpoint's
``rotary_emb.inv_freq``, a tied checkpoint's ``lm_head.weight``), else nothing is allocated
and the caller refuses the directory naming them. A tied checkpoint's ``lm_head.weight`` of
other values than the embedding's (``transformers`` then unties the head) is refused, naming
``tie_word_embeddings``.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from .llama_config import lacking, llama_family_settings, zero_biases
from .source import weight_files
from .weights import TORCH_DTYPES, SafetensorsTensors, materialize, parameters_on_meta

__all__ = ["read_llama_family", "causal_lm_on_meta", "hf_names", "read_named", "write_named",
           "stored_dtype", "check_tied_head", "check_tied_files", "check_zero_biases",
           "files_disagree", "transformers_files_disagree", "ignored_unexpected",
           "undescribed"]

# attnlab's name parts -> Hugging Face's (the table of the module doc)
_RENAMED = (("token_embedding.", "model.embed_tokens."), ("decoder.layers.", "model.layers."),
            ("decoder.norm.", "model.norm."), (".norm1.", ".input_layernorm."),
            (".norm2.", ".post_attention_layernorm."), (".linear_net.", ".mlp."))
_STACKED = ".qkv_proj."
# a tensor files saved by an older transformers hold that today's ignores without listing it
# (its LOAD REPORT calls it UNEXPECTED): GPT-2's attention constant, -1e4, kept in the files
# of many a GPT-2 fine-tuned before the buffer was made non-persistent
_SAVED_BY_OLDER = re.compile(r"(^|\.)attn\.masked_bias$")


def hf_names(name: str) -> tuple[str, ...]:
    """The Hugging Face tensor name(s) of attnlab's parameter ``name``: three (q, k, v) for
    the stacked projection, else one.

    Examples:
        >>> hf_names("decoder.layers.3.norm2.weight")
        ('model.layers.3.post_attention_layernorm.weight',)
        >>> hf_names("decoder.layers.0.self_attn.qkv_proj.bias")[1]
        'model.layers.0.self_attn.k_proj.bias'
    """
    for ours, theirs in _RENAMED:
        name = name.replace(ours, theirs, 1)
    if _STACKED in name:
        return tuple(name.replace(_STACKED, f".{x}_proj.") for x in "qkv")
    return (name,)


def _expected(model: nn.Module, name: str, param: torch.Tensor) -> list[tuple[str, tuple]]:
    """(Hugging Face name, the shape the config gives it) for each tensor of parameter
    ``name``; q, k and v have their own heads' rows."""
    names = hf_names(name)
    if len(names) == 1:
        return [(names[0], tuple(param.shape))]
    attn = model.get_submodule(name.rsplit(".", 2)[0])  # ...self_attn
    rows = [attn.num_heads * attn.head_dim] + [attn.num_kv_heads * attn.head_dim] * 2
    return [(n, (r, *param.shape[1:])) for n, r in zip(names, rows)]


def stored_dtype(config: dict[str, Any], tensors: SafetensorsTensors) -> torch.dtype:
    """The dtype ``"auto"`` means, as ``transformers``' ``from_pretrained(dtype="auto")``
    reads it: config.json's ``dtype`` (``torch_dtype`` before transformers 5) when it is a
    floating dtype, else the stored embedding's."""
    declared = config.get("dtype") or config.get("torch_dtype")
    if declared in TORCH_DTYPES:
        return TORCH_DTYPES[declared]
    name = hf_names("token_embedding.weight")[0]
    return tensors.dtype(name) if name in tensors else torch.float32


def read_llama_family(config: dict[str, Any], weights: Path, dtype: torch.dtype | str):
    """``(model, missing, mismatched, unexpected)``: the ``CausalLM`` of a Llama-family
    ``config.json`` mapping with the tensors of ``weights`` (a ``.safetensors`` file or the
    shards' index) read into parameters of ``dtype`` (``"auto"``: ``stored_dtype``), in eval
    mode; or ``(None, names not in the files, [(name, stored shape, config's shape)], names of
    the files the model does not use)`` when a tensor is absent, of another shape or unused,
    before any parameter memory is allocated.

    Raises:
        ValueError: naming the config key and value attnlab cannot represent.
    """
    model = causal_lm_on_meta(config)
    with SafetensorsTensors(weight_files(weights)) as tensors:
        found = _disagreeing(model, config, {n: tensors.shape(n) for n in tensors.names()})
        if any(found):
            return None, *found
        check_zero_biases(config, tensors.read)
        if dtype == "auto":
            dtype = stored_dtype(config, tensors)
        materialize(model, dtype)
        read_named(model, tensors.read)
        _check_tied_head(model, tensors)
    return model.eval(), [], [], []


def causal_lm_on_meta(config: dict[str, Any]) -> nn.Module:
    """The ``CausalLM`` of a Llama-family ``config.json`` mapping, its parameters on the meta
    device (shapes, no memory); ValueError naming a key attnlab cannot represent."""
    from ..models.causal_lm import CausalLM, CausalLMConfig

    settings = llama_family_settings(config)
    dropout = float(config.get("attention_dropout", 0.0) or 0.0)
    with parameters_on_meta():
        return CausalLM(CausalLMConfig(**settings, dropout=0.0, ff_dropout=0.0,
                                       attention_dropout=dropout))


def _disagreeing(model: nn.Module, config: dict[str, Any], stored: dict[str, tuple[int, ...]]
                 ) -> tuple[list[str], list[tuple[str, tuple, tuple]], list[str]]:
    """(the Hugging Face names of ``model``'s tensors not in ``stored`` (name -> shape),
    [(name, stored shape, the model's shape)] of those of another shape, sorted, the names of
    ``stored`` the model does not use and ``transformers`` does not ignore, sorted)."""
    params = dict(model.named_parameters())  # a tied head is listed once, as the embedding
    wanted = [e for name, p in params.items() for e in _expected(model, name, p)]
    wanted += [(n, (model.config.model_dim,)) for n in zero_biases(config)]  # o_proj's, zero
    missing = lacking(config, [hf for hf, _ in wanted if hf not in stored])
    mismatched = sorted((hf, tuple(stored[hf]), shape) for hf, shape in wanted
                        if hf in stored and tuple(stored[hf]) != shape)
    used = {hf for hf, _ in wanted} | {"lm_head.weight"}  # tied: checked by check_tied_head
    unused = [n for n in stored if n not in used]
    return missing, mismatched, _not_ignored(config.get("model_type"), unused) if unused else []


def _not_ignored(model_type: str | None, unused: list[str]) -> list[str]:
    """``unused`` less what ``transformers``' class of ``model_type`` ignores, sorted: the
    class's ``_keys_to_ignore_on_load_unexpected`` patterns, and the ``rotary_emb.inv_freq`` of
    old checkpoints that ``from_pretrained`` ignores in every model with rotary buffers
    (``_adjust_missing_and_unexpected_keys``). Only then is ``transformers`` imported, if
    installed: the direct reader needs none of it."""
    from .llama_config import LLAMA_CLASSES

    try:
        import transformers

        cls = getattr(transformers, LLAMA_CLASSES.get(model_type or "", "LlamaForCausalLM"))
        patterns = [*(cls._keys_to_ignore_on_load_unexpected or ())]
    except ImportError:
        patterns = []
    ignored = re.compile("|".join(f"({p})" for p in [*patterns, r"rotary_emb\.inv_freq"]))
    return undescribed(n for n in unused if not ignored.search(n))


def files_disagree(config: dict[str, Any], weights: Path
                   ) -> tuple[list[str], list[tuple[str, tuple, tuple]], list[str]]:
    """``read_llama_family``'s ``(missing, mismatched, unexpected)`` found from the files'
    headers alone, before any weight is read but the few that must be zero
    (``check_zero_biases``, ``ValueError`` naming one that is not): ``attnlab train lm --init``
    refuses a directory whose config.json describes other tensors than its files hold before
    its run directory exists.
    Safetensors (one file or shards: the files the direct reader reads; ``pytorch_model.bin``
    ones are read by ``transformers``: ``transformers_files_disagree``) by their headers; a
    header that cannot be read: ``([], [], [])``, named as the weights load.

    Raises:
        ValueError: naming the config key and value attnlab cannot represent.
    """
    model = causal_lm_on_meta(config)
    stored = _stored_shapes(weights)
    if stored is None:
        return [], [], []
    found = _disagreeing(model, config, stored)
    if not any(found):
        _check_zero_files(config, weights)
    return found


def _check_zero_files(config: dict[str, Any], weights: Path) -> None:
    """``check_zero_biases`` of the tensors ``weights``' files hold: read from safetensors,
    mapped from ``pytorch_model.bin`` (zip form; an old pickle-only file is checked as its
    weights load), only the few that must be zero."""
    if not zero_biases(config):
        return
    if weights.name.endswith((".safetensors", ".safetensors.index.json")):
        with SafetensorsTensors(weight_files(weights)) as tensors:
            check_zero_biases(config, tensors.read)
        return
    try:
        tensors = _bin_tensors(weights)
    except (RuntimeError, OSError, ValueError):
        return  # not a zip file: checked as the model loads (causal_lm_of)
    # (found with or without the base model's prefix, as from_pretrained finds them)
    check_zero_biases(config, lambda n: tensors.get(n, tensors.get(n.removeprefix("model."))))


@torch.no_grad()
def check_zero_biases(config: dict[str, Any], read: Callable[[str], torch.Tensor]) -> None:
    """``ValueError`` naming the first of ``zero_biases(config)`` (Llama's o_proj biases beside
    ``attention_bias`` without ``mlp_bias``) that ``read(name)`` gives with a value other than
    zero: attnlab's q/k/v biases alone have no output bias, so reading the rest without it
    would give other logits than ``transformers``. One ``read`` finds absent (KeyError or
    None) is zero (``llama_config.lacking``)."""
    for name in zero_biases(config):
        try:
            tensor = read(name)
        except KeyError:
            continue
        if tensor is not None and tensor.any():
            raise ValueError(f"{name} is not zero: Llama's attention_bias without mlp_bias is "
                             f"read as q/k/v biases alone, which have no o_proj bias")


def transformers_files_disagree(config: dict[str, Any], weights: Path
                                ) -> tuple[list[str], list[tuple[str, tuple, tuple]], list[str]]:
    """``files_disagree`` of a checkpoint ``transformers`` reads (GPT-2's; a Llama-family
    ``pytorch_model.bin``): the tensors of ``AutoModelForCausalLM`` built from ``config`` on
    the meta device, found as ``from_pretrained`` finds them (with or without the base model's
    prefix, a tied head not looked for), against the files' headers; the files' tensors it
    does not use, less those ``from_pretrained`` ignores; ``ValueError`` naming a tensor that
    must be zero and is not (``check_zero_biases``). A config ``transformers`` cannot build a
    model of: ``([], [], [])``, as the run's ``from_pretrained`` names it.
    """
    import transformers

    try:
        built = transformers.AutoConfig.for_model(**config)
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(built)
    except Exception:  # a bad value of config.json's, said when the run loads it
        return [], [], []
    stored = _stored_shapes(weights)
    if stored is None:
        return [], [], []
    tied = set(getattr(model, "_tied_weights_keys", None) or ()) if built.tie_word_embeddings \
        else set()
    # what from_pretrained does not miss (an older transformers' GPT-2 attention buffers)
    ignored = [re.compile(p) for p in getattr(model, "_keys_to_ignore_on_load_missing", None)
               or ()]
    prefix = f"{model.base_model_prefix}."
    missing, mismatched, used = [], [], set()
    for name, tensor in model.state_dict().items():
        found = next((n for n in (name, name.removeprefix(prefix)) if n in stored), None)
        used.add(found)
        if found is None and name not in tied and not any(p.search(name) for p in ignored):
            missing.append(name)
        elif found is not None and tuple(stored[found]) != tuple(tensor.shape):
            mismatched.append((found, tuple(stored[found]), tuple(tensor.shape)))
    used |= {n for b, _ in model.named_buffers() for n in (b, b.removeprefix(prefix))}
    found = (lacking(config, missing), sorted(mismatched),
             ignored_unexpected(model, set(stored) - used))
    if not any(found):
        _check_zero_files(config, weights)
    return found


def ignored_unexpected(model: nn.Module, unexpected: set[str]) -> list[str]:
    """``unexpected``, the names of tensors a ``transformers`` ``model`` does not use, less
    those its ``from_pretrained`` ignores (its ``_keys_to_ignore_on_load_unexpected``, an old
    checkpoint's ``rotary_emb.inv_freq``: ``_adjust_missing_and_unexpected_keys``) and those
    ``undescribed`` leaves out, sorted."""
    from types import SimpleNamespace

    info = SimpleNamespace(missing_keys=set(), unexpected_keys=set(unexpected))
    adjust = getattr(model, "_adjust_missing_and_unexpected_keys", None)
    if adjust is not None:
        adjust(info)
    else:  # another transformers: its class's patterns
        patterns = [re.compile(p) for p in model._keys_to_ignore_on_load_unexpected or ()]
        info.unexpected_keys = {n for n in unexpected if not any(p.search(n) for p in patterns)}
    return undescribed(info.unexpected_keys)


def undescribed(unexpected) -> list[str]:
    """``unexpected``, the tensors ``transformers`` reports as unused, less GPT-2's
    ``attn.masked_bias`` of files an older transformers saved, sorted: the tensors a
    config.json does not describe (``checkpoint.refuse_incomplete`` refuses them)."""
    return sorted(n for n in unexpected if not _SAVED_BY_OLDER.search(n))


def _stored_shapes(weights: Path) -> dict[str, tuple[int, ...]] | None:
    """name -> shape of every tensor of ``weights``' files, None where they cannot be read
    so: any error of a damaged header (the run's own reading of them names the file)."""
    try:
        if not weights.name.endswith((".safetensors", ".safetensors.index.json")):
            return {n: tuple(t.shape) for n, t in _bin_tensors(weights).items()}
        with SafetensorsTensors(weight_files(weights)) as tensors:
            return {n: tensors.shape(n) for n in tensors.names()}
    except Exception:  # OverflowError, TypeError, ... of a header not safetensors'
        return None


def _bin_tensors(weights: Path) -> dict[str, torch.Tensor]:
    """The tensors of ``pytorch_model.bin`` files, mapped (zip form: only what is used of
    them is read); RuntimeError, OSError or ValueError for an old pickle-only file."""
    found: dict[str, torch.Tensor] = {}
    for path in weight_files(weights):
        found.update(torch.load(path, map_location="cpu", weights_only=True, mmap=True))
    return found


@torch.no_grad()
def check_tied_files(weights: Path, embedding: str = "model.embed_tokens.weight") -> None:
    """``check_tied_head`` of a tied checkpoint's two tensors as its files hold them (the
    head and the tensor named ``embedding``: GPT-2's ``transformer.wte.weight``), before
    any model is built (``attnlab train lm --init`` refuses such a directory before its run
    directory exists): read from safetensors files, or mapped from ``pytorch_model.bin`` files
    (zip form; an old pickle-only file is checked as its weights load)."""
    names = ("lm_head.weight", embedding)
    if _stored_shapes(weights) is None:
        return  # a damaged header: named as the weights load
    if weights.suffix == ".safetensors" or weights.name.endswith(".safetensors.index.json"):
        with SafetensorsTensors(weight_files(weights)) as tensors:
            if all(n in tensors for n in names):
                check_tied_head(*(tensors.read(n) for n in names), embedding)
        return
    try:  # mapped: only the two tensors' bytes are read
        found = {n: t for n, t in _bin_tensors(weights).items() if n in names}
    except (RuntimeError, OSError, ValueError):
        return  # not a zip file: read and checked as the model loads
    if len(found) == 2:
        check_tied_head(*(found[n] for n in names), embedding)


@torch.no_grad()
def _check_tied_head(model: nn.Module, tensors: SafetensorsTensors) -> None:
    """``ValueError`` where config.json ties the head but the files hold an ``lm_head.weight``
    of other values: ``transformers`` then reads the two untied (with a warning), so the tied
    model would give other logits than it."""
    if model.config.tie_weights and "lm_head.weight" in tensors:
        check_tied_head(tensors.read("lm_head.weight"), model.token_embedding.weight)


def check_tied_head(head: torch.Tensor, embedding: torch.Tensor,
                    name: str = "model.embed_tokens.weight") -> None:
    """``ValueError`` naming ``tie_word_embeddings`` where a checkpoint whose config.json ties
    the head holds a ``head`` of other values than its ``embedding`` (the tensor ``name``)."""
    if head is not embedding and not torch.equal(head.to(embedding.dtype), embedding):
        raise ValueError("tie_word_embeddings is true but the weights hold an lm_head.weight "
                         f"that differs from {name} (transformers reads "
                         "the two untied): set tie_word_embeddings to false in config.json")


@torch.no_grad()
def read_named(model: nn.Module, read: Callable[..., torch.Tensor]) -> None:
    """Fill every parameter of ``model`` (a ``CausalLM``) from ``read(hf_name, out=None)``,
    which returns the Hugging Face tensor of that name, copied into ``out`` when given; q, k
    and v through ``set_qkv``."""
    for name, param in model.named_parameters():
        names = hf_names(name)
        if len(names) == 1:
            read(names[0], out=param)
        elif name.endswith(".weight"):  # the stacked projection, with its biases if any
            attn = model.get_submodule(name[: -len(".qkv_proj.weight")])  # ...self_attn
            biases = () if attn.qkv_proj.bias is None else hf_names(name[:-6] + "bias")
            attn.set_qkv(*map(read, names), *map(read, biases))


@torch.no_grad()
def write_named(model: nn.Module, theirs: dict[str, torch.Tensor]) -> None:
    """Copy every parameter of ``model`` (a ``CausalLM``) into ``theirs``, a Hugging Face
    model's ``state_dict()`` (tensors sharing its parameters' memory), by the same names as
    ``read_named``; q, k and v through ``get_qkv``."""
    for name, param in model.named_parameters():
        names = hf_names(name)
        if len(names) == 1:
            theirs[names[0]].copy_(param)
        elif name.endswith(".weight"):
            attn = model.get_submodule(name[: -len(".qkv_proj.weight")])
            wq, wk, wv, bq, bk, bv = attn.get_qkv()
            stacked = [*zip(names, (wq, wk, wv))]
            if bq is not None:
                stacked += zip(hf_names(name[:-6] + "bias"), (bq, bk, bv))
            for hf_name, tensor in stacked:
                theirs[hf_name].copy_(tensor)
