"""RNNSeq2Seq, the GRU encoder–decoder with additive, bilinear or no attention: padding changes
nothing, incremental decoding equals recomputation, beam search with one beam is greedy
decoding, alignments are distributions over the real source positions, and it learns."""
import pytest
import torch

from attnlab.generation import beam_search, decode
from attnlab.models.rnn_seq2seq import ATTENTIONS, RNNSeq2Seq, _RNNStep

ATOL = 1e-5  # float32; packed and unpacked GRU runs sum in different orders


def model_of(attention, **kwargs):
    torch.manual_seed(0)
    return RNNSeq2Seq(12, 10, model_dim=16, attention=attention, num_layers=2, **kwargs).eval()


SOURCES = [[5, 6, 7, 8, 2], [9, 4, 2], [3, 2]]


def padded(rows, pad=0):
    width = max(map(len, rows))
    return torch.tensor([r + [pad] * (width - len(r)) for r in rows])


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_a_padded_batch_equals_each_sequence_alone(attention):
    model = model_of(attention)
    src, tgt = padded(SOURCES), torch.tensor([[1, 4, 5, 6]] * 3)
    batch = model(src, tgt)
    alone = torch.cat([model(torch.tensor([s]), tgt[:1]) for s in SOURCES])
    torch.testing.assert_close(batch, alone, atol=ATOL, rtol=0)
    generated = model.generate(src, 6, eos_token_id=-1)  # never stops: every step compared
    one_by_one = torch.cat([model.generate(torch.tensor([s]), 6, eos_token_id=-1)
                            for s in SOURCES])
    assert torch.equal(generated, one_by_one)


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_incremental_decoding_equals_recomputing_the_prefix(attention):
    model = model_of(attention)
    src = padded(SOURCES)
    cached = model.generate(src, 8, use_cache=True)
    full = model.generate(src, 8, use_cache=False)
    assert torch.equal(cached, full)
    memory, mask, state = model.encode(src)
    tgt = torch.tensor([[1, 4, 5, 6, 7]] * 3)
    step = _RNNStep(model, memory, mask, state, use_cache=True)
    stepwise = torch.stack([step(tgt[:, : t + 1]) for t in range(5)], dim=1)
    torch.testing.assert_close(stepwise, model(src, tgt), atol=ATOL, rtol=0)


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_one_beam_is_greedy_decoding(attention):
    model = model_of(attention)
    src = padded(SOURCES)
    memory, mask, state = model.encode(src)
    start = torch.ones(3, 1, dtype=torch.long)
    greedy = decode(_RNNStep(model, memory, mask, state, True), start, 7, eos_token_id=2)
    beam = beam_search(_RNNStep(model, memory, mask, state, True), start, 7, num_beams=1,
                       eos_token_id=2)
    assert torch.equal(greedy[:, : beam.shape[1]], beam)
    assert model.generate(src, 7, num_beams=3).shape[0] == 3


@pytest.mark.parametrize("attention", ["additive", "bilinear"])
def test_alignments_are_distributions_over_the_real_source(attention):
    model = model_of(attention)
    src, tgt = padded(SOURCES), torch.tensor([[1, 4, 5]] * 3)
    (weights,) = model.cross_attention(src, tgt)  # (B, 1, T, S)
    assert weights.shape == (3, 1, 3, 5) and torch.isfinite(weights).all()
    real = src != 0
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 1, 3))
    assert (weights.masked_select(~real[:, None, None, :]) == 0).all()


def test_without_attention_there_is_no_alignment_and_the_source_enters_only_s0():
    model = model_of("none")
    with pytest.raises(ValueError, match="no alignment"):
        model.cross_attention(padded(SOURCES), torch.tensor([[1]] * 3))
    assert model.attention is None


@pytest.mark.slow
@pytest.mark.parametrize("attention", ATTENTIONS)
def test_it_learns_to_copy_a_short_sequence(attention):
    torch.manual_seed(0)
    model = RNNSeq2Seq(8, 8, model_dim=32, attention=attention)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    src = torch.randint(3, 8, (32, 4))
    tgt = torch.cat([torch.ones(32, 1, dtype=torch.long), src, torch.full((32, 1), 2)], dim=1)
    losses = []
    for _ in range(60):
        logits = model(src, tgt[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]  # ln 8 ≈ 2.1 at the start


def test_bad_attention_is_named():
    with pytest.raises(ValueError, match="'dot'"):
        RNNSeq2Seq(5, 5, attention="dot")
