"""What a practitioner checks against ``transformers``: the distribution attnlab samples the
next token from is the one Hugging Face's logits warpers (temperature, top-k, top-p, in that
order) give on the same logits, edge values included (top-k 1 and past the vocabulary, top-p
1 and tiny, a temperature near attnlab's floor); and a Llama-family model's greedy ids for a
batch of prompts of different lengths, padded on the left or on the right, are those of
``generate`` on the left-padded batch, with and without the key/value cache (RoPE positions
counted from each row's first real token, as ``transformers`` counts them from the mask;
Mistral's and Qwen3's sliding windows, shorter than prompt and continuation, included).

Logits are drawn continuous (no ties: which of two equal logits a filter keeps is arbitrary in
both). Probabilities are compared at atol 1e-6, rtol 1e-5; ids exactly."""
import pytest
import torch
from torch.testing import assert_close

from attnlab.generation import sampling_scores
from attnlab.interop import from_hf
from .test_llama_family import LLAMA3, _tiny

SETTINGS = [  # (temperature, top_k, top_p)
    (1.0, None, None), (0.7, 20, 0.8), (1.3, None, 0.9), (0.5, 7, None), (1.0, 1, None),
    (1.0, 500, None), (0.8, None, 1.0), (1.0, None, 1e-9), (1e-5, None, 0.95), (2.0, 50, 0.3),
]


def _warped(logits, temperature, top_k, top_p):
    """Hugging Face's distribution: the warpers ``generate(do_sample=True)`` builds."""
    from transformers.generation.logits_process import (LogitsProcessorList,
                                                        TemperatureLogitsWarper,
                                                        TopKLogitsWarper, TopPLogitsWarper)
    warpers = [TemperatureLogitsWarper(temperature)]
    if top_k is not None:
        warpers.append(TopKLogitsWarper(top_k))
    if top_p is not None:
        warpers.append(TopPLogitsWarper(top_p))
    ids = torch.zeros(logits.shape[0], 1, dtype=torch.long)
    return LogitsProcessorList(warpers)(ids, logits.clone()).softmax(-1)


@pytest.mark.parametrize("temperature, top_k, top_p", SETTINGS)
def test_the_sampled_distribution_is_hugging_faces(temperature, top_k, top_p):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 300, generator=g) * torch.tensor([0.5, 1, 2, 4, 8, 16])[:, None]
    theirs = _warped(logits, temperature, top_k, top_p)
    ours = sampling_scores(logits, temperature, top_k, top_p).softmax(-1)
    assert_close(ours, theirs, atol=1e-6, rtol=1e-5)
    assert torch.equal(ours > 0, theirs > 0)  # the same tokens can be drawn


def _batch(rows, side):
    """(ids, mask) of ``rows`` padded with id 5 on ``side`` to the longest."""
    T = max(len(r) for r in rows)
    ids = torch.full((len(rows), T), 5, dtype=torch.long)
    mask = torch.zeros(len(rows), T, dtype=torch.long)
    for i, r in enumerate(rows):
        at = slice(T - len(r), T) if side == "left" else slice(0, len(r))
        ids[i, at], mask[i, at] = r, 1
    return ids, mask


@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama", "qwen2", "mistral", "qwen3-window", "llama3"])
def test_a_padded_batch_decodes_as_transformers_left_padded_generate(name):
    # a rope_theta of 10 (the checkpoints' are 1e4 to 1e6) turns every head's rotation fast
    # enough that a token given the wrong position changes the argmax: with the default, the
    # tiny random models' greedy ids barely depend on positions
    rope = {**(LLAMA3 if name == "llama3" else {"rope_type": "default"}), "rope_theta": 10.0}
    hf = _tiny(name, rope_parameters=rope)
    ours = from_hf(hf).eval()
    g = torch.Generator().manual_seed(3)
    rows = [torch.randint(1, 120, (n,), generator=g) for n in (7, 3, 11)]
    left, left_mask = _batch(rows, "left")
    with torch.no_grad():
        expected = hf.generate(left, attention_mask=left_mask, max_new_tokens=15,
                               do_sample=False, pad_token_id=0)[:, left.shape[1]:]
        alone = [hf.generate(r[None], max_new_tokens=15, do_sample=False,
                             pad_token_id=0)[0, len(r):] for r in rows]
    assert expected.tolist() == [a.tolist() for a in alone]  # the padding changes nothing
    for side in ("left", "right"):
        ids, mask = _batch(rows, side)
        for use_cache in (True, False):
            got = ours.generate(ids, 15, attention_mask=mask, use_cache=use_cache)
            assert got[:, ids.shape[1]:].tolist() == expected.tolist(), (side, use_cache)
