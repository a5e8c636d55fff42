"""CausalLM: causality, cached = uncached, padding, sampling controls, EOS. fp32, atol 1e-5."""
import pytest
import torch
from torch.testing import assert_close

from attnlab.models import CausalLM
from attnlab.models.lm_generation import cached_steps

TOL = dict(atol=1e-5, rtol=1e-5)
CONFIGS = [dict(positional=p, norm_first=nf) for p in ("learned", "sinusoidal", "rope")
           for nf in (True, False)]


def tiny(**kw):
    args = dict(model_dim=32, num_heads=4, num_layers=2, dim_feedforward=48, max_len=64)
    args.update(kw)
    return CausalLM(41, **args).eval()


def test_shapes_parameters_and_tied_head():
    lm = tiny()
    assert lm(torch.randint(0, 41, (3, 7))).shape == (3, 7, 41)
    assert lm.lm_head.weight is lm.token_embedding.weight
    untied = tiny(tie_weights=False)
    n_tied = sum(p.numel() for p in lm.parameters())
    assert sum(p.numel() for p in untied.parameters()) == n_tied + 41 * 32


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c['positional']}-nf{c['norm_first']}")
def test_causality_future_tokens_do_not_change_past_logits(cfg):
    lm = tiny(**cfg)
    ids = torch.randint(0, 41, (2, 10))
    changed = ids.clone()
    changed[:, 6:] = torch.randint(0, 41, (2, 4))
    with torch.no_grad():
        a, b = lm(ids), lm(changed)
    assert_close(a[:, :6], b[:, :6], **TOL)
    assert not torch.allclose(a[:, 6:], b[:, 6:])


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c['positional']}-nf{c['norm_first']}")
def test_cached_generation_equals_uncached(cfg):
    lm = tiny(**cfg)
    ids = torch.randint(0, 41, (3, 5))
    cached = lm.generate(ids, 25)
    assert cached.shape == (3, 30)
    assert torch.equal(cached[:, :5], ids)
    assert torch.equal(cached, lm.generate(ids, 25, use_cache=False))


# a sliding window of 3 over a padded batch: the windowed cache drops keys from the 3rd step,
# and its step reads the padding mask's last keys only
@pytest.mark.parametrize("cfg", CONFIGS + [dict(positional="rope", norm_first=True,
                                                sliding_window=3)],
                         ids=lambda c: f"{c['positional']}-nf{c['norm_first']}"
                                       f"{'-window' if 'sliding_window' in c else ''}")
def test_cached_step_logits_equal_full_forward(cfg):
    # the optimised decode step must compute the same numbers as the plain forward pass
    lm = tiny(**cfg)
    ids = torch.randint(0, 41, (2, 4))
    mask = torch.ones_like(ids)
    mask[0, :2] = 0
    out = lm.generate(ids, 8, attention_mask=mask)
    with torch.inference_mode():
        steps = cached_steps(lm, out[:, :4], mask, 8)
        logits = [next(steps)] + [steps.send(out[:, 4 + t : 5 + t]) for t in range(7)]
    full_mask = torch.cat([mask, torch.ones(2, 8, dtype=mask.dtype)], 1)
    with torch.no_grad():
        full = lm(out, full_mask)[:, 3:-1]  # (B, 8, V): the logits that chose tokens 4..11
    assert_close(torch.stack(logits, 1), full, **TOL)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c['positional']}-nf{c['norm_first']}")
def test_padded_batch_equals_each_prompt_alone(cfg):
    lm = tiny(**cfg)
    prompts = [torch.randint(3, 41, (n,)) for n in (6, 2, 4)]
    T0 = max(len(p) for p in prompts)
    ids = torch.zeros(3, T0, dtype=torch.long)
    mask = torch.zeros(3, T0, dtype=torch.long)
    for i, p in enumerate(prompts):  # right padding: generate moves it to the left
        ids[i, : len(p)], mask[i, : len(p)] = p, 1
    batch = lm.generate(ids, 12, attention_mask=mask)
    for i, p in enumerate(prompts):
        alone = lm.generate(p[None], 12)
        assert torch.equal(batch[i, T0 - len(p):], alone[0]), f"row {i}"
        assert batch[i, : T0 - len(p)].eq(0).all()  # left padding kept in the output


def test_greedy_is_deterministic_and_seeded_sampling_reproducible():
    lm = tiny()
    ids = torch.randint(0, 41, (2, 3))
    assert torch.equal(lm.generate(ids, 15), lm.generate(ids, 15))
    a = lm.generate(ids, 15, do_sample=True, generator=torch.Generator().manual_seed(7))
    b = lm.generate(ids, 15, do_sample=True, generator=torch.Generator().manual_seed(7))
    c = lm.generate(ids, 15, do_sample=True, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.slow
def test_sampling_keeps_exactly_the_top_k_and_top_p_tokens():
    lm = tiny()
    with torch.no_grad():  # a peaked, known next-token distribution after the prompt
        lm.lm_head.weight.mul_(30)
    ids = torch.tensor([[5, 9, 11]])
    with torch.no_grad():
        logits = lm(ids)[0, -1]
    order = logits.argsort(descending=True)
    draws = lambda **kw: {int(lm.generate(ids, 1, do_sample=True, generator=torch.Generator().manual_seed(s), **kw)[0, -1])
                          for s in range(60)}
    assert draws(top_k=1) == {int(order[0])}  # top-k 1 is the argmax
    assert draws(top_k=3, temperature=50.0) == set(order[:3].tolist())  # flat: all 3 appear
    probs = logits.softmax(-1)[order]
    k = int((probs.cumsum(0) - probs < 0.9).sum())  # smallest prefix reaching mass 0.9
    assert draws(top_p=0.9) <= set(order[:k].tolist())
    assert lm.generate(ids, 1, do_sample=True, top_k=1)[0, -1] == lm.generate(ids, 1)[0, -1]


def test_eos_stops_rows_and_pads_after_it():
    lm = tiny()
    ids = torch.randint(3, 41, (2, 4))
    free = lm.generate(ids, 10)
    eos = int(free[0, 6])  # the token row 0 emits third
    out = lm.generate(ids, 10, eos_token_id=eos, pad_token_id=0)
    first = (free[0, 4:] == eos).nonzero()[0, 0]
    assert torch.equal(out[0, : 5 + first], free[0, : 5 + first])
    assert out[0, 5 + first:].eq(0).all()
    hits = (free[:, 4:] == eos)
    if hits.any(1).all():  # every row stopped: generation ended early
        assert out.shape[1] == 4 + int(hits.float().argmax(1).max()) + 1


def test_stream_yields_the_generated_tokens_one_step_at_a_time():
    lm = tiny()
    ids = torch.randint(0, 41, (1, 3))
    tokens = list(lm.stream(ids, 6))
    assert [t.shape for t in tokens] == [(1, 1)] * 6
    assert torch.equal(torch.cat([ids, *tokens], 1), lm.generate(ids, 6))
    assert not torch.is_inference_mode_enabled()  # not leaked to the caller between tokens
    out = lm.generate(ids, 2)
    lm(out).sum().backward()  # generated ids are ordinary tensors, usable with autograd


def test_generate_restores_training_mode():
    lm = tiny(dropout=0.3).train()
    ids = torch.randint(0, 41, (1, 3))
    assert torch.equal(lm.generate(ids, 5), lm.eval().generate(ids, 5))
    lm.train()
    lm.generate(ids, 2)
    assert lm.training


def test_errors_show_the_bad_values():
    lm = tiny()
    ids = torch.randint(0, 41, (1, 60))
    with pytest.raises(ValueError, match=r"60.*10.*max_len \(64\)"):
        lm.generate(ids, 10)
    with pytest.raises(ValueError, match="temperature"):
        lm.generate(ids[:, :3], 2, do_sample=True, temperature=0)
    with pytest.raises(ValueError, match="top_k"):
        lm.stream(ids[:, :3], 2, do_sample=True, top_k=0)
    with pytest.raises(ValueError, match="positional"):
        CausalLM(10, positional="xpos")  # unknown (alibi is a registered kind)
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        lm(torch.zeros(5, dtype=torch.long))
    # ids are checked where they enter generation (the forward pass reads no values)
    with pytest.raises(ValueError, match=r"input_ids must be token ids in 0\.\.40, got values 0\.\.41"):
        lm.generate(torch.tensor([[0, 41]]), 2)
    with pytest.raises(ValueError, match=r"0\.\.40, got values -1\.\.3"):
        list(lm.stream(torch.tensor([[3, -1]]), 80, slide=True))


def test_sliding_stream_continues_past_max_len_from_the_last_half_of_the_context():
    lm = tiny(max_len=16)
    ids = torch.randint(0, 41, (1, 6))
    new = torch.cat(list(lm.stream(ids, 30, slide=True)), 1)
    assert new.shape == (1, 30)
    first = lm.generate(ids, 10)  # the context fills up after 10 new tokens
    assert torch.equal(new[:, :10], first[:, 6:])
    second = lm.generate(first[:, -8:], 8)  # then the last 16 // 2 tokens are re-read
    assert torch.equal(new[:, 10:18], second[:, 8:])
    with pytest.raises(ValueError, match="max_len"):
        lm.generate(ids, 30)  # generate itself never goes past the context


def test_a_row_that_emitted_eos_stays_finished_when_the_window_slides():
    """A batch streamed past max_len: a row that emitted EOS in the first window holds pad
    ever after, as in ``generate``; it must not start again when the context is re-read."""
    torch.manual_seed(0)
    lm = tiny(max_len=16)
    ids = torch.randint(4, 41, (2, 6))
    sample = dict(do_sample=True, generator=torch.Generator().manual_seed(1))
    free = torch.cat(list(lm.stream(ids, 30, slide=True, **sample)), 1)  # (2, 30), no EOS
    eos = int(free[0, 0])  # row 0 ends at once, in the first of three windows
    pad = (eos + 1) % 41
    out = torch.cat(list(lm.stream(ids, 30, slide=True, eos_token_id=eos, pad_token_id=pad,
                                   do_sample=True, generator=torch.Generator().manual_seed(1))), 1)
    assert out.shape == (2, 30)  # row 1 runs on: it did not emit EOS at its first token
    assert out[0].tolist() == [eos] + [pad] * 29


def test_a_sliding_batch_stops_at_the_token_its_last_row_emits_eos():
    """As ``generate`` does: the stream ran on with pad to the end of the window in which the
    last row ended (up to max_len // 2 - 1 columns more), each a forward pass."""
    torch.manual_seed(6)
    lm = tiny(max_len=16)
    ids = torch.randint(4, 41, (2, 6))
    free = torch.cat(list(lm.stream(ids, 30, slide=True)), 1)  # greedy, (2, 30), no EOS
    row = free[1].tolist()
    later = next(t for t in row[10:] if t not in row[:10])  # row 1's first new token there
    eos = [int(free[0, 0]), later]  # row 0 ends at once, row 1 in the second window
    last = next(j for j, t in enumerate(row) if t in eos)
    assert 10 <= last < 29  # (the first window holds 16 - 6 = 10 new tokens)
    out = torch.cat(list(lm.stream(ids, 30, slide=True, eos_token_id=eos, pad_token_id=0)), 1)
    assert out.shape == (2, last + 1)
    assert out[1].tolist() == free[1, :last + 1].tolist()


@pytest.mark.parametrize("positional", ["learned", "rope"])
@pytest.mark.parametrize("width", [32, 256])
def test_it_starts_from_small_init_with_gpt2s_residual_scaling(positional, width):
    """Weights N(0, 2/5D), the residual stream's two projections per block N(0, 2/5D / 2L),
    biases zero, norms at one: the layers' own defaults (Xavier, nn.Linear's uniform) trained
    a language model visibly worse in the same steps, and GPT-2's fixed 0.02 a narrow one
    (benchmarks/RESULTS.md, lm_quality_probe)."""
    torch.manual_seed(0)
    L = 4
    model = CausalLM(3000, model_dim=width, num_heads=4, num_layers=L, positional=positional)
    std = (2 / (5 * width)) ** 0.5
    for name, p in model.named_parameters():
        if name.endswith(("o_proj.weight", "linear_net.3.weight")):
            expected = std / (2 * L) ** 0.5
        elif "norm" in name and name.endswith("weight"):
            assert torch.equal(p, torch.ones_like(p)), name
            continue
        elif name.endswith("weight"):
            expected = std
        else:  # biases
            assert not p.any(), name
            continue
        assert abs(p.std().item() - expected) < 0.1 * expected, name
        assert abs(p.mean().item()) < 0.1 * expected, name
    assert model.lm_head.weight is model.token_embedding.weight


@pytest.mark.slow
@pytest.mark.parametrize("positional", ["rope", "learned", "alibi"])
def test_a_sliding_window_generates_as_uncached_with_a_bounded_cache(positional):
    """--sliding-window 4: 60 new tokens, far past the window, are the uncached path's token
    for token, and each layer's cache holds at most 2·W steps (not the 66 generated)."""
    from attnlab.models.lm_generation import LMStep

    W = 4
    lm = tiny(positional=positional, sliding_window=W, max_len=128)
    ids = torch.randint(0, 41, (2, 6))
    cached = lm.generate(ids, 60)
    assert torch.equal(cached, lm.generate(ids, 60, use_cache=False))
    step, seq = LMStep(lm, None, 66), ids
    with torch.inference_mode():
        for _ in range(60):
            seq = torch.cat([seq, step(seq).argmax(-1, keepdim=True)], 1)
            assert all(c.stored <= 2 * W for c in step.cache)
    assert torch.equal(seq, cached)
    assert [c.length for c in step.cache] == [65] * 2  # the last token is never fed back
    assert all(c.stored <= 2 * W and c.k.shape[2] == c.stored for c in step.cache)

