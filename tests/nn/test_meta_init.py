"""A model built on the meta device, then ``to_empty`` and ``reset_parameters``, is the model a
normal build gives: the same tables, the same initialisation (attnlab/nn/weight_init.py).

Before, the rotary cos/sin tables and ALiBi's slopes held whatever memory ``to_empty`` gave,
the sinusoidal table happened to be zeros (a model with no positions, without a word), the
attention projections had torch's Kaiming weights and random biases instead of Xavier and
zeros, a learned position table N(0, 1) instead of N(0, 0.02²), an RMSNorm's γ and a LoRA
update's B garbage."""
import copy
import io

import pytest
import torch
from torch import nn

from attnlab.nn import (
    ALiBi, GatedFeedForward, GraphAttention, LearnedPositionalEncoding, LoRALinear,
    MultiheadAttention, PositionalEncoding, RMSNorm, TransformerDecoder, TransformerEncoder,
)

D = 64


def build() -> nn.Module:
    return nn.ModuleDict(dict(
        enc=TransformerEncoder(2, input_dim=D, num_heads=4, dim_feedforward=2 * D, rotary=True,
                               max_len=32, norm_first=True),
        dec=TransformerDecoder(1, input_dim=D, num_heads=4, dim_feedforward=2 * D),
        gqa=MultiheadAttention(D, D, 4, num_kv_heads=2, qk_norm=True, attn_bias=ALiBi(4)),
        pe=PositionalEncoding(D, 32), lpe=LearnedPositionalEncoding(D, 32),
        rms=RMSNorm(D), gff=GatedFeedForward(D, 2 * D), gat=GraphAttention(D, D, 4),
        lora=LoRALinear(nn.Linear(D, D), 4, 8.0),
    ))


def children_first(model: nn.Module) -> None:  # nn.Module.apply's order
    model.apply(lambda m: m.reset_parameters() if hasattr(m, "reset_parameters") else None)


def parents_first(model: nn.Module) -> None:  # a loop over model.modules()
    for m in model.modules():
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()


def holders_only(model: nn.Module) -> None:  # FSDP's: modules holding tensors themselves
    for m in model.modules():
        if next(m.parameters(recurse=False), None) is not None \
                or next(m.buffers(recurse=False), None) is not None:
            m.reset_parameters()


@pytest.mark.parametrize("reset", [children_first, parents_first, holders_only])
def test_a_meta_build_reset_after_to_empty_is_a_normal_build(reset):
    torch.manual_seed(0)
    normal = build()
    with torch.device("meta"):
        meta = build()
    meta.to_empty(device="cpu")
    torch.manual_seed(1)
    reset(meta)
    made = dict(meta.named_buffers())
    for name, table in normal.named_buffers():  # computed: equal to the last bit
        assert torch.equal(made[name], table), name
    made = dict(meta.named_parameters())
    for name, p in normal.named_parameters():
        p, q = p.detach(), made[name].detach()
        if p.std() == 0:  # zero biases, γ = 1, LoRA's B = 0
            assert torch.equal(q, p), name
        else:  # drawn: the same distribution (seeded; Kaiming's std is 0.58 of Xavier's here)
            assert 0.8 < float(q.std() / p.std()) < 1.25, (name, float(q.std()), float(p.std()))
            assert float(q.abs().max()) <= 1.25 * float(p.abs().max()), name


def test_a_reset_projection_is_xavier_and_a_copy_resets_itself():
    mha = MultiheadAttention(D, D, 4)
    original = mha.o_proj.weight.clone()
    twin = copy.deepcopy(mha)
    with torch.no_grad():
        twin.o_proj.bias.fill_(1.0)
    twin.o_proj.reset_parameters()
    assert torch.equal(twin.o_proj.bias, torch.zeros(D))
    assert torch.equal(mha.o_proj.weight, original)  # the copy's reset is the copy's
    bound = (6 / (D + D)) ** 0.5  # Xavier-uniform's
    assert float(twin.o_proj.weight.abs().max()) <= bound
    assert not torch.equal(twin.o_proj.weight, mha.o_proj.weight)
    buffer = io.BytesIO()
    torch.save(mha, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert type(loaded.o_proj) is nn.Linear  # the class is torch's: Muon, quantize see it
    torch.testing.assert_close(loaded(torch.ones(1, 2, D)), mha(torch.ones(1, 2, D)),
                               rtol=0, atol=0)
    with torch.no_grad():
        loaded.o_proj.bias.fill_(1.0)
    loaded.o_proj.reset_parameters()  # the loaded copy's own reset, not mha's
    assert torch.equal(loaded.o_proj.bias, torch.zeros(D))
    assert torch.equal(mha.o_proj.weight, original)


def test_del_frees_a_model_without_a_garbage_collection():
    """``reset_parameters`` held its module in a reference cycle: after ``del model`` a third
    of a stack's parameters (every projection) stayed allocated until ``gc.collect()``."""
    import gc
    import weakref

    stack = TransformerEncoder(2, input_dim=D, num_heads=4, dim_feedforward=2 * D)
    weights = [weakref.ref(p) for p in stack.parameters()]
    gc.disable()
    try:
        del stack
        alive = sum(ref() is not None for ref in weights)
    finally:
        gc.enable()
    assert alive == 0, f"{alive} of {len(weights)} parameters alive after del"


@pytest.mark.parametrize("scaling", ["none", "llama3"])
def test_a_rotary_embedding_pickled_by_an_older_version_resets(scaling):
    """A whole model pickled before the scaling factors were kept has no ``_scaling_factors``:
    its ``reset_parameters`` raised AttributeError."""
    from attnlab.nn import RotaryEmbedding

    rope = RotaryEmbedding(8, max_len=16, scaling=scaling, factor=8.0, original_max_len=4)
    cos = rope.cos.clone()
    del rope._scaling_factors  # as an older version's pickle loads
    rope.reset_parameters()
    assert torch.equal(rope.cos, cos)
