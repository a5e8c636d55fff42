"""The boundary with torch.nn, used by the equivalence tests: weight copying and mask conversion.

torch.nn's ``key_padding_mask`` and ``attn_mask`` mean True = *blocked*; attnlab's masks mean
True = may attend. This file is the only place in tests/nn that converts between the two.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

import attnlab.nn as an

# attnlab sub-module name -> torch.nn sub-module name, for blocks and stacks.
_NAMES = {
    "self_attn": "self_attn",
    "cross_attn": "multihead_attn",
    "linear_net.0": "linear1",  # torch: linear1 -> act -> dropout -> linear2
    "linear_net.3": "linear2",  # ours:  Linear(0) -> Dropout(1) -> act(2) -> Linear(3)
    "norm1": "norm1",
    "norm2": "norm2",
    "norm3": "norm3",
    "encoder": "encoder",
    "decoder": "decoder",
    "norm": "norm",
}


@torch.no_grad()
def copy_from_torch(ours: nn.Module, theirs: nn.Module) -> None:
    """Load the weights of a torch.nn attention, layer or stack into its attnlab.nn twin."""
    if isinstance(theirs, nn.MultiheadAttention):
        if theirs._qkv_same_embed_dim:
            wq, wk, wv = theirs.in_proj_weight.chunk(3)  # (3E, E): [W_q; W_k; W_v]
        else:  # kdim/vdim differ from embed_dim: three separate matrices
            wq, wk, wv = theirs.q_proj_weight, theirs.k_proj_weight, theirs.v_proj_weight
        ours.set_qkv(wq, wk, wv, *theirs.in_proj_bias.chunk(3))
        ours.o_proj.load_state_dict(theirs.out_proj.state_dict())
        return
    if isinstance(theirs, (nn.LayerNorm, nn.Linear)):
        ours.load_state_dict(theirs.state_dict())
        return
    if isinstance(theirs, (nn.TransformerEncoder, nn.TransformerDecoder)):
        for our_layer, their_layer in zip(ours.layers, theirs.layers, strict=True):
            copy_from_torch(our_layer, their_layer)
    for our_name, their_name in _NAMES.items():
        their_part = getattr(theirs, their_name, None)
        if their_part is None or our_name.split(".")[0] not in ours._modules:
            continue
        copy_from_torch(ours.get_submodule(our_name), their_part)


def padding(lengths: Tensor, T: int) -> tuple[Tensor, Tensor]:
    """(our mask (B, 1, 1, T) True = real token, torch's key_padding_mask (B, T) True = pad)."""
    ours = an.padding_mask(lengths, T)
    return ours, ~ours[:, 0, 0]


def causal(T: int) -> tuple[Tensor, Tensor]:
    """(our causal mask (T, T) True = may attend, torch's attn_mask (T, T) True = blocked)."""
    ours = an.causal_mask(T)
    return ours, ~ours
