"""Seq2SeqTransformer -> MarianMTModel (to_hf): the same logits and greedy ids, and back again.

Tiny random models, nothing downloaded. fp32, atol = rtol = 1e-5.
"""
import pytest
import torch
from torch import nn
from torch.testing import assert_close

from .conftest import transformers  # noqa: E402  (imported when a test first uses it)
from attnlab.interop import from_hf, to_hf  # noqa: E402
from attnlab.models import Seq2SeqTransformer  # noqa: E402
from attnlab.nn import MultiheadAttention  # noqa: E402

TOL = dict(atol=1e-5, rtol=1e-5)
PAD, SOS, EOS = 0, 1, 2  # attnlab's tokenisers; Marian's own layout is tested in test_hf_marian.py

# opus-mt-like: one vocabulary, equal source and target embeddings, tied head -> one shared
# matrix in Marian. The others: separate vocabularies (tied / untied head), other activations.
CONFIGS = {
    "shared-tied-silu": dict(vocab=(40, 40), share=True),
    "separate-tied-relu": dict(vocab=(40, 48), activation="relu"),
    "separate-untied-gelu_tanh": dict(vocab=(40, 48), tie_embeddings=False, activation="gelu_tanh",
                                      model_dim=24, num_heads=3),
}


def random_seq2seq(vocab=(40, 40), share=False, **overrides):
    kwargs = dict(model_dim=16, num_heads=2, num_encoder_layers=2, num_decoder_layers=1,
                  dim_feedforward=24, max_len=64, activation="silu", pad_id=PAD, sos_id=SOS,
                  eos_id=EOS)
    kwargs.update(overrides)
    model = Seq2SeqTransformer(*vocab, **kwargs).eval()
    # every parameter re-drawn: attnlab starts biases at 0 and LayerNorms at (1, 0), so a bias
    # or LayerNorm copied to the wrong features would go unseen
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embedding" in name or name == "output.weight":
                p.normal_(std=0.1)  # small: √D · E should not drown the positions
            elif "norm" in name and name.endswith("weight"):
                p.normal_(1.0, 0.2)
            else:
                p.normal_(std=0.2 if name.endswith("bias") else 0.5)
        if share:
            model.tgt_embedding.weight.copy_(model.src_embedding.weight)
    return model


def right_padded_source(V_s, lengths=(7, 4, 2)):
    S = max(lengths)
    mask = torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]  # (B, S)
    ids = torch.randint(EOS + 1, V_s, (len(lengths), S))
    return ids.masked_fill(~mask, PAD), mask.long()


@pytest.mark.parametrize("name", CONFIGS)
def test_exported_marian_gives_the_same_logits(name):
    ours = random_seq2seq(**CONFIGS[name])
    hf = to_hf(ours)
    assert isinstance(hf, transformers.MarianMTModel) and not hf.training
    c = hf.config
    assert (c.pad_token_id, c.decoder_start_token_id, c.eos_token_id) == (PAD, SOS, EOS)
    assert c.forced_eos_token_id is None and c.scale_embedding
    assert (c.encoder_layers, c.decoder_layers, c.max_position_embeddings) == (2, 1, 64)
    assert not hf.final_logits_bias.any()
    shared = CONFIGS[name].get("share", False)
    assert c.share_encoder_decoder_embeddings == shared
    assert (hf.model.encoder.embed_tokens.weight is hf.lm_head.weight) == shared
    tied = ours.output.weight is ours.tgt_embedding.weight
    assert c.tie_word_embeddings == tied
    assert (hf.model.decoder.embed_tokens.weight is hf.lm_head.weight) == tied

    V_s, V_t = CONFIGS[name]["vocab"]
    src, src_mask = right_padded_source(V_s)
    src[0, 3] = PAD  # the pad id inside a text: the explicit mask, not the id, decides
    tgt = torch.randint(0, V_t, (3, 6))
    tgt[:, 0], tgt[1, 2] = SOS, PAD  # neither decoder masks the pad id
    with torch.no_grad():
        expected = hf(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt).logits
        assert_close(ours(src, tgt, src_mask=src_mask), expected, **TOL)
        # Marian masks nothing by id: without attention_mask every source position is attended
        # to, which for attnlab (default mask src != pad_id) must be said with an all-True mask
        unmasked = hf(input_ids=src, decoder_input_ids=tgt).logits
        assert_close(ours(src, tgt, src_mask=torch.ones_like(src_mask)), unmasked, **TOL)
        assert not torch.allclose(unmasked, expected, **TOL)  # the mask does matter


@pytest.mark.slow
def test_greedy_generations_identical(same_greedy):
    # tiny random models tend to repeat one token whatever the source; with this seed the three
    # rows differ, two change token midway, and no step's top two logits are closer than 1e-2
    torch.manual_seed(11)
    ours = random_seq2seq(**CONFIGS["separate-tied-relu"])
    src, src_mask = right_padded_source(40)
    hf = to_hf(ours)

    # an EOS the model never produces: all 12 tokens of every row compared; both start with
    # SOS (Marian's decoder_start_token_id) and lay out (B, 1 + N)
    free = same_greedy(hf, ours, src, src_mask, 47)
    assert free.shape == (3, 13) and (free[:, 0] == SOS).all()
    assert len({tuple(row) for row in free.tolist()}) == 3  # each source gives its own output
    # an EOS it does produce: rows stop at different steps and are padded with PAD after it
    stopped = same_greedy(hf, ours, src, src_mask, int(free[1, 3]))
    assert (stopped[:, 1:] == PAD).any() and not (stopped[:, 1:] == PAD).all()
    # the exported generation config alone (eos_id, pad_id, sos_id) gives attnlab's defaults
    assert torch.equal(hf.generate(src, attention_mask=src_mask, max_new_tokens=12),
                       ours.generate(src, 12, src_mask=src_mask))


@pytest.mark.parametrize("name", CONFIGS)
def test_round_trip_seq2seq_to_marian_and_back(name):
    ours = random_seq2seq(**CONFIGS[name], dropout=0.1)
    back = from_hf(to_hf(ours))
    assert isinstance(back, Seq2SeqTransformer) and not back.training
    assert (back.pad_id, back.sos_id, back.eos_id) == (PAD, SOS, EOS)
    assert (back.output.weight is back.tgt_embedding.weight) == \
        (ours.output.weight is ours.tgt_embedding.weight)
    a, b = ours.state_dict(), back.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert repr(back) == repr(ours)  # sizes, activations, dropout rates
    attention_dropout = [m.dropout for m in back.modules() if isinstance(m, MultiheadAttention)]
    assert attention_dropout == [m.dropout for m in ours.modules()
                                 if isinstance(m, MultiheadAttention)]


def _with_activation(module, layer=0):
    model = random_seq2seq()
    model.transformer.decoder.layers[layer].linear_net[2] = module
    return model


@pytest.mark.parametrize("make, setting", [
    (lambda: random_seq2seq(norm_first=True), "norm_first"),
    (lambda: random_seq2seq(positional="learned"), "positional='learned'"),
    (lambda: _with_activation(nn.Tanh()), "activation"),
    (lambda: _with_activation(nn.ReLU()), "activation"),  # silu elsewhere: Marian has one
], ids=["norm_first", "learned", "tanh", "mixed"])
def test_to_hf_refuses_what_marian_cannot_represent(make, setting):
    with pytest.raises(ValueError, match=setting):
        to_hf(make())


def test_to_hf_refuses_gpt2_token_ids_for_a_seq2seq_model_and_other_modules():
    with pytest.raises(ValueError, match="eos_token_id"):
        to_hf(random_seq2seq(), eos_token_id=EOS)
    with pytest.raises(ValueError, match="Seq2SeqTransformer"):
        to_hf(nn.Linear(2, 2))
