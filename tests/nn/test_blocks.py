"""Encoder/decoder blocks and the feed-forward network: the course's API, parameter counts and
the post-LN / pre-LN formulas."""
import re

import pytest
import torch
from torch.testing import assert_close

import attnlab.nn as an


def test_feedforward_parameter_count_and_layout():
    d, d_ff = 24, 96
    ffn = an.FeedForward(d, d_ff)
    assert sum(p.numel() for p in ffn.parameters()) == 2 * d * d_ff + d_ff + d
    # the course's linear_net: Linear -> Dropout -> ReLU -> Linear
    assert [type(m).__name__ for m in ffn] == ["Linear", "Dropout", "ReLU", "Linear"]


def test_course_style_encoder_block():
    block = an.EncoderBlock(input_dim=16, num_heads=4, dim_feedforward=32, dropout=0.1)
    x = torch.randn(2, 5, 16)
    assert block(x, mask=an.causal_mask(5)).shape == (2, 5, 16)
    keys = set(block.state_dict())
    assert {"self_attn.qkv_proj.weight", "self_attn.o_proj.weight", "linear_net.0.weight",
            "linear_net.3.weight", "norm1.weight", "norm2.weight"} <= keys


def test_post_ln_block_is_the_papers_formula():
    """x = LN(x + MHA(x)); x = LN(x + FFN(x)) — so each position's output is normalised."""
    block = an.EncoderBlock(input_dim=16, num_heads=4, dim_feedforward=32).eval()
    x = torch.randn(2, 5, 16)
    h = block.norm1(x + block.self_attn(x))
    expected = block.norm2(h + block.linear_net(h))
    assert_close(block(x), expected, atol=0.0, rtol=0.0)


def test_pre_ln_block_is_the_pre_ln_formula():
    """x = x + MHA(LN(x)); x = x + FFN(LN(x)) — the residual stream is never normalised."""
    block = an.EncoderBlock(input_dim=16, num_heads=4, dim_feedforward=32, norm_first=True).eval()
    x = torch.randn(2, 5, 16)
    h = x + block.self_attn(block.norm1(x))
    expected = h + block.linear_net(block.norm2(h))
    assert_close(block(x), expected, atol=0.0, rtol=0.0)


def test_dropout_is_active_in_training_only():
    block = an.EncoderBlock(input_dim=16, num_heads=4, dim_feedforward=32, dropout=0.5)
    x = torch.randn(2, 5, 16)
    assert not torch.allclose(block.train()(x), block(x))
    block.eval()
    assert_close(block(x), block(x), atol=0.0, rtol=0.0)


def test_decoder_block_is_causal_and_returns_both_maps():
    block = an.DecoderBlock(input_dim=16, num_heads=4, dim_feedforward=32).eval()
    tgt, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    out, self_w, cross_w = block(tgt, memory, return_attention=True)
    assert out.shape == (2, 5, 16)
    assert self_w.shape == (2, 4, 5, 5) and cross_w.shape == (2, 4, 5, 7)
    assert_close(self_w.triu(1), torch.zeros_like(self_w), atol=0.0, rtol=0.0)
    # a later target token cannot change an earlier output
    changed = tgt.clone()
    changed[:, 3:] = torch.randn(2, 2, 16)
    assert_close(block(changed, memory)[:, :3], out[:, :3], atol=1e-6, rtol=1e-6)


def test_ff_dropout_sets_the_feed_forwards_inner_dropout_alone():
    """The course's block drops the feed-forward's hidden layer at ``dropout``; ``ff_dropout``
    names another rate there (BERT's and GPT-2's: none), the sub-layer outputs keep theirs."""
    course = an.EncoderBlock(16, 4, 32, dropout=0.3)
    bert = an.EncoderBlock(16, 4, 32, dropout=0.3, ff_dropout=0.0).train()
    assert course.linear_net[1].p == 0.3 and bert.linear_net[1].p == 0.0
    assert bert.dropout.p == 0.3
    x = torch.randn(2, 5, 16)
    assert torch.equal(bert.linear_net(x), bert.linear_net(x))  # nothing dropped inside
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1.0"):
        an.EncoderBlock(16, 4, 32, ff_dropout=1.0)


@pytest.mark.parametrize("build", [
    lambda: an.EncoderBlock(16, 3, 32),
    lambda: an.DecoderBlock(input_dim=16, num_heads=3, dim_feedforward=32),
    lambda: an.TransformerEncoder(2, input_dim=16, num_heads=3, dim_feedforward=32),
    lambda: an.Transformer(1, 1, input_dim=16, num_heads=3, dim_feedforward=32),
])
def test_heads_that_do_not_divide_the_width_are_named_as_the_block_was_called(build):
    """The course builds its blocks with input_dim; the error named the attention's embed_dim
    ("embed_dim (16) must be divisible by num_heads (3)"), an argument the caller never wrote."""
    message = r"^input_dim \(16\) must be divisible by num_heads \(3\)$"
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("make", [
    lambda nf: an.EncoderBlock(16, 4, 32, norm_first=nf),
    lambda nf: an.DecoderBlock(16, 4, 32, norm_first=nf),
])
def test_a_block_names_x_for_a_wrong_width_or_dtype(make, norm_first):
    """A pre-LN block's LayerNorm failed first: "Given normalized_shape=[16], expected input
    with shape [*, 16]" for a width of 12, "mixed dtype (CPU)" for float64; a post-LN block's
    linear layer said "mat1 and mat2 must have the same dtype". None named x."""
    block = make(norm_first)
    memory = torch.randn(2, 3, 16)
    run = (lambda x: block(x, memory)) if isinstance(block, an.DecoderBlock) else block
    with pytest.raises(ValueError, match=re.escape("x must be (B, T, input_dim=16), got shape "
                                                   "(2, 5, 12)")):
        run(torch.randn(2, 5, 12))
    with pytest.raises(TypeError, match=re.escape("x has dtype torch.float64 but the weights "
                                                  "are torch.float32: convert x with "
                                                  ".to(torch.float32)")):
        run(torch.randn(2, 5, 16, dtype=torch.float64))
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast casts for itself
        assert run(torch.randn(2, 5, 16, dtype=torch.bfloat16)).shape == (2, 5, 16)
