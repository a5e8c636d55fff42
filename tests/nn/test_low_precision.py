"""bfloat16 and float16: attention, the encoder stack and CausalLM against their float32 selves.

Each low-precision model is ``copy.deepcopy(model).to(dtype)`` of a float32 model, run on the
same input rounded to the dtype; outputs at real (non-padded) positions must match the float32
outputs, and no output anywhere (padded positions and query rows that may attend to nothing
included) may be NaN or inf. Both dtypes run on CPU in torch 2.13 (fused and reference paths).

Tolerance. Rounding a value to the dtype changes it by at most eps/2 relative (eps = 2**-7 for
bfloat16, 2**-10 for float16). Inputs, weights and every activation are rounded, but CPU matrix
products and the fused kernel accumulate in float32, so each layer adds an error of a few eps/2
relative to the scale of its output rather than one growing with the reduction width; LayerNorm
re-normalises, so layers add their errors instead of multiplying them. Measured over 30-40 seeds
(max |error| / max |float32 output|, in units of eps): at most 0.9 for one attention, 1.75 for
a 2-layer encoder, 2.15 for the logits of a 2-layer CausalLM and 1.7 for its cached decoding
step. The bound used, 4 · eps · max |float32 output|, is nearly twice the worst seen; a lost
mask, an overflowing fill value or a path that computes something else misses by the output's
own scale.
"""
import copy

import pytest
import torch
from torch.testing import assert_close

import attnlab.nn as an
from attnlab.models import CausalLM
from attnlab.models.lm_generation import cached_steps

DTYPES = [torch.bfloat16, torch.float16]
EPS_UNITS = 4  # see the module docstring
B, T, D, H = 4, 7, 16, 4


def _close_on_real(low, ref, real, dtype):
    """``low`` (in ``dtype``) is finite everywhere and within 4·eps·scale of ``ref`` where
    ``real``; the scale is the largest float32 output there."""
    assert low.dtype == dtype
    bad = int((~torch.isfinite(low)).sum())
    assert bad == 0, f"{dtype}: {bad} outputs are NaN or inf"
    atol = EPS_UNITS * torch.finfo(dtype).eps * ref[real].abs().max().item()
    assert_close(low.float()[real], ref[real], atol=atol, rtol=0.0)


def _real_positions():
    """(B, T) True at real tokens: full, right-padded, left-padded, and all padding."""
    real = torch.ones(B, T, dtype=torch.bool)
    real[1, 4:] = False
    real[2, :3] = False  # with is_causal its first three queries may attend to nothing
    real[3] = False  # every query row of this sample may attend to nothing
    return real


def _build(kind):
    if kind == "attention":
        return an.MultiheadAttention(D, D, H).eval()
    return an.TransformerEncoder(2, input_dim=D, num_heads=H, dim_feedforward=2 * D,
                                 norm_first=kind == "encoder-preLN").eval()


def _run(model, x, mask, reference, is_causal):
    """The fused path, or the reference one (``return_attention=True``, in every block)."""
    if isinstance(model, an.MultiheadAttention):
        out = model(x, mask, reference, is_causal=is_causal)
        return out[0] if reference else out
    if not reference:
        return model(x, mask, is_causal=is_causal)
    for layer in model.layers:
        x, _ = layer(x, mask, is_causal=is_causal, return_attention=True)
    return model.norm(x)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reference", [False, True], ids=["fused", "reference"])
@pytest.mark.parametrize("is_causal", [False, True], ids=["padding", "padding+causal"])
@pytest.mark.parametrize("kind", ["attention", "encoder-postLN", "encoder-preLN"])
def test_low_precision_matches_float32_on_real_positions(kind, is_causal, reference, dtype):
    model = _build(kind)
    real = _real_positions()
    mask = real[:, None, None, :]  # (B, 1, 1, T): keys that are real
    x = torch.randn(B, T, D)
    with torch.no_grad():
        ref = _run(model, x, mask, reference, is_causal)
        low = _run(copy.deepcopy(model).to(dtype), x.to(dtype), mask, reference, is_causal)
    _close_on_real(low, ref, real, dtype)


def _tiny_lm(**kw):
    return CausalLM(41, model_dim=32, num_heads=4, num_layers=2, dim_feedforward=48,
                    max_len=32, **kw).eval()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("positional", ["learned", "rope"])
@pytest.mark.parametrize("norm_first", [True, False], ids=["preLN", "postLN"])
def test_causal_lm_logits_match_float32(norm_first, positional, dtype):
    lm = _tiny_lm(positional=positional, norm_first=norm_first)
    real = _real_positions()
    ids = torch.randint(0, 41, (B, T))
    with torch.no_grad():
        ref = lm(ids, real.long())
        low = copy.deepcopy(lm).to(dtype)(ids, real.long())
    _close_on_real(low, ref, real, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("positional", ["learned", "sinusoidal", "rope"])
def test_cached_decoding_step_logits_match_float32(positional, dtype):
    """The fast decoding step (``CausalLM.step``) in low precision, fed the
    float32 model's tokens after a left-padded prompt, gives float32's logits."""
    lm = _tiny_lm(positional=positional)
    prompts, n = torch.randint(0, 41, (3, 4)), 6
    mask = torch.ones_like(prompts)
    mask[1, :2] = 0
    mask[2, :3] = 0  # one real prompt token
    out = lm.generate(prompts, n, attention_mask=mask)
    with torch.no_grad():
        ref = lm(out, torch.cat([mask, torch.ones(3, n, dtype=mask.dtype)], 1))[:, 3:-1]
    low = copy.deepcopy(lm).to(dtype)
    with torch.inference_mode():  # as in tests/models/test_causal_lm.py, step by step
        steps = cached_steps(low, out[:, :4], mask, n)
        logits = [next(steps)] + [steps.send(out[:, 4 + t : 5 + t]) for t in range(n - 1)]
    _close_on_real(torch.stack(logits, 1), ref, torch.ones(3, n, dtype=torch.bool), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_greedy_generation_follows_float32_while_its_choice_is_clear(dtype):
    """Greedy decoding in low precision picks float32's tokens wherever float32's best logit
    leads the runner-up by more than twice the logits' tolerance (each may move by it). Once a
    step is that close, the two may fairly part ways, and nothing later is compared."""
    lm = _tiny_lm()
    prompts, n = torch.randint(0, 41, (16, 4)), 6  # 16: enough first steps that are clear
    ref = lm.generate(prompts, n)
    low = copy.deepcopy(lm).to(dtype).generate(prompts, n)
    assert low.shape == ref.shape and low.dtype == torch.long
    assert torch.equal(low[:, :4], prompts)
    assert ((low >= 0) & (low < 41)).all()

    with torch.no_grad():
        logits = lm(ref)[:, 3:-1]  # (16, n, V): the float32 logits that chose each new token
    top2 = logits.topk(2, dim=-1).values
    tol = EPS_UNITS * torch.finfo(dtype).eps * logits.abs().max()
    clear = top2[..., 0] - top2[..., 1] > 2 * tol  # (16, n)
    must_match = clear.long().cumprod(dim=1).bool()  # (16, n): every step so far was clear
    assert must_match[:, 0].sum() >= 4, "the seeded setup no longer tests anything"
    assert torch.equal(low[:, 4:][must_match], ref[:, 4:][must_match])
