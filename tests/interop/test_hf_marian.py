"""MarianMTModel -> Seq2SeqTransformer: copied weights give the same logits and greedy ids.

Tiny random configs, nothing downloaded. fp32, atol = rtol = 1e-5.
"""
import pytest
import torch
from torch.testing import assert_close

from .conftest import transformers  # noqa: E402  (imported when a test first uses it)
from attnlab.interop import from_hf, to_hf  # noqa: E402
from attnlab.models import Seq2SeqTransformer  # noqa: E402
from attnlab.nn.positional import sinusoidal_table  # noqa: E402

TOL = dict(atol=1e-5, rtol=1e-5)
V, PAD, EOS = 48, 47, 0  # Marian's layout: eos 0, pad (= decoder start) the last id


def tiny_marian(**overrides):
    # opus-mt checkpoints use swish and scale_embedding=True (MarianConfig's defaults are gelu
    # and False); forced_eos_token_id=None because attnlab never forces EOS at the length limit
    cfg = dict(vocab_size=V, d_model=16, encoder_layers=2, decoder_layers=1,
               encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=24,
               decoder_ffn_dim=24, max_position_embeddings=64, activation_function="swish",
               scale_embedding=True, pad_token_id=PAD, decoder_start_token_id=PAD,
               eos_token_id=EOS, forced_eos_token_id=None)
    cfg.update(overrides)
    hf = transformers.MarianMTModel(transformers.MarianConfig(**cfg)).eval()
    # Hugging Face initialises biases to 0, LayerNorms to (1, 0) and weights with std 0.02: a
    # bias or LayerNorm copied to the wrong features would go unseen, and greedy decoding would
    # ignore the source. Random values everywhere but the fixed position table.
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "embed_positions" in name:
                continue
            if "embed_tokens" in name or "shared" in name:
                p.normal_(std=0.1)  # small, so positions and the source steer the decoder
            elif "layer_norm.weight" in name:
                p.normal_(1.0, 0.2)
            else:
                p.normal_(std=0.2 if name.endswith("bias") else 0.5)
    return hf


def right_padded_source(lengths=(7, 4, 2)):
    S = max(lengths)
    mask = torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]  # (B, S)
    ids = torch.randint(1, PAD, (len(lengths), S))  # neither EOS nor PAD inside the text
    return ids.masked_fill(~mask, PAD), mask.long()


@pytest.mark.parametrize("overrides", [
    {},  # opus-mt layout: shared and tied embeddings scaled by √D
    dict(scale_embedding=False, activation_function="gelu", d_model=24, encoder_attention_heads=3,
         decoder_attention_heads=3, share_encoder_decoder_embeddings=False, decoder_vocab_size=56),
], ids=["opus-mt", "unscaled-separate-vocab"])
def test_logits_match_on_right_padded_source(overrides):
    hf = tiny_marian(**overrides)
    ours = from_hf(hf)
    assert isinstance(ours, Seq2SeqTransformer) and not ours.training
    src, src_mask = right_padded_source()
    tgt = torch.randint(1, hf.config.decoder_vocab_size - 1, (3, 6))
    tgt[:, 0] = PAD  # Marian's decoder start token
    with torch.no_grad():
        expected = hf(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt).logits
        assert_close(ours(src, tgt, src_mask=src_mask), expected, **TOL)
        assert_close(ours(src, tgt), expected, **TOL)  # default mask: src != pad_token_id


@pytest.mark.slow
def test_greedy_generations_identical(same_greedy):
    # tiny random models tend to repeat one token whatever the source; with this seed the three
    # rows differ, one changes token midway, and no step's top two logits are closer than 1e-3
    torch.manual_seed(5)
    hf = tiny_marian()
    src, src_mask = right_padded_source()
    ours = from_hf(hf)
    assert (ours.pad_id, ours.sos_id, ours.eos_id) == (PAD, PAD, EOS)  # Marian starts from pad

    # the config's EOS (0) is never produced by this model: all 12 tokens of every row compared.
    # Both lay out (B, 1 + N): the start token (Marian's pad id), the tokens, pad after EOS.
    free = same_greedy(hf, ours, src, src_mask, EOS)
    assert free.shape == (3, 13) and (free[:, 0] == PAD).all()
    assert len({tuple(row) for row in free.tolist()}) == 3  # each source gives its own output
    # an EOS the model does produce: rows stop at different steps and are padded after it
    stopped = same_greedy(hf, ours, src, src_mask, int(free[1, 1]))
    assert (stopped[:, 1:] == PAD).any() and not (stopped[:, 1:] == PAD).all()


@pytest.mark.parametrize("overrides, setting", [
    (dict(activation_function="tanh"), "activation 'tanh'"),
    (dict(decoder_attention_heads=4), "decoder_attention_heads"),
    (dict(decoder_ffn_dim=32), "decoder_ffn_dim"),
    (dict(encoder_layerdrop=0.1), "encoder_layerdrop"),
])
def test_refuses_what_seq2seq_cannot_represent(overrides, setting):
    with pytest.raises(ValueError, match=setting):
        from_hf(tiny_marian(**overrides))


def test_a_final_logits_bias_is_kept_and_exported():
    hf = tiny_marian()
    hf.final_logits_bias.normal_(std=1.0)  # opus-mt's output layer has a trained bias
    ours = from_hf(hf)
    assert ours.config.final_logits_bias
    src, src_mask = right_padded_source()
    tgt = torch.randint(0, V, (3, 5))
    with torch.no_grad():
        expected = hf(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt).logits
        assert_close(ours(src, tgt, src_mask=src_mask.bool()), expected, **TOL)
        back = to_hf(ours).eval()
        assert torch.equal(back.final_logits_bias, hf.final_logits_bias)
        assert_close(back(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt).logits,
                     expected, **TOL)


def test_refuses_another_position_table_and_a_model_without_head():
    hf = tiny_marian()
    with torch.no_grad():  # attnlab's interleaved layout, which the permutation would scramble
        hf.model.encoder.embed_positions.weight.copy_(sinusoidal_table(64, 16))
    with pytest.raises(ValueError, match="position table"):
        from_hf(hf)
    with pytest.raises(ValueError, match="MarianMTModel"):
        from_hf(hf.model)
