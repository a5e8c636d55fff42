"""The activations one training step keeps for its backward pass, counted before a run starts.

``Task.memory_estimate`` counts the weights, the optimiser's state and the data; this module
adds what a step of training holds on top of them (and ``weights``, the bytes the weights
themselves hold), which grows with --batch-size × the length × --num-layers × --model-dim and
was not counted: ``--num-layers 100000`` or ``--batch-size 1000000000`` started training and
was then killed by the operating system (exit 137, nothing saved).
``commands.preflight.check_memory`` compares the sum with the memory available.

The count is a lower bound, so that a run that fits is never refused: per token and block,
the 9·D + d_ff values a block surely keeps for its backward pass (queries, keys and values
3·D; the attention's output and its copy with the heads joined, 2·D; each of the two norms'
input and output, 4·D; the feed-forward's hidden layer, d_ff), in the bytes of the run's
--precision (2 for the mixed and bfloat16 ones, of which some values are kept in float32).
Dropout's masks, the gradients of the backward pass and the kernels' scratch are left out:
measured runs peak higher (docs/scale.md, "Memory"). The attention weights (B × H × T²) are
counted only under --attention-dropout, which takes the reference path on a CPU:
``F.scaled_dot_product_attention``'s fused kernels, which training uses otherwise, never keep
them (measured in docs/scale.md, "Memory"); tasks whose own attention builds them count them
themselves (jets, graph).

Shapes: B batch, T tokens (or set elements) per example, D --model-dim, L --num-layers.
"""
from __future__ import annotations

import os
import sys
from typing import Any

from ..settings import freeze_blocks

__all__ = ["step_activations", "weights", "weight_bytes", "activations_in_host_memory",
           "bytes_per_activation"]

# bytes of a value a step keeps, by --precision; the rest (bf16-mixed, 16-mixed, bf16-true,
# auto: which may resolve to bf16-mixed) at 2, the least of them
_BYTES = {"64": 8, "64-true": 8, "32": 4, "32-true": 4}

# bytes of a weight, by --precision: the true half precisions hold the model (and so its
# gradients and AdamW's moments) in 2; the mixed ones keep float32 weights, as 32 and auto do
_WEIGHT_BYTES = {"64": 8, "64-true": 8, "bf16-true": 2, "16-true": 2}

# device files of an accelerator whose own memory would hold the activations (NVIDIA, AMD's
# ROCm, WSL's GPU): with --accelerator auto the run may go there, and they are not counted
_GPU_DEVICES = ("/dev/nvidia0", "/dev/kfd", "/dev/dxg")


def bytes_per_activation(precision: Any) -> int:
    """Bytes of a kept activation under ``--precision``: a lower bound.

    Examples:
        >>> bytes_per_activation("32"), bytes_per_activation("bf16-mixed"), bytes_per_activation(64)
        (4, 2, 8)
    """
    return _BYTES.get(str(precision), 2)


def activations_in_host_memory(cfg: dict[str, Any]) -> bool:
    """Whether a run with ``cfg`` keeps its weights and activations in this machine's memory:
    on the CPU (--accelerator cpu, or auto where no GPU is found; Apple's MPS shares the
    memory, but macOS reports none available, so nothing is checked there). Found without
    importing torch; where unsure (a GPU device file), no: a refused run that fits is worse than an
    unrefused one that does not."""
    accelerator = cfg.get("accelerator", "auto")
    if accelerator == "cpu":
        return True
    if accelerator != "auto" or sys.platform == "darwin":
        return False
    return not any(os.path.exists(device) for device in _GPU_DEVICES)


def step_activations(cfg: dict[str, Any], *, batch: int, length: int, length_flag: str,
                     layers: int | None = None, layers_named: str = "",
                     ff: int | None = None,
                     outputs: int = 0, outputs_flag: str = "") -> list[tuple[str, float]]:
    """The (what, bytes) parts of one training step's activations, for ``memory_estimate``:
    ``batch`` examples of ``length`` tokens (a lower bound of the real length where only the
    data says it) through ``layers`` blocks (default --num-layers; ``layers_named`` names
    the flags that add up to another count: translate's two stacks) of width --model-dim and
    feed-forward width ``ff`` (default --dim-feedforward, else 4·D); and, with ``outputs``
    (the classes or vocabulary scored at every position, named by ``outputs_flag``), the
    scores and their log-softmax. With --checkpoint-activations a block keeps only its input
    (D per token), and one block's values are made again in the backward pass. Nothing where
    they are not in this machine's memory (``activations_in_host_memory``).

    Examples:
        >>> cfg = {"accelerator": "cpu", "precision": "32", "model_dim": 32, "num_layers": 100,
        ...        "dim_feedforward": 64}
        >>> [(what, size) for what, size in step_activations(cfg, batch=8, length=16,
        ...                                                  length_flag="--seq-len")]
        [('the activations of one training step (--batch-size 8 x --seq-len 16 x --num-layers 100 x 352 values of --model-dim 32)', 18022400)]
        >>> 4 * 8 * 16 * 100 * (9 * 32 + 64)  # float32 bytes x B x T x L x (9·D + d_ff)
        18022400
    """
    if not activations_in_host_memory(cfg):
        return []
    D = int(cfg.get("model_dim") or 0)
    L = _trained_through(cfg, int(layers if layers is not None else cfg.get("num_layers") or 0))
    per_token = 9 * D + int(ff or cfg.get("dim_feedforward") or 4 * D)
    size = bytes_per_activation(cfg.get("precision"))
    tokens = batch * length
    kept = (tokens * (L * D + per_token) if cfg.get("checkpoint_activations")
            else tokens * L * per_token)
    through = f"{L:,} blocks ({layers_named})" if layers_named else f"--num-layers {L:,}"
    found = [(f"the activations of one training step (--batch-size {batch:,} x {length_flag} "
              f"{length:,} x {through} x {per_token:,} values of --model-dim {D:,})",
              size * kept)]
    if cfg.get("attention_dropout"):
        # dropout on the attention weights takes the reference path on a CPU (the fused
        # kernels have none there), which keeps each block's weights, the mask and the weights
        # dropped out: B x H x T x T each
        H, blocks = int(cfg.get("num_heads") or 1), 1 if cfg.get("checkpoint_activations") else L
        found.append((f"the attention weights --attention-dropout keeps (--batch-size {batch:,} "
                      f"x --num-heads {H:,} x {length_flag} {length:,} squared x {blocks:,} "
                      f"blocks)", (2 * size + 1) * batch * H * length * length * blocks))
    if outputs:
        found.append((f"one training step's scores and their log-softmax (--batch-size "
                      f"{batch:,} x {length_flag} {length:,} x {outputs_flag} {outputs:,})",
                      2 * size * tokens * outputs))
    return found


def weight_bytes(cfg: dict[str, Any], params: int, *, in_blocks: int = 0,
                 layers: int | None = None) -> int:
    """Bytes this machine holds for ``params`` weights, ``in_blocks`` of them spread evenly
    over ``layers`` blocks (default --num-layers), in --precision's format (``_WEIGHT_BYTES``):
    a trained weight with its gradient and AdamW's two moments (4 copies), a frozen one once.
    Under --lora-rank every weight is frozen (its small update is not counted); under
    --freeze only the blocks ``_trained_through`` counts train (a lower bound, as for the
    activations). Nothing where the weights are not in this machine's memory
    (``activations_in_host_memory``).

    Examples:
        >>> cpu = {"accelerator": "cpu", "num_layers": 4}
        >>> weight_bytes(cpu, 1000), weight_bytes({**cpu, "precision": "bf16-true"}, 1000)
        (16000, 8000)
        >>> weight_bytes({**cpu, "lora_rank": 8}, 1000)  # frozen: float32 weights only
        4000
        >>> weight_bytes({**cpu, "freeze": "all-but-last-1"}, 1000, in_blocks=800)
        6400
        >>> weight_bytes({"accelerator": "gpu"}, 1000)
        0
    """
    if not activations_in_host_memory(cfg):
        return 0
    size = _WEIGHT_BYTES.get(str(cfg.get("precision")), 4)
    if cfg.get("lora_rank"):
        trained = 0
    elif str(cfg.get("freeze") or "none") == "none":
        trained = params
    else:
        L = int(layers if layers is not None else cfg.get("num_layers") or 0)
        trained = in_blocks * _trained_through(cfg, L) // L if L > 0 else 0
    return size * (params + 3 * trained)


def weights(cfg: dict[str, Any], params: int, *, in_blocks: int = 0,
            layers: int | None = None) -> list[tuple[str, float]]:
    """The (what, bytes) part of the model's ``params`` weights (``weight_bytes``), for
    ``memory_estimate``; none where they are not in this machine's memory.

    Examples:
        >>> weights({"accelerator": "cpu"}, 1000)
        [("the model's weights, gradients and optimiser state (~1,000 parameters)", 16000)]
        >>> weights({"accelerator": "cpu", "lora_rank": 4}, 1000)[0][0]
        "the model's weights (~1,000 parameters, frozen but for --lora-rank's update)"
    """
    size = weight_bytes(cfg, params, in_blocks=in_blocks, layers=layers)
    if not size:
        return []
    if cfg.get("lora_rank"):
        what = f"weights (~{params:,} parameters, frozen but for --lora-rank's update)"
    elif str(cfg.get("freeze") or "none") != "none":
        what = f"weights (~{params:,} parameters, --freeze {cfg['freeze']}: the trained ones " \
               f"with their gradients and optimiser state)"
    else:
        what = f"weights, gradients and optimiser state (~{params:,} parameters)"
    return [(f"the model's {what}", size)]


def _trained_through(cfg: dict[str, Any], layers: int) -> int:
    """Of ``layers`` blocks, those the backward pass goes through, which keep activations: all
    of them with --lora-rank (every block's adapters train) or nothing frozen; N with --freeze
    all-but-last-N; none under any other --freeze (a lower bound: a frozen embedding alone
    still trains every block, but the blocks' values are not counted).

    Examples:
        >>> _trained_through({"freeze": "all-but-last-2"}, 12), _trained_through({}, 12)
        (2, 12)
    """
    freeze = str(cfg.get("freeze") or "none")
    if freeze == "none" or cfg.get("lora_rank"):
        return layers
    return min(layers, freeze_blocks(freeze) or 0)
