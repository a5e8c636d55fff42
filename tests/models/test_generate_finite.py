"""``generate(..., finite=[])`` says per row whether the logits of every step it took were
finite. ``evaluate`` of a translate run looked only at the first decoding step: a model finite
there and NaN after (a target-embedding row that overflows once the token is read back) was
scored BLEU 0.0 / chrF 0.0 with exit 0 and no warning. The search now reads its own logits (no
extra pass), greedy and beam, and a finite model translates exactly as before."""
import pytest
import torch
from torch import Tensor

from attnlab.models import RNNSeq2Seq, Seq2SeqTransformer

SRC = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0], [10, 2, 0, 0]])  # (B, S), 0 pads


def nan_later(model: Seq2SeqTransformer, src: Tensor = SRC) -> int:
    """Make ``model`` finite at the first decoding step and NaN from the next (in place): the
    first step's argmax token t of the first row gets an output row of 1e36 along that row's
    last hidden state (still the argmax, its logit ~1e37 finite), the target embedding of t
    too (tied) or 1e36 (read back at the next step, its attention scores overflow). Returns t."""
    model.eval()
    hidden = {}
    hook = model.output.register_forward_hook(lambda m, args, out: hidden.update(h=args[0]))
    start = torch.full((src.shape[0], 1), model.sos_id)
    with torch.no_grad():
        t = int(model(src, start)[0, 0].argmax())
        hook.remove()
        model.output.weight[t] = 1e36 * hidden["h"][0, 0].sign()
        if model.tgt_embedding.weight is not model.output.weight:  # tied: the same row
            model.tgt_embedding.weight[t] = 1e36
        first = model(src, start)  # (B, 1, V): the first step, as the old check read it
        after = model(src, torch.cat((start, torch.full_like(start, t)), dim=1))  # (B, 2, V)
    assert first.isfinite().all() and int(first[0, 0].argmax()) == t
    assert not after[:, 1].isfinite().any()
    return t


def transformer() -> Seq2SeqTransformer:
    torch.manual_seed(0)
    return Seq2SeqTransformer(20, 30, model_dim=16, num_heads=2, num_layers=1,
                              dim_feedforward=32)


@pytest.mark.parametrize("beams", [1, 3])
def test_a_model_nan_after_its_first_step_is_not_finite(beams):
    model = transformer()
    nan_later(model)
    finite: list[bool] = []
    model.generate(SRC, 6, num_beams=beams, finite=finite)
    assert finite[0] is False  # the row that read the poisoned token back
    assert len(finite) == SRC.shape[0]


@pytest.mark.parametrize("beams", [1, 3])
@pytest.mark.parametrize("make", [transformer,
                                  lambda: RNNSeq2Seq(20, 30, model_dim=16, attention="additive")])
def test_a_finite_model_translates_as_before_and_is_finite(make, beams):
    model = make()
    before = model.generate(SRC, 6, num_beams=beams)
    finite: list[bool] = []
    after = model.generate(SRC, 6, num_beams=beams, finite=finite)
    assert torch.equal(after, before)
    assert finite == [True] * SRC.shape[0]
