"""Low-rank adaptation (LoRA; Hu et al., 2021, "LoRA: Low-Rank Adaptation of Large Language
Models"): train a small update of a linear layer's weight instead of the weight itself.

Shapes: I input width, O output width, r the rank (r ≤ min(I, O)).

    W = W₀ + (α / r) · B A        W₀ (O, I) frozen,  A (r, I),  B (O, r) trained
    y = x Wᵀ + b                  b frozen
      = (x W₀ᵀ + b) + (α / r) · (x Aᵀ) Bᵀ

The forward computes the second line: two thin products of width r beside the frozen layer,
as peft does. Forming W first writes an O×I matrix every step, and makes the backward compute
W's full O×I gradient, a product as large as the layer's own, which a frozen layer skips; the
thin products cost r·(I + O) per token each way (``benchmarks/lora_step.py``).

B starts at zero, so the adapted layer starts as exactly the layer it wraps; A starts as
``nn.Linear`` initialises a weight. Only r·(I + O) numbers train per layer instead of I·O.
``merged()`` folds the update into an ordinary ``nn.Linear``, so a model trained this way is
saved and loaded as any other.

``add_lora(model, rank, alpha, targets=...)`` wraps linear layers and freezes every other
parameter; ``merge_lora(model)`` replaces each wrapper by its merged layer. ``targets`` names
which layers, as peft's ``target_modules`` does (``LORA_TARGETS``):

- ``"attention"`` (the default): the projections of every ``MultiheadAttention`` (the stacked
  Q/K/V or Q and K/V projections, and the output projection — the paper adapts W_q and W_v;
  attnlab's self-attention stacks Q, K and V per head in one matrix, which is adapted as one);
- ``"mlp"``: the linear layers of every feed-forward network (GPT-2's fc and proj, Llama's
  gate, up and down projections);
- ``"all-linear"``: both (peft's "all-linear": every linear layer of the blocks; the output
  head is left alone, as peft leaves it).

QLoRA (Dettmers et al., 2023) found adapting every linear layer of the blocks needed to match
full fine-tuning; the original paper adapted attention only.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..activation_names import LORA_TARGETS  # torch-free: the flag offers them as choices
from .attention import MultiheadAttention
from .feedforward import FeedForward, GatedFeedForward

__all__ = ["LoRALinear", "add_lora", "merge_lora", "lora_factors", "ATTENTION_PROJECTIONS",
           "LORA_TARGETS"]

# the linear layers of a MultiheadAttention (self-attention: qkv_proj; cross: q_proj, kv_proj)
ATTENTION_PROJECTIONS = ("qkv_proj", "q_proj", "kv_proj", "o_proj")


class LoRALinear(nn.Module):
    """``base`` (frozen) plus a trainable rank-``rank`` update scaled by ``alpha / rank``.

    Args:
        base: the linear layer to adapt; its weight and bias are frozen (not copied).
        rank: r, at least 1 and at most min(in_features, out_features).
        alpha: the update's scale numerator (α / r multiplies B A).
        dropout: dropout on the update's input only (peft's ``lora_dropout``); the frozen
            layer sees x unchanged. 0 (the default) is none.

    Shape:
        (..., I) -> (..., O), as ``base``.

    Examples:
        >>> layer = LoRALinear(nn.Linear(8, 4), rank=2, alpha=2.0)
        >>> x = torch.randn(3, 8)
        >>> torch.equal(layer(x), layer.base(x))   # B = 0: the layer it wraps
        True
        >>> [n for n, p in layer.named_parameters() if p.requires_grad]
        ['lora_A', 'lora_B']
    """

    def __init__(self, base: nn.Linear, rank: int, alpha: float, *, dropout: float = 0.0) -> None:
        super().__init__()
        limit = min(base.in_features, base.out_features)
        if not 1 <= rank <= limit:
            raise ValueError(f"rank must be in [1, {limit}] for a {base.in_features} -> "
                             f"{base.out_features} layer, got {rank}")
        self.base = base.requires_grad_(False)
        self.rank, self.alpha, self.scale = rank, float(alpha), float(alpha) / rank
        weight = base.weight
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features, dtype=weight.dtype,
                                               device=weight.device))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, dtype=weight.dtype,
                                               device=weight.device))
        self.reset_parameters()
        self.dropout = nn.Dropout(dropout) if dropout else nn.Identity()

    def reset_parameters(self) -> None:
        """A as ``nn.Linear``'s weight, B = 0 (the update starts at zero): the initialisation
        again, after ``to_empty`` (a meta-device build's memory). ``base`` is not touched."""
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # nn.Linear's weight init
        nn.init.zeros_(self.lora_B)

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    @property
    def weight(self) -> Tensor:
        """W = W₀ + (α / r) B A: what every reader of ``.weight`` (e.g. a cross-attention
        slice of the stacked projection) sees; the forward never forms it."""
        return self.base.weight + self.scale * (self.lora_B @ self.lora_A)

    @property
    def bias(self) -> Tensor | None:
        return self.base.bias

    def forward(self, x: Tensor) -> Tensor:
        update = F.linear(F.linear(self.dropout(x), self.lora_A), self.lora_B)  # (..., r) -> (..., O)
        return self.base(x) + update * self.scale

    @torch.no_grad()
    def merged(self) -> nn.Linear:
        """An ``nn.Linear`` computing the same function, with W as its weight."""
        base = self.base
        out = nn.Linear(base.in_features, base.out_features, bias=base.bias is not None,
                        device=base.weight.device, dtype=base.weight.dtype)
        out.weight.copy_(self.weight)
        if base.bias is not None:
            out.bias.copy_(base.bias)
        return out

    def extra_repr(self) -> str:
        return f"rank={self.rank}, alpha={self.alpha:g}"


def _adapted(module: nn.Module, targets: str) -> tuple[str, ...]:
    """The names of ``module``'s own linear layers that ``targets`` adapts (none: empty)."""
    if isinstance(module, MultiheadAttention) and targets in ("attention", "all-linear"):
        return ATTENTION_PROJECTIONS
    if isinstance(module, (FeedForward, GatedFeedForward)) and targets in ("mlp", "all-linear"):
        return tuple(module._modules)  # the nn.Linear among them: fc/proj, gate/up/down
    return ()


def add_lora(model: nn.Module, rank: int, alpha: float, *, targets: str = "attention") -> list[str]:
    """Freeze every parameter of ``model`` and wrap each linear layer ``targets`` names
    (``"attention"``, ``"mlp"`` or ``"all-linear"``: see the module doc) in a ``LoRALinear``
    (in place). Returns the wrapped layers' names.

    Raises:
        ValueError: if ``targets`` is not one of ``LORA_TARGETS``, the model has no layer it
            names, or ``rank`` is too large for one of them.

    Examples:
        >>> from attnlab.models import CausalLM
        >>> lm = CausalLM(50, model_dim=16, num_heads=2, num_layers=2)
        >>> add_lora(lm, rank=4, alpha=4)
        ['decoder.layers.0.self_attn.qkv_proj', 'decoder.layers.0.self_attn.o_proj', 'decoder.layers.1.self_attn.qkv_proj', 'decoder.layers.1.self_attn.o_proj']
        >>> sum(p.numel() for p in lm.parameters() if p.requires_grad)
        768
        >>> add_lora(CausalLM(50, model_dim=16, num_heads=2, num_layers=1), 4, 4, targets="mlp")
        ['decoder.layers.0.linear_net.0', 'decoder.layers.0.linear_net.3']
    """
    if targets not in LORA_TARGETS:
        raise ValueError(f"targets must be one of {LORA_TARGETS}, got {targets!r}")
    model.requires_grad_(False)
    wrapped = []
    for name, module in list(model.named_modules()):
        for attr in _adapted(module, targets):
            layer = module._modules.get(attr)
            if isinstance(layer, nn.Linear):
                setattr(module, attr, LoRALinear(layer, rank, alpha))
                wrapped.append(f"{name}.{attr}" if name else attr)
    if not wrapped:
        raise ValueError(f"{type(model).__name__} has no {targets} layers to adapt")
    return wrapped


@torch.no_grad()
def lora_factors(model: nn.Module) -> dict[str, tuple[Tensor, Tensor]]:
    """A copy of every ``LoRALinear``'s (A, B), by the wrapped layer's name (``add_lora``'s):
    what a LoRA run writes as its adapter, taken before ``merge_lora`` folds them away.

    Examples:
        >>> from attnlab.models import CausalLM
        >>> lm = CausalLM(50, model_dim=16, num_heads=2, num_layers=1)
        >>> _ = add_lora(lm, rank=4, alpha=4)
        >>> A, B = lora_factors(lm)["decoder.layers.0.self_attn.o_proj"]
        >>> tuple(A.shape), tuple(B.shape)
        ((4, 16), (16, 4))
    """
    return {name: (m.lora_A.detach().clone(), m.lora_B.detach().clone())
            for name, m in model.named_modules() if isinstance(m, LoRALinear)}


def merge_lora(model: nn.Module) -> int:
    """Replace every ``LoRALinear`` in ``model`` by its merged ``nn.Linear`` (in place); the
    merged layers train again (``requires_grad``), as a freshly loaded model's would. Returns
    how many were merged."""
    count = 0
    for module in list(model.modules()):
        for attr, child in list(module._modules.items()):
            if isinstance(child, LoRALinear):
                setattr(module, attr, child.merged())
                count += 1
    return count
