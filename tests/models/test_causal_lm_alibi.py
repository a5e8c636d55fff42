"""CausalLM with ALiBi (a kind added through the positional registry), and the per-model fast
steps of generation against the full forward pass. fp32, atol 1e-5."""
import pytest
import torch
from torch.testing import assert_close

import attnlab.nn as an
from attnlab.generation import decode, decode_stream
from attnlab.models import CausalLM, Seq2SeqTransformer
from attnlab.models.lm_generation import LMStep, cached_steps

TOL = dict(atol=1e-5, rtol=1e-5)


def alibi_lm(**kw):
    args = dict(model_dim=32, num_heads=4, num_layers=2, dim_feedforward=48, max_len=64,
                positional="alibi")
    args.update(kw)
    return CausalLM(41, **args)


@pytest.mark.slow
def test_alibi_lm_has_no_position_table_and_trains():
    lm = alibi_lm()
    assert lm.positional_encoding is None and lm.positional == "alibi"
    assert all(isinstance(layer.self_attn.attn_bias, an.ALiBi) for layer in lm.decoder.layers)
    data = torch.arange(12).repeat(4, 3)[:, :33] % 41  # (4, 33) a repeating pattern
    opt = torch.optim.Adam(lm.parameters(), lr=3e-3)
    losses = []
    for _ in range(30):
        logits = lm(data[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), data[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize("norm_first", [True, False])
def test_alibi_cached_generation_equals_uncached_and_steps_equal_forward(norm_first):
    lm = alibi_lm(norm_first=norm_first).eval()
    ids = torch.randint(0, 41, (3, 5))
    assert torch.equal(lm.generate(ids, 20), lm.generate(ids, 20, use_cache=False))
    mask = torch.ones(2, 4, dtype=torch.long)
    mask[0, :2] = 0
    out = lm.generate(ids[:2, :4], 8, attention_mask=mask)
    with torch.inference_mode():
        steps = cached_steps(lm, out[:, :4], mask, 8)
        logits = [next(steps)] + [steps.send(out[:, 4 + t : 5 + t]) for t in range(7)]
    with torch.no_grad():
        full = lm(out, torch.cat([mask, torch.ones(2, 8, dtype=mask.dtype)], 1))[:, 3:-1]
    assert_close(torch.stack(logits, 1), full, **TOL)


def test_alibi_logits_are_invariant_to_a_shift_of_absolute_position():
    """ALiBi sees only i − j: the same tokens after 5 masked pads (every real token 5 places
    later in the tensor, positions passed shifted too) give the same logits."""
    lm = alibi_lm().eval()
    ids = torch.randint(1, 41, (1, 7))
    padded = torch.cat([torch.zeros(1, 5, dtype=torch.long), ids], 1)
    mask = torch.cat([torch.zeros(1, 5), torch.ones(1, 7)], 1).long()
    with torch.no_grad():
        alone = lm(ids)
        shifted = lm(padded, mask, positions=torch.arange(12)[None])  # absolute 5..11
        later = lm(ids, positions=torch.arange(30, 37))
    assert_close(shifted[:, 5:], alone, **TOL)
    assert_close(later, alone, atol=0, rtol=0)


@pytest.mark.parametrize("positional", ["learned", "sinusoidal", "rope", "alibi"])
def test_causal_lm_step_equals_last_position_of_forward(positional):
    lm = CausalLM(41, model_dim=32, num_heads=4, num_layers=2, max_len=64,
                  positional=positional).eval()
    ids = torch.randint(0, 41, (2, 9))
    cache = lm.decoder.make_cache()
    with torch.no_grad():
        lm.hidden_states(ids[:, :6], cache=cache)
        for c in cache:
            c.reserve(9)
        logits = [lm.step(ids[:, t : t + 1], cache, positions=torch.full((2, 1), t))
                  for t in range(6, 9)]
        full = lm(ids)[:, 6:]
    assert_close(torch.stack(logits, 1), full, **TOL)


def test_lm_step_function_drives_generation_decode():
    """CausalLM goes through attnlab.generation: its LMStep under ``decode`` gives generate's
    tokens, and ``decode_stream`` yields them one step at a time."""
    lm = alibi_lm().eval()
    ids = torch.randint(0, 41, (2, 3))
    expected = lm.generate(ids, 6)
    assert torch.equal(decode(LMStep(lm, None, 9), ids, 6), expected)
    tokens = list(decode_stream(LMStep(lm, None, 9), ids, 6))
    assert torch.equal(torch.cat([ids, *tokens], 1), expected)


@pytest.mark.parametrize("norm_first", [False, True])
def test_seq2seq_step_equals_decode_with_cache(norm_first):
    model = Seq2SeqTransformer(20, 30, model_dim=16, num_heads=2, num_layers=2,
                               dim_feedforward=32, norm_first=norm_first).eval()
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
    tgt = torch.tensor([[1, 7, 8, 9, 4], [1, 3, 3, 5, 6]])
    with torch.no_grad():
        memory, mask = model.encode(src)
        cache = model.make_cache()
        steps = [model.step(tgt[:, t : t + 1], memory, mask, cache) for t in range(5)]
        full = model.decode(tgt, memory, mask)
    assert_close(torch.stack(steps, 1), full, **TOL)
    assert torch.equal(model.generate(src, 12), model.generate(src, 12, use_cache=False))
    assert torch.equal(model.generate(src, 12, num_beams=3),
                       model.generate(src, 12, num_beams=3, use_cache=False))


@pytest.mark.parametrize("positional", ["learned", "rope", "alibi"])
def test_padded_batch_with_eos_drops_finished_rows_and_matches_each_prompt_alone(positional):
    """generation.decode_stream drops rows that emitted EOS from the LMStep's batch (caches,
    key mask and positions reordered); every row still gives what it gives alone."""
    lm = CausalLM(41, model_dim=32, num_heads=4, num_layers=2, max_len=64,
                  positional=positional).eval()
    prompts = [torch.randint(3, 41, (n,)) for n in (6, 2, 4)]
    ids = torch.zeros(3, 6, dtype=torch.long)
    mask = torch.zeros(3, 6, dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, : len(p)], mask[i, : len(p)] = p, 1
    eos = int(lm.generate(ids, 12, attention_mask=mask)[1, 8])  # row 1's third new token
    batch = lm.generate(ids, 12, attention_mask=mask, eos_token_id=eos, pad_token_id=0)
    for i, p in enumerate(prompts):
        alone = lm.generate(p[None], 12, eos_token_id=eos, pad_token_id=0)[0]
        row = batch[i, 6 - len(p):]
        assert torch.equal(row[: len(alone)], alone), f"row {i}"
        assert row[len(alone):].eq(0).all()
