"""Seq2SeqTransformer: the forward pass as the equations state it, masks, and generation
equivalences (cached = uncached, padded batch = each alone, one beam = greedy, causality,
beam search no worse than greedy)."""
import math

import pytest
import torch
import torch.nn.functional as F

from attnlab.generation import decode
from attnlab.models import Seq2SeqTransformer

PAD, SOS, EOS = 0, 1, 2


def tiny(**kw):
    args = dict(model_dim=32, num_heads=4, num_layers=2, dim_feedforward=64, dropout=0.0)
    args.update(kw)
    return Seq2SeqTransformer(14, 16, **args).eval()


@pytest.fixture(scope="module")
def trained():
    """A tiny model trained for a few seconds to reverse 2-6 symbols, so that its outputs end
    with EOS at different lengths (a random model never stops)."""
    torch.manual_seed(0)
    model = tiny(num_layers=1)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(150):
        lengths = torch.randint(2, 7, (32,))
        src = torch.randint(4, 14, (32, 6)) * (torch.arange(6) < lengths[:, None])
        tgt = torch.zeros(32, 8, dtype=torch.long)
        tgt[:, 0] = SOS
        for i, n in enumerate(lengths.tolist()):
            tgt[i, 1 : n + 1] = src[i, :n].flip(0)
            tgt[i, n + 1] = EOS
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 16), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def padded_sources():
    # three sources of different lengths, right-padded with 0
    return torch.tensor([[5, 6, 7, 8, 9, 10], [11, 4, 0, 0, 0, 0], [7, 7, 12, 13, 0, 0]])


# ---- the forward pass ---------------------------------------------------------------------
def test_forward_is_scaled_embeddings_plus_positions_through_the_transformer():
    torch.manual_seed(0)
    model = tiny(tie_embeddings=False)
    src, tgt = padded_sources(), torch.tensor([[1, 4, 5], [1, 6, 0], [1, 7, 8]])
    d = 32
    x_src = model.src_embedding(src) * math.sqrt(d) + model.positional_encoding.pe[:, :6]
    x_tgt = model.tgt_embedding(tgt) * math.sqrt(d) + model.positional_encoding.pe[:, :3]
    mask = (src != 0)[:, None, None, :]
    h = model.transformer(x_src, x_tgt, mask)
    expected = h @ model.output.weight.T  # (B, T, V)
    torch.testing.assert_close(model(src, tgt), expected, rtol=1e-5, atol=1e-5)


def test_tied_output_projection_shares_the_target_embedding():
    tied, untied = tiny(), tiny(tie_embeddings=False)
    assert tied.output.weight is tied.tgt_embedding.weight
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731 (parameters() dedups)
    assert n(untied) - n(tied) == 16 * 32


def test_explicit_src_mask_equals_the_mask_from_pad_ids_and_hides_tokens():
    torch.manual_seed(0)
    model = tiny()
    src, tgt = padded_sources(), torch.tensor([[1, 4], [1, 5], [1, 6]])
    torch.testing.assert_close(model(src, tgt), model(src, tgt, src_mask=src != 0), rtol=0, atol=0)
    # hiding the last real token of row 0 is the same as not having it
    hide = src != 0
    hide[0, 5] = False
    torch.testing.assert_close(model(src, tgt, src_mask=hide)[0], model(src[:1, :5], tgt[:1])[0],
                               rtol=1e-5, atol=1e-5)


def test_decoder_is_causal():
    torch.manual_seed(0)
    model = tiny()
    src = padded_sources()
    tgt = torch.randint(3, 16, (3, 7))
    tgt[:, 0] = SOS
    changed = tgt.clone()
    changed[:, 4] = (tgt[:, 4] + 1 - 3) % 13 + 3  # a different token at position 4
    a, b = model(src, tgt), model(src, changed)
    torch.testing.assert_close(a[:, :4], b[:, :4], rtol=1e-6, atol=1e-6)  # outputs <= 3 unchanged
    assert (a[:, 4:] - b[:, 4:]).abs().amax() > 1e-3  # and position 4 onwards does see it


def test_constructor_and_input_errors_show_the_values():
    with pytest.raises(ValueError, match=r"tgt_vocab_size must be a positive integer, got 0"):
        Seq2SeqTransformer(10, 0)
    with pytest.raises(ValueError, match=r"positional must be one of sinusoidal, learned, got 'rope'"):
        Seq2SeqTransformer(10, 10, positional="rope")
    with pytest.raises(ValueError, match=r"src_mask must have the shape of src \(3, 6\), got \(3, 5\)"):
        tiny()(padded_sources(), torch.ones(3, 1, dtype=torch.long),
               src_mask=torch.ones(3, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"src must be token ids in 0\.\.13, got values 0\.\.20"):
        tiny().generate(torch.tensor([[5, 20, 0]]), 3)  # where the ids enter


# ---- generation ---------------------------------------------------------------------------
@pytest.mark.slow
def test_trained_model_generates_reversals_ending_in_eos_then_padding(trained):
    out = trained.generate(padded_sources(), 10)
    assert out[:, 0].tolist() == [SOS] * 3
    rows = out.tolist()
    for row, n in zip(rows, (6, 2, 4)):
        assert EOS in row, row
        end = row.index(EOS)
        assert all(t == PAD for t in row[end + 1 :])
    # the toy task was learnt well enough to reverse the short sources exactly
    assert rows[1][1:4] == [4, 11, EOS]


@pytest.mark.slow
@pytest.mark.parametrize("num_beams", [1, 3])
def test_cached_and_uncached_decoding_give_identical_tokens(trained, num_beams):
    src = padded_sources()
    a = trained.generate(src, 10, num_beams=num_beams, use_cache=True)
    b = trained.generate(src, 10, num_beams=num_beams, use_cache=False)
    assert a.tolist() == b.tolist()


@pytest.mark.slow
def test_cache_matches_past_its_initial_capacity():
    torch.manual_seed(1)
    model = tiny()  # untrained: runs the full length; 70 > the cache's first 64 slots
    src = padded_sources()
    a = model.generate(src, 70, eos_token_id=-1)
    b = model.generate(src, 70, eos_token_id=-1, use_cache=False)
    assert a.shape == (3, 71) and a.tolist() == b.tolist()


@pytest.mark.slow
@pytest.mark.parametrize("num_beams", [1, 3])
def test_padded_batch_equals_each_sequence_alone(trained, num_beams):
    src = padded_sources()
    batch = trained.generate(src, 10, num_beams=num_beams)
    for i in range(3):
        alone = trained.generate(src[i : i + 1, : int((src[i] != 0).sum())], 10, num_beams=num_beams)
        n = alone.shape[1]
        assert batch[i, :n].tolist() == alone[0].tolist()
        assert (batch[i, n:] == PAD).all()


@pytest.mark.slow
def test_one_beam_equals_greedy(trained):
    src = padded_sources()
    greedy = trained.generate(src, 10)
    # beam search's own loop with one beam, against the plain greedy loop
    from attnlab.generation import beam_search
    from attnlab.models.seq2seq import _Seq2SeqStep

    memory, mask = trained.encode(src)
    start = torch.full((3, 1), SOS)
    one_beam = beam_search(_Seq2SeqStep(trained, memory, mask, True), start, 10, num_beams=1,
                           eos_token_id=EOS)
    plain = decode(_Seq2SeqStep(trained, memory, mask, True), start, 10, eos_token_id=EOS)
    assert one_beam.tolist() == greedy.tolist() == plain.tolist()


def model_score(model, src, out, length_penalty):
    """sum log p(token) over the generated tokens (EOS included) / length ** length_penalty."""
    logprobs = model(src, out[:, :-1]).log_softmax(-1)  # (B, T-1, V)
    tokens = out[:, 1:]
    picked = logprobs.gather(-1, tokens[..., None]).squeeze(-1)  # (B, T-1)
    real = tokens != PAD
    return (picked * real).sum(-1) / real.sum(-1).float() ** length_penalty


@pytest.mark.parametrize("length_penalty", [0.0, 1.0])
def test_beam_search_is_no_worse_than_greedy_in_model_score(length_penalty):
    torch.manual_seed(3)
    model = tiny(tie_embeddings=False)
    torch.nn.init.normal_(model.output.weight, std=0.5)  # a peakier, more varied random model
    src = torch.randint(4, 14, (8, 5))
    eos = 5  # a token this random model emits now and then
    greedy = model.generate(src, 12, eos_token_id=eos)
    beam = model.generate(src, 12, num_beams=4, eos_token_id=eos, length_penalty=length_penalty)
    g, b = (model_score(model, src, o, length_penalty) for o in (greedy, beam))
    assert (b >= g - 1e-5).all(), (g, b)
    assert (b > g + 1e-3).any()  # and it does find better sequences on some rows


@pytest.mark.slow
def test_generate_restores_training_mode(trained):
    trained.train()
    trained.generate(padded_sources(), 3)
    assert trained.training
    trained.eval()
