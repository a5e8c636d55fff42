"""attnlab.nn.capture: attention weights and outputs by module name, without changing returns.

Every captured map is compared with the attention module re-run on the same inputs with
``return_attention=True`` (the course's contract); fp32, atol 1e-6 (the same reference path).
"""
import pytest
import torch
from torch.testing import assert_close

import attnlab
import attnlab.nn as an
import attnlab.nn.sdpa as sdpa
from attnlab.models import BertEncoder, CausalLM, ElementPredictor, Seq2SeqTransformer, \
    SequenceClassifier

ARGS = dict(input_dim=16, num_heads=4, dim_feedforward=32)
TOL = dict(atol=1e-6, rtol=1e-6)


def _reference_maps(model, run):
    """Each attention module's weights from ``return_attention=True`` on the inputs it got."""
    calls = {}

    def pre_hook(name):
        def hook(module, args, kwargs):
            calls[name] = (module, args, dict(kwargs))
        return hook
    handles = [m.register_forward_pre_hook(pre_hook(n), with_kwargs=True)
               for n, m in model.named_modules() if isinstance(m, an.MultiheadAttention)]
    with torch.no_grad():
        run()
    for h in handles:
        h.remove()
    maps = {}
    with torch.no_grad():
        for name, (module, args, kwargs) in calls.items():
            args = list(args) + [None] * (2 - len(args))
            kwargs.pop("return_attention", None)
            maps[name] = module(args[0], args[1], True, **kwargs)[1]
    return maps


MODELS = {
    "encoder": (lambda: an.TransformerEncoder(2, **ARGS),
                lambda: (torch.randn(2, 6, 16), an.padding_mask(torch.tensor([6, 4]), 6))),
    "decoder": (lambda: an.TransformerDecoder(2, **ARGS),
                lambda: (torch.randn(2, 5, 16), torch.randn(2, 7, 16))),
    "causal_lm": (lambda: CausalLM(30, model_dim=16, num_heads=4, num_layers=2, max_len=32),
                  lambda: (torch.randint(0, 30, (2, 7)),)),
    "causal_lm_alibi": (lambda: CausalLM(30, model_dim=16, num_heads=4, num_layers=2,
                                         max_len=32, positional="alibi"),
                        lambda: (torch.randint(0, 30, (2, 7)),)),
    "classifier": (lambda: SequenceClassifier(3, vocab_size=20, model_dim=16, num_heads=4),
                   lambda: (torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0]]),)),
    "seq2seq": (lambda: Seq2SeqTransformer(20, 30, model_dim=16, num_heads=2, num_layers=2),
                lambda: (torch.tensor([[5, 6, 2, 0]]), torch.tensor([[1, 7, 8]]))),
    "predictor": (lambda: ElementPredictor(10, 16, 10, num_heads=2, num_layers=2),
                  lambda: (torch.randint(10, (2, 8)),)),
    "bert": (lambda: BertEncoder(50, model_dim=16, num_heads=4, num_layers=2, dim_feedforward=32),
             lambda: (torch.randint(0, 50, (2, 6)), torch.tensor([[1] * 6, [1] * 4 + [0] * 2]))),
}


def _model_and_run(kind):
    make, make_inputs = MODELS[kind]
    model, inputs = make().eval(), make_inputs()
    return model, lambda m: m(*inputs)


@pytest.mark.parametrize("kind", list(MODELS))
def test_capture_gives_every_layers_weights_as_return_attention(kind):
    model, run = _model_and_run(kind)
    expected = _reference_maps(model, lambda: run(model))
    with torch.no_grad(), an.capture(model) as cache:
        run(model)
    assert set(cache) == set(expected) and len(cache) >= 2
    for name, weights in expected.items():
        assert cache[name].ndim == 4
        assert_close(cache[name], weights, **TOL)


@pytest.mark.parametrize("kind", list(MODELS))
def test_forward_without_capture_is_unchanged_and_stays_fused(kind, monkeypatch):
    model, run = _model_and_run(kind)
    with torch.no_grad():
        before = run(model)
        with an.capture(model):
            during = run(model)  # reference path: the same outputs
    assert_close(during, before, atol=1e-5, rtol=1e-5)

    def no_reference(*args, **kwargs):
        raise AssertionError("the reference path ran outside a capture")
    monkeypatch.setattr(sdpa, "scaled_dot_product", no_reference)
    with torch.no_grad():
        after = run(model)
    assert torch.equal(after, before)  # bit for bit: the same fused computation as before
    assert all(not m._attention_sinks for m in model.modules()
               if isinstance(m, an.MultiheadAttention))


def test_selecting_modules_and_outputs_and_accumulating():
    enc = an.TransformerEncoder(3, **ARGS).eval()
    x = torch.randn(1, 5, 16)
    with an.capture(enc, "layers.[02].self_attn") as cache:
        enc(x)
    assert sorted(cache) == ["layers.0.self_attn", "layers.2.self_attn"]
    with an.capture(enc, ["layers.1", "layers.1.self_attn"], outputs=True) as cache:
        out = enc(x)
    assert sorted(cache) == ["layers.1.self_attn", "layers.1.self_attn:output", "layers.1:output"]
    h = enc.layers[1](enc.layers[0](x))
    assert_close(cache["layers.1:output"], h, **TOL)
    with an.capture(enc, lambda name: name == "layers.2.self_attn", accumulate=True) as cache:
        enc(x)
        enc(x[:, :3])
    assert [w.shape[-1] for w in cache["layers.2.self_attn"]] == [5, 3]
    assert_close(enc(x), out, **TOL)
    with pytest.raises(ValueError, match=r"select no module.*TransformerEncoder"):
        with an.capture(enc, "decoder.*"):
            pass


@pytest.mark.slow
def test_capture_is_exported_from_attnlab_without_heavy_imports():
    import subprocess
    import sys
    code = ("import sys, attnlab; assert 'torch' not in sys.modules; "
            "from attnlab import capture; from attnlab.nn import capture as c2; "
            "assert capture is c2; "
            "assert not any(m.startswith(('lightning', 'transformers', 'matplotlib')) "
            "for m in sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert attnlab.capture is an.capture


def test_capture_during_cached_generation_records_each_step():
    lm = CausalLM(30, model_dim=16, num_heads=4, num_layers=2, max_len=32).eval()
    ids = torch.randint(0, 30, (1, 4))
    plain = lm.generate(ids, 5)
    with an.capture(lm, "decoder.layers.1.self_attn", accumulate=True) as cache:
        captured = lm.generate(ids, 5)
    assert torch.equal(captured, plain)
    shapes = [tuple(w.shape) for w in cache["decoder.layers.1.self_attn"]]
    assert shapes == [(1, 4, 4, 4)] + [(1, 4, 1, 4 + t) for t in range(1, 5)]


def test_a_block_whose_attention_records_no_weights_says_why():
    """A block given an attention of its own (``attn=``) without ``_attention_sinks`` has no
    weights to return; return_attention once raised a bare KeyError('self_attn')."""
    class NoWeights(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, x, mask=None, **_):
            return self.proj(x)

    block = an.EncoderBlock(8, 2, 16, attn=NoWeights())
    with pytest.raises(KeyError, match=r"nothing was recorded under 'self_attn' \(recorded: "
                                       r"\[\]\): .*has `_attention_sinks`"):
        block(torch.randn(1, 3, 8), return_attention=True)
