"""``--optimizer muon``: Muon for the weight matrices of the Transformer blocks, AdamW for every
other parameter, stepped, scheduled and checkpointed as one optimiser.

Muon (Jordan et al., 2024, "Muon: An optimizer for hidden layers in neural networks") keeps
SGD's momentum of a weight matrix's gradient and replaces it, before the update, by the
nearest semi-orthogonal matrix (a five-step Newton–Schulz iteration): every direction of the
matrix moves by the same amount. Its authors prescribe it for the hidden layers only: the
embeddings, the output head and the vectors (biases, norms' scales) train with AdamW. Here the
hidden layers are the blocks' attention projections (q, k, v, o; cross-attention's too) and
their feed-forward networks (``hidden_matrices``); everything else, an untied head included,
is AdamW's.

The step is PyTorch's own (``torch.optim.Muon``), with the update scaled to AdamW's size
(``adjust_lr_fn="match_rms_adamw"``: 0.2·√max(A, B) for an A×B matrix; Liu et al., 2025,
"Muon is Scalable for LLM Training"), so that AdamW's learning rate and weight decay carry
over: ``--muon-lr`` defaults to ``--lr``. PyTorch runs the Newton–Schulz steps in bfloat16
(so does Jordan's reference); ``Muon`` here runs them in float64 for float64 matrices
(``--precision 64``), whose user asked for float64 arithmetic: the bfloat16 update differs
measurably from the float64 one (tests/training/test_muon_float64.py). Each matrix takes its
own dtype's path: a float32 one beside float64 ones is PyTorch's step, bfloat16 and all.
"""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ..nn.attention import MultiheadAttention
from ..nn.feedforward import FeedForward, GatedFeedForward

__all__ = ["HIDDEN_LAYERS", "hidden_matrices", "Muon", "MuonWithAdamW", "newton_schulz"]

# The modules whose linear layers are a block's hidden layers.
HIDDEN_LAYERS = (MultiheadAttention, FeedForward, GatedFeedForward)


def hidden_matrices(module: nn.Module) -> dict[str, nn.Parameter]:
    """The weight matrices ``--optimizer muon`` gives to Muon, by name: the weight of every
    ``nn.Linear`` directly inside an attention or feed-forward module (``HIDDEN_LAYERS``)
    that trains. Not their biases (vectors), nor a LoRA update's factors (``LoRALinear``
    is not an ``nn.Linear``: it replaces the projection it adapts), nor anything outside
    the blocks (embeddings, position tables, an input projection, the head).

    Examples:
        >>> from attnlab.nn import EncoderBlock
        >>> sorted(hidden_matrices(EncoderBlock(8, 2, 16)))
        ['linear_net.0.weight', 'linear_net.3.weight', 'self_attn.o_proj.weight', 'self_attn.qkv_proj.weight']
    """
    found: dict[str, nn.Parameter] = {}
    for prefix, layer in module.named_modules():
        if not isinstance(layer, HIDDEN_LAYERS):
            continue
        for name, child in layer.named_children():
            if type(child) is nn.Linear and child.weight.requires_grad:
                found[f"{prefix}.{name}.weight" if prefix else f"{name}.weight"] = child.weight
    return found


def newton_schulz(update: torch.Tensor, coefficients: tuple[float, float, float],
                  steps: int, eps: float) -> torch.Tensor:
    """Muon's orthogonalisation of ``update`` in its own dtype: ``steps`` quintic
    Newton–Schulz iterations X <- aX + (bA + cA²)X, A = XXᵀ, from X = G/‖G‖ (the wide way
    round: a tall matrix is transposed, then back), as ``torch.optim.Muon``'s, which rounds
    to bfloat16 first.

    Examples:
        >>> g = torch.randn(3, 5, dtype=torch.float64)
        >>> x = newton_schulz(g, (3.4445, -4.775, 2.0315), 5, 1e-7)
        >>> x.dtype, x.shape, bool(torch.linalg.svdvals(x).max() < 1.5)
        (torch.float64, torch.Size([3, 5]), True)
    """
    a, b, c = coefficients
    tall = update.size(0) > update.size(1)
    x = update.T if tall else update  # (small, large)
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T  # (small, small)
        x = a * x + torch.addmm(gram, gram, gram, beta=b, alpha=c) @ x
    return x.T if tall else x


class Muon(torch.optim.Muon):
    """``torch.optim.Muon``, whose float64 matrices (``--precision 64``) are orthogonalised in
    float64 (``newton_schulz``) where PyTorch rounds them to bfloat16; a matrix of any other
    dtype takes PyTorch's step, bit for bit, whatever the others' dtype. The same arguments,
    state and ``state_dict``."""

    @torch.no_grad()
    def step(self, closure=None):
        if not any(p.dtype == torch.float64 for g in self.param_groups for p in g["params"]):
            return super().step(closure)
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params: list[torch.Tensor] = []
            grads: list[torch.Tensor] = []
            momenta: list[torch.Tensor] = []
            self._init_group(group, params, grads, momenta)
            lr, momentum = float(group["lr"]), group["momentum"]
            for param, grad, buf in zip(params, grads, momenta):
                buf.lerp_(grad, 1 - momentum)  # M <- μM + (1 - μ)G
                update = grad.lerp(buf, momentum) if group["nesterov"] else buf
                # chosen per matrix: a float32 one beside float64 ones stays PyTorch's
                orthogonal = newton_schulz if update.dtype == torch.float64 else _bfloat16_ns
                update = orthogonal(update, group["ns_coefficients"], group["ns_steps"],
                                    group["eps"])
                param.mul_(1 - lr * group["weight_decay"])
                param.add_(update, alpha=-lr * _rate_scale(group["adjust_lr_fn"], param.shape))
        return loss


def _bfloat16_ns(update: torch.Tensor, coefficients: tuple[float, float, float], steps: int,
                 eps: float) -> torch.Tensor:
    """PyTorch's own Newton–Schulz (in bfloat16), which ``torch.optim.Muon.step`` calls: the
    same module, so present wherever ``torch.optim.Muon`` is."""
    from torch.optim._muon import _zeropower_via_newtonschulz

    return _zeropower_via_newtonschulz(update, coefficients, steps, eps)


def _rate_scale(adjust_lr_fn: str | None, shape: torch.Size) -> float:
    """Muon's rate multiplier for an A×B matrix: 0.2·√max(A, B) (``match_rms_adamw``), or
    Jordan's √max(1, A/B) (``original``, PyTorch's default)."""
    rows, cols = shape[:2]
    if adjust_lr_fn == "match_rms_adamw":
        return 0.2 * math.sqrt(max(rows, cols))
    return math.sqrt(max(1.0, rows / cols))


class MuonWithAdamW(torch.optim.Optimizer):
    """Two optimisers as one: ``torch.optim.Muon`` steps its parameter groups, AdamW its own.

    The training loop, the learning-rate schedule and the checkpoint see one optimiser:
    ``param_groups`` is AdamW's groups then Muon's (the same dicts the two step with, each
    marked ``"muon"``), so a schedule sets both rates, gradient clipping and the gradient
    scaler see every parameter, and ``state_dict`` holds both states in PyTorch's own layout
    (``load_state_dict`` puts them back, so ``--resume`` continues bit for bit).

    Args:
        muon: a ``torch.optim.Muon`` over the hidden weight matrices.
        adamw: a ``torch.optim.AdamW`` (or any optimiser) over every other parameter.

    Examples:
        >>> net = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
        >>> opt = MuonWithAdamW(torch.optim.Muon([net[0].weight], lr=0.02),
        ...                     torch.optim.AdamW([net[0].bias, *net[1].parameters()]))
        >>> [g["muon"] for g in opt.param_groups]
        [False, True]
    """

    def __init__(self, muon: torch.optim.Optimizer, adamw: torch.optim.Optimizer) -> None:
        self.muon, self.adamw = muon, adamw
        for part, is_muon in ((adamw, False), (muon, True)):
            for group in part.param_groups:
                group["muon"] = is_muon
        # Optimizer keeps the group dicts it is given: the parts and this one share them
        super().__init__(adamw.param_groups + muon.param_groups, defaults={})
        self._share()

    def _share(self) -> None:
        """Point each part at this optimiser's groups and state (after a ``load_state_dict``,
        which replaces both with new objects)."""
        for part, is_muon in ((self.adamw, False), (self.muon, True)):
            groups = [g for g in self.param_groups if g["muon"] == is_muon]
            # the part's own __setstate__: defaults for keys an older PyTorch did not save
            part.__setstate__({"state": self.state, "param_groups": groups})

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self._share()

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.adamw.step()
        self.muon.step()
        return loss
