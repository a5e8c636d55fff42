"""A LoRA run's update as a peft adapter: ``adapter/`` in the run directory, which
``peft.PeftModel.from_pretrained(base, RUN/adapter)`` loads over the ``--init`` checkpoint.

Shapes: I input width, O output width, r the rank; D model width.

peft adds ``lora_B(lora_A(x)) · α/r`` to the output of each Hugging Face module it targets, with
A (r, I) and B (O, r) as attnlab's ``LoRALinear`` holds them. attnlab's layers are Hugging Face's
up to how rows and columns are stacked or renamed, and each such change moves B's rows or A's
columns only, because W₀ + (α/r) B A with its rows taken by P and its columns by Q is
P W₀ Q + (α/r) (P B)(A Q):

    attnlab (per block)     GPT-2          Llama family      BERT family       Marian
    self_attn.qkv_proj      attn.c_attn    self_attn.q_proj, query, key,       self_attn.q_proj,
                            ([Q | K | V])  k_proj, v_proj    value             k_proj, v_proj
    self_attn.o_proj        attn.c_proj    self_attn.o_proj  attention.output  self_attn.out_proj
    linear_net (mlp)        mlp.c_fc,      mlp.gate_proj,    intermediate,     fc1, fc2
                            mlp.c_proj     up_proj, down_proj output
    cross_attn.q_proj,                                                         encoder_attn.q_proj,
    cross_attn.kv_proj                                                         k_proj, v_proj

A stacked Q/K/V projection with one A (r, D) and B (O, r) is three LoRA layers in peft that
share the A, each with its role's rows of B (``MultiheadAttention.qkv_rows``): the same
update, exactly, with A stored three times (2·r·D numbers more in the file). GPT-2 keeps Q,
K, V stacked in ``c_attn`` (a ``Conv1D``: ``fan_in_fan_out``); Marian's residual features are
renamed (``marian.py``), so a layer reading the stream has A's columns renamed and one
writing it B's rows.

A classifier's head trains whole beside the update (``--lora-rank`` on classify): it is saved as
peft's ``modules_to_save`` under the names of the family's ``*ForSequenceClassification``
(``bert_classify``), whose new head peft then replaces; a tagger's per-token layer likewise,
as the ``classifier`` of the family's ``*ForTokenClassification`` (``--lora-rank`` on tag).

``target_modules`` names each adapted module by the shortest end of its name that names no
module left alone (GPT-2's ``attn.c_proj``, not ``c_proj``, which ``mlp.c_proj`` ends with too).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch
from torch import Tensor, nn

__all__ = ["ADAPTER_DIR", "adapter_refusal", "write_adapter", "adapter_tensors", "PEFT_TASK_TYPES"]

ADAPTER_DIR = "adapter"
# attnlab's task -> peft's task_type (the PeftModel class from_pretrained builds)
PEFT_TASK_TYPES = {"lm": "CAUSAL_LM", "classify": "SEQ_CLS", "tag": "TOKEN_CLS",
                   "translate": "SEQ_2_SEQ_LM"}

Rows = Callable[[Tensor], Tensor]
# one peft LoRA layer: (Hugging Face module name, B -> its rows, A -> its columns)
Piece = tuple[str, Rows, Rows]


def _same(t: Tensor) -> Tensor:
    return t


def _roles(rows: Callable[[Tensor], tuple[Tensor, ...]], names: list[str],
           cols: Rows = _same) -> list[Piece]:
    """One piece per role of a stacked projection (q, k, v or k, v), sharing A."""
    return [(name, (lambda B, i=i: rows(B)[i]), cols) for i, name in enumerate(names)]


def _gpt2(model: nn.Module) -> tuple[dict[str, list[Piece]], list[str]]:
    pieces = {}
    for i, block in enumerate(model.decoder.layers):
        p, h, attn = f"decoder.layers.{i}", f"transformer.h.{i}", block.self_attn
        pieces |= {f"{p}.self_attn.qkv_proj": [(f"{h}.attn.c_attn",
                                                lambda B, a=attn: torch.cat(a.qkv_rows(B)), _same)],
                   f"{p}.self_attn.o_proj": [(f"{h}.attn.c_proj", _same, _same)],
                   f"{p}.linear_net.0": [(f"{h}.mlp.c_fc", _same, _same)],
                   f"{p}.linear_net.3": [(f"{h}.mlp.c_proj", _same, _same)]}
    return pieces, ["lm_head"]


def _llama(model: nn.Module) -> tuple[dict[str, list[Piece]], list[str]]:
    pieces = {}
    for i, block in enumerate(model.decoder.layers):
        p, h = f"decoder.layers.{i}", f"model.layers.{i}"
        pieces[f"{p}.self_attn.qkv_proj"] = _roles(
            block.self_attn.qkv_rows, [f"{h}.self_attn.{r}_proj" for r in "qkv"])
        pieces[f"{p}.self_attn.o_proj"] = [(f"{h}.self_attn.o_proj", _same, _same)]
        for name in ("gate_proj", "up_proj", "down_proj"):
            pieces[f"{p}.linear_net.{name}"] = [(f"{h}.mlp.{name}", _same, _same)]
    return pieces, ["lm_head"]


# the BERT family's *ForSequenceClassification: model_type -> (the modules_to_save holding
# attnlab's head, the names of the head's two layers: ``bert_classify``'s table)
_BERT_HEADS = {"bert": (["pooler", "classifier"], ("bert.pooler.dense", "classifier")),
               "distilbert": (["pre_classifier", "classifier"], ("pre_classifier", "classifier")),
               **dict.fromkeys(("roberta", "xlm-roberta", "camembert"),
                               (["classifier"], ("classifier.dense", "classifier.out_proj")))}


def _head(task: str, model_type: str) -> tuple[list[str], tuple[str, ...]]:
    """(modules_to_save, the Hugging Face names of the head's layers) of a BERT-family model of
    ``task``: classify's ``*ForSequenceClassification`` head (pooler and classifier), or tag's
    ``*ForTokenClassification`` head, one layer called ``classifier`` in every family."""
    if task == "tag":
        return ["classifier"], ("classifier",)
    return _BERT_HEADS[model_type]


def _bert(model: nn.Module, model_type: str, task: str
          ) -> tuple[dict[str, list[Piece]], list[str]]:
    from .bert_weights import BASE_PREFIX, layer_names

    pieces = {}
    for i, block in enumerate(model.bert.encoder.layers):
        p = f"bert.encoder.layers.{i}"
        names = {k: BASE_PREFIX[model_type] + v for k, v in layer_names(model_type, i).items()}
        pieces |= {f"{p}.self_attn.qkv_proj": _roles(block.self_attn.qkv_rows,
                                                     [names[r] for r in "qkv"]),
                   f"{p}.self_attn.o_proj": [(names["o"], _same, _same)],
                   f"{p}.linear_net.0": [(names["ff1"], _same, _same)],
                   f"{p}.linear_net.3": [(names["ff2"], _same, _same)]}
    return pieces, list(_head(task, model_type)[1])


def _marian(model: nn.Module) -> tuple[dict[str, list[Piece]], list[str]]:
    from .marian import residual_index

    idx = residual_index(model.model_dim, to_marian=True)

    def reads(A: Tensor) -> Tensor:  # A's columns read the residual stream
        return A[:, idx]

    def writes(B: Tensor) -> Tensor:  # B's rows write it
        return B[idx]

    pieces = {}
    stacks = (("encoder", model.transformer.encoder), ("decoder", model.transformer.decoder))
    for side, stack in stacks:
        for i, block in enumerate(stack.layers):
            p, h = f"transformer.{side}.layers.{i}", f"model.{side}.layers.{i}"
            attn = [("self_attn", "self_attn", block.self_attn)]
            if side == "decoder":
                attn.append(("cross_attn", "encoder_attn", block.cross_attn))
            for ours, theirs, module in attn:
                if module.cross:
                    pieces[f"{p}.{ours}.q_proj"] = [(f"{h}.{theirs}.q_proj", _same, reads)]
                    pieces[f"{p}.{ours}.kv_proj"] = _roles(
                        module.kv_rows, [f"{h}.{theirs}.{r}_proj" for r in "kv"], reads)
                else:
                    pieces[f"{p}.{ours}.qkv_proj"] = _roles(
                        module.qkv_rows, [f"{h}.{theirs}.{r}_proj" for r in "qkv"], reads)
                pieces[f"{p}.{ours}.o_proj"] = [(f"{h}.{theirs}.out_proj", writes, _same)]
            pieces[f"{p}.linear_net.0"] = [(f"{h}.fc1", _same, reads)]
            pieces[f"{p}.linear_net.3"] = [(f"{h}.fc2", writes, _same)]
    return pieces, ["lm_head"]


def _layout(model: nn.Module, task: str, model_type: str):
    if task in ("classify", "tag"):
        return _bert(model, model_type, task)
    if task == "translate":
        return _marian(model)
    return _gpt2(model) if model_type == "gpt2" else _llama(model)


def adapter_refusal(task: str, init_kind: str | None, model_type: str | None,
                    model: nn.Module) -> str | None:
    """Why a LoRA run of ``task`` writes no adapter (peft needs a Hugging Face base that
    computes what the run's model computes), or None where it writes one."""
    if init_kind == "gone":  # a checkpoint of an attnlab that did not record what it was
        return ("--init is no longer on disk and the checkpoint does not say what it was; "
                "`attnlab export RUN --hf DIR` writes the merged model")
    if init_kind != "hf":
        start = {"run": "an attnlab run", "gguf": "a GGUF file"}.get(init_kind, "random weights")
        return (f"started from {start}, so peft has no Hugging Face base to load it onto; "
                f"`attnlab export RUN --hf DIR` writes the merged model")
    if task in ("classify", "tag"):
        from .bert_classify import check_exportable

        try:
            check_exportable(model.config, model_type, [""] * model.config.num_classes,
                             tokens=task == "tag")
        except ValueError as e:
            why = str(e).removeprefix("to_hf: ")
            model_name = "tagger" if task == "tag" else "classifier"
            return f"the {model_name}'s head has no Hugging Face class: {why}"
    return None


@torch.no_grad()
def adapter_tensors(model: nn.Module, factors: dict[str, tuple[Tensor, Tensor]], *,
                    task: str, model_type: str) -> tuple[dict[str, Tensor], list[str], list[str]]:
    """peft's tensors of the update ``factors`` (``attnlab.nn.lora.lora_factors``, taken from
    ``model`` before merging) and of a classifier's head; the ``target_modules`` that name the
    adapted modules, and the ``modules_to_save``.

    Raises:
        ValueError: for an adapted layer this model's layout does not place.
    """
    pieces, others = _layout(model, task, model_type)
    tensors, adapted = {}, []
    for name, (A, B) in factors.items():
        if name not in pieces:
            raise ValueError(f"the LoRA layer {name} has no place in a {model_type} model")
        for hf, rows, cols in pieces[name]:
            # copies: q, k and v share A, and safetensors refuses tensors that share memory
            tensors[f"base_model.model.{hf}.lora_A.weight"] = _own(cols(A))
            tensors[f"base_model.model.{hf}.lora_B.weight"] = _own(rows(B))
            adapted.append(hf)
    left_alone = [hf for name, ps in pieces.items() if name not in factors for hf, _, _ in ps]
    saved: list[str] = []
    if task in ("classify", "tag"):
        saved, names = _head(task, model_type)
        layers = (model.classifier,) if task == "tag" else (model.pooler, model.classifier)
        for hf, layer in zip(names, layers, strict=True):
            tensors[f"base_model.model.{hf}.weight"] = layer.weight.detach().clone()
            tensors[f"base_model.model.{hf}.bias"] = layer.bias.detach().clone()
    return tensors, _short_names(adapted, left_alone + others), saved


def _own(t: Tensor) -> Tensor:
    return t.clone(memory_format=torch.contiguous_format)


def _short_names(adapted: list[str], others: list[str]) -> list[str]:
    """For each adapted module, the shortest end of its name (whole dotted parts) that no
    other module's name ends with; peft targets a module whose name is, or ends with
    "." + , one of them."""
    def ends(name: str, end: str) -> bool:
        return name == end or name.endswith("." + end)

    names = []
    for name in adapted:
        parts = name.split(".")
        for k in range(1, len(parts) + 1):
            end = ".".join(parts[-k:])
            if not any(ends(other, end) for other in others):
                break
        if end not in names:
            names.append(end)
    return sorted(names)


def write_adapter(run_dir: Path, model: nn.Module, factors: dict[str, tuple[Tensor, Tensor]], *,
                  task: str, model_type: str, init: str, rank: int, alpha: float) -> Path:
    """Write ``RUN/adapter/``: ``adapter_config.json`` and ``adapter_model.safetensors`` in
    peft's format (see the module doc). Returns the directory."""
    from ..runs import save_tensors, write_json

    tensors, targets, saved = adapter_tensors(model, factors, task=task, model_type=model_type)
    config = {"peft_type": "LORA", "task_type": PEFT_TASK_TYPES[task],
              "base_model_name_or_path": str(init), "r": int(rank), "lora_alpha": float(alpha),
              "lora_dropout": 0.0, "target_modules": targets, "bias": "none",
              "fan_in_fan_out": model_type == "gpt2",  # GPT-2's Conv1D holds W transposed
              "modules_to_save": saved or None, "init_lora_weights": True,
              "use_rslora": False, "use_dora": False, "inference_mode": True}
    out = Path(run_dir) / ADAPTER_DIR
    out.mkdir(exist_ok=True)
    save_tensors(tensors, out / "adapter_model.safetensors")
    write_json(out / "adapter_config.json", config)
    return out
